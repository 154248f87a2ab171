/* error.h - the one internal error convention (flux-core's errprintf)
 *
 * A function that can fail takes an `elastic_error_t *err` (NULL allowed)
 * and, on failure, fills err->text with one line: what was wrong, which
 * value, and what is accepted.  It returns -1 (or NULL) with errprintf, or
 * an ELASTIC_ERR_* code with errcodef where the caller needs the code.
 * Text is never copied between error forms by hand: pass err down.
 */
#ifndef ELASTIC_COMMON_ERROR_H
#define ELASTIC_COMMON_ERROR_H

#include <stdarg.h>

#include <elastic.h>

/* Fill err (if not NULL) and return -1.  errno is preserved. */
int errprintf (elastic_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* Fill err (if not NULL) and return code.  errno is preserved. */
int errcodef (elastic_error_t *err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* va_list form of both: fill err (if not NULL).  errno is preserved. */
void verrprintf (elastic_error_t *err, const char *fmt, va_list ap)
    __attribute__ ((format (printf, 2, 0)));

/* Prefix err's text with "prefix: " (context added on the way up), keeping
 * the original text when the result would not fit.  NULL-safe. */
void errprefix (elastic_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

#endif /* ELASTIC_COMMON_ERROR_H */
