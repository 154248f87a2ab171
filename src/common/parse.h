/* parse.h - strict parsing of command-line and environment values
 *
 * Shared by the tools (elastic-exec, elastic-mpirun, elastic-snapshot).  On
 * error each function returns -1 and writes one line into err naming what
 * was wrong, the value, and what is accepted.
 */
#ifndef ELASTIC_COMMON_PARSE_H
#define ELASTIC_COMMON_PARSE_H

#include <stddef.h>

#include "error.h"

/* Parse a base-10 integer in [min, max] for the option or variable `what`. */
int parse_long (
    const char *what, const char *s, long min, long max, long *out, elastic_error_t *err);

/* Parse a duration in seconds ("30", "2.5", "500ms", "2m", "1h") into
 * seconds, accepting [min, max]. */
int parse_seconds (const char *what,
                   const char *s,
                   double min,
                   double max,
                   double *out,
                   elastic_error_t *err);

/* Parse a boolean: 1/0, true/false, yes/no, on/off.  Returns 0 or -1. */
int parse_bool (const char *s, int *out);

#endif /* ELASTIC_COMMON_PARSE_H */
