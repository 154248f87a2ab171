/* errorfile.c - torchelastic's JSON error files */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "errorfile.h"
#include "util.h"

#define ERRORFILE_MAX (1024 * 1024)

static double number_of (json_t *v)
{
    if (json_is_number (v))
        return json_number_value (v);
    if (json_is_string (v)) {
        char *end;
        double d = strtod (json_string_value (v), &end);
        if (end != json_string_value (v))
            return d;
    }
    return 0;
}

int errorfile_read (const char *path, struct error_record *rec)
{
    json_error_t jerr;
    json_t *root = NULL, *msg;
    char *text;
    size_t len;

    memset (rec, 0, sizeof (*rec));
    if (!(text = read_file (path, ERRORFILE_MAX, &len)))
        return -1;
    root = json_loadb (text, len, 0, &jerr);
    free (text);
    if (!root || !json_is_object (root) || !(msg = json_object_get (root, "message")))
        goto bad;
    if (json_is_string (msg)) {
        rec->message = strdup (json_string_value (msg));
        rec->timestamp = number_of (json_object_get (root, "timestamp"));
    } else if (json_is_object (msg)) {
        json_t *inner = json_object_get (msg, "message");
        json_t *extra = json_object_get (msg, "extraInfo");
        if (json_is_string (inner))
            rec->message = strdup (json_string_value (inner));
        else
            rec->message = json_dumps (msg, JSON_COMPACT);
        if (json_is_object (extra)) {
            json_t *cs = json_object_get (extra, "py_callstack");
            rec->timestamp = number_of (json_object_get (extra, "timestamp"));
            if (json_is_string (cs) && json_string_length (cs) > 0)
                rec->traceback = strdup (json_string_value (cs));
        }
    } else
        goto bad;
    json_decref (root);
    if (!rec->message) {
        errorfile_clear (rec);
        errno = ENOMEM;
        return -1;
    }
    return 0;
bad:
    json_decref (root);
    errorfile_clear (rec);
    rec->message = strdup ("unreadable error file (not torchelastic's JSON format)");
    errno = EPROTO;
    return -1;
}

void errorfile_clear (struct error_record *rec)
{
    free (rec->message);
    free (rec->traceback);
    rec->message = rec->traceback = NULL;
}

int errorfile_write (const char *path, const char *message, double timestamp)
{
    char tmp[PATH_MAX], ts[32];
    json_t *o;
    char *text = NULL;
    int fd = -1, rc = -1, saved;

    snprintf (ts, sizeof (ts), "%lld", (long long)timestamp);
    o = json_pack ("{s:{s:s s:{s:s s:s}}}",
                   "message",
                   "message",
                   message,
                   "extraInfo",
                   "py_callstack",
                   "",
                   "timestamp",
                   ts);
    if (!o || !(text = json_dumps (o, JSON_COMPACT)))
        goto out;
    if (snprintf (tmp, sizeof (tmp), "%s.tmp.%d", path, (int)getpid ()) >=
        (int)sizeof (tmp)) {
        errno = ENAMETOOLONG;
        goto out;
    }
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        goto out;
    if (write_all (fd, text, strlen (text)) < 0 || write_all (fd, "\n", 1) < 0)
        goto out;
    if (close (fd) < 0) {
        fd = -1;
        goto out;
    }
    fd = -1;
    if (rename (tmp, path) < 0)
        goto out;
    rc = 0;
out:
    saved = errno;
    if (fd >= 0)
        close (fd);
    if (rc < 0)
        unlink (tmp);
    free (text);
    json_decref (o);
    errno = saved;
    return rc;
}
