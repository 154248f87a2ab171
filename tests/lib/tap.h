/* tap.h - a minimal TAP producer for elastic's C tests
 *
 * Every failed check prints, as TAP diagnostics, what it expected and what it
 * saw.  Header-only: each test program includes it once.
 */
#ifndef ELASTIC_TAP_H
#define ELASTIC_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count;
static int tap_failed;

static inline void tap_plan (int n)
{
    printf ("1..%d\n", n);
    fflush (stdout);
}

static inline void diag (const char *fmt, ...)
{
    va_list ap;
    printf ("# ");
    va_start (ap, fmt);
    vprintf (fmt, ap);
    va_end (ap);
    printf ("\n");
    fflush (stdout);
}

static inline int tap_vok (int cond, const char *fmt, va_list ap)
{
    tap_count++;
    if (!cond)
        tap_failed++;
    printf ("%sok %d - ", cond ? "" : "not ", tap_count);
    vprintf (fmt, ap);
    printf ("\n");
    fflush (stdout);
    return cond;
}

static inline int ok (int cond, const char *fmt, ...)
{
    va_list ap;
    int rc;
    va_start (ap, fmt);
    rc = tap_vok (cond, fmt, ap);
    va_end (ap);
    return rc;
}

#define is_int(got, want, ...)                                                           \
    do {                                                                                 \
        long long g_ = (long long)(got), w_ = (long long)(want);                         \
        if (!ok (g_ == w_, __VA_ARGS__))                                                 \
            diag ("  expected: %lld\n#   got:      %lld (%s)", w_, g_, #got);            \
    } while (0)

#define is_str(got, want, ...)                                                           \
    do {                                                                                 \
        const char *g_ = (got), *w_ = (want);                                            \
        if (!ok (g_ && w_ && strcmp (g_, w_) == 0, __VA_ARGS__))                         \
            diag ("  expected: '%s'\n#   got:      '%s' (%s)",                           \
                  w_ ? w_ : "(null)",                                                    \
                  g_ ? g_ : "(null)",                                                    \
                  #got);                                                                 \
    } while (0)

static inline void skip (int n, const char *why)
{
    for (int i = 0; i < n; i++)
        printf ("ok %d # SKIP %s\n", ++tap_count, why);
    fflush (stdout);
}

static inline void skip_all (const char *why)
{
    printf ("1..0 # SKIP %s\n", why);
    fflush (stdout);
    exit (0);
}

static inline void bail_out (const char *fmt, ...)
{
    va_list ap;
    printf ("Bail out! ");
    va_start (ap, fmt);
    vprintf (fmt, ap);
    va_end (ap);
    printf ("\n");
    fflush (stdout);
    exit (1);
}

/* Print the plan after the tests (when the count is not known up front)
 * and return the exit status. */
static inline int done_testing (void)
{
    printf ("1..%d\n", tap_count);
    fflush (stdout);
    return tap_failed ? 1 : 0;
}

#endif /* ELASTIC_TAP_H */
