/* error.c - the one internal error convention (see error.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

void verrprintf (elastic_error_t *err, const char *fmt, va_list ap)
{
    int saved = errno;

    if (err)
        vsnprintf (err->text, sizeof (err->text), fmt, ap);
    errno = saved;
}

int errprintf (elastic_error_t *err, const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    verrprintf (err, fmt, ap);
    va_end (ap);
    return -1;
}

int errcodef (elastic_error_t *err, int code, const char *fmt, ...)
{
    va_list ap;

    va_start (ap, fmt);
    verrprintf (err, fmt, ap);
    va_end (ap);
    return code;
}

void errprefix (elastic_error_t *err, const char *fmt, ...)
{
    char prefix[sizeof (err->text)], out[sizeof (err->text)];
    int saved = errno;
    va_list ap;
    int n;

    if (!err)
        return;
    va_start (ap, fmt);
    vsnprintf (prefix, sizeof (prefix), fmt, ap);
    va_end (ap);
    n = snprintf (out, sizeof (out), "%s: %s", prefix, err->text);
    if (n >= 0 && (size_t)n < sizeof (out))
        memcpy (err->text, out, (size_t)n + 1);
    errno = saved;
}
