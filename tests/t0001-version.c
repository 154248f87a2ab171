/* t0001-version.c - elastic_version() and elastic_strerror() */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <elastic.h>
#include "lib/tap.h"

int main (void)
{
    int major = -1, minor = -1, patch = -1;
    char want[64];
    const char *v = elastic_version (&major, &minor, &patch);

    is_int (major, ELASTIC_VERSION_MAJOR, "major version matches the header");
    is_int (minor, ELASTIC_VERSION_MINOR, "minor version matches the header");
    is_int (patch, ELASTIC_VERSION_PATCH, "patch version matches the header");
    snprintf (want, sizeof (want), "%d.%d.%d", major, minor, patch);
    is_str (v, want, "version string is MAJOR.MINOR.PATCH");
    is_str (v, PACKAGE_VERSION, "version string matches the package version");
    ok (elastic_version (NULL, NULL, NULL) == v, "NULL out-pointers are accepted");
    ok (ELASTIC_VERSION_HEX == ((major << 16) | (minor << 8) | patch),
        "ELASTIC_VERSION_HEX encodes the components");

    is_str (elastic_strerror (ELASTIC_OK), "success", "strerror(OK)");
    for (int c = ELASTIC_ERR_INVAL; c <= ELASTIC_ERR_UNSUPPORTED; c++)
        ok (strcmp (elastic_strerror (c), "unknown error code") != 0,
            "strerror(%d) has a name: %s",
            c,
            elastic_strerror (c));
    is_str (elastic_strerror (-1), "unknown error code", "strerror(-1) is unknown");
    is_str (elastic_strerror (9999), "unknown error code", "strerror(9999) is unknown");
    ok (ELASTIC_EXIT_SUSPENDED != ELASTIC_EXIT_RELAUNCH && ELASTIC_EXIT_SUSPENDED > 1 &&
            ELASTIC_EXIT_RELAUNCH > 1,
        "suspend and relaunch exit codes are distinct and not 0/1");
    return done_testing ();
}
