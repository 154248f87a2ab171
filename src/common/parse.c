/* parse.c - strict parsing of command-line and environment values */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

int parse_long (
    const char *what, const char *s, long min, long max, long *out, elastic_error_t *err)
{
    char *end;
    long v;

    if (!s || *s == '\0') {
        return errprintf (
            err, "%s: empty value (expected an integer in %ld..%ld)", what, min, max);
    }
    errno = 0;
    v = strtol (s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return errprintf (
            err, "%s: '%s' is not an integer (expected %ld..%ld)", what, s, min, max);
    }
    if (v < min || v > max) {
        return errprintf (
            err, "%s: %ld is out of range (expected %ld..%ld)", what, v, min, max);
    }
    *out = v;
    return 0;
}

int parse_seconds (const char *what,
                   const char *s,
                   double min,
                   double max,
                   double *out,
                   elastic_error_t *err)
{
    char *end;
    double v, scale = 1.0;

    if (!s || *s == '\0') {
        return errprintf (
            err,
            "%s: empty value (expected a duration such as 30, 2.5, 500ms, 2m)",
            what);
    }
    errno = 0;
    v = strtod (s, &end);
    if (errno != 0 || end == s)
        goto bad;
    if (strcmp (end, "") == 0 || strcmp (end, "s") == 0)
        scale = 1.0;
    else if (strcmp (end, "ms") == 0)
        scale = 1e-3;
    else if (strcmp (end, "m") == 0)
        scale = 60.0;
    else if (strcmp (end, "h") == 0)
        scale = 3600.0;
    else
        goto bad;
    v *= scale;
    if (!(v >= min && v <= max)) {
        return errprintf (
            err, "%s: '%s' is out of range (expected %g..%g seconds)", what, s, min, max);
    }
    *out = v;
    return 0;
bad:
    return errprintf (
        err,
        "%s: '%s' is not a duration (expected a number with an optional unit ms, "
        "s, m, h)",
        what,
        s);
}

int parse_bool (const char *s, int *out)
{
    static const char *yes[] = {"1", "true", "yes", "on"};
    static const char *no[] = {"0", "false", "no", "off"};

    if (!s)
        return -1;
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp (s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp (s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}
