/* version.c - version query and error strings */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <elastic.h>

const char *elastic_version (int *major, int *minor, int *patch)
{
    if (major)
        *major = ELASTIC_VERSION_MAJOR;
    if (minor)
        *minor = ELASTIC_VERSION_MINOR;
    if (patch)
        *patch = ELASTIC_VERSION_PATCH;
    return ELASTIC_VERSION_STRING;
}

const char *elastic_strerror (int code)
{
    switch (code) {
        case ELASTIC_OK:
            return "success";
        case ELASTIC_ERR_INVAL:
            return "invalid argument";
        case ELASTIC_ERR_NOMEM:
            return "out of memory";
        case ELASTIC_ERR_MPI:
            return "MPI error";
        case ELASTIC_ERR_RELAUNCH:
            return "in-place recovery impossible, relaunch needed";
        case ELASTIC_ERR_NO_ULFM:
            return "MPI has no ULFM support (relaunch-only mode)";
        case ELASTIC_ERR_IO:
            return "I/O error";
        case ELASTIC_ERR_CORRUPT:
            return "snapshot data corrupt";
        case ELASTIC_ERR_NO_SNAPSHOT:
            return "no usable snapshot";
        case ELASTIC_ERR_EXISTS:
            return "already exists";
        case ELASTIC_ERR_NOT_FOUND:
            return "not found";
        case ELASTIC_ERR_STATE:
            return "invalid in the current state";
        case ELASTIC_ERR_UNSUPPORTED:
            return "not supported by this build";
        case ELASTIC_ERR_PROC_FAILED:
            return "a process failed";
        case ELASTIC_SUSPENDED:
            return "suspended to a snapshot (exit with ELASTIC_EXIT_SUSPENDED, run again "
                   "to resume)";
    }
    return "unknown error code";
}
