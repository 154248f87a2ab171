/* log.c - libelastic's diagnostics on stderr, filtered by ELASTIC_LOG */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

static int log_level = -1;
static int log_rank = -1;

static int level_from_env (void)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    const char *s = getenv ("ELASTIC_LOG");

    if (!s || *s == '\0')
        return EL_WARN;
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp (s, names[i]))
            return i;
    }
    if (!strcasecmp (s, "warning"))
        return EL_WARN;
    fprintf (stderr,
             "elastic: warn: ELASTIC_LOG: '%s' is invalid (expected error, warn, info or "
             "debug); using warn\n",
             s);
    return EL_WARN;
}

void el_log_set_rank (int rank)
{
    log_rank = rank;
}

int el_log_enabled (int level)
{
    if (log_level < 0)
        log_level = level_from_env ();
    return level <= log_level;
}

void el_log (int level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    int n;
    va_list ap;

    if (!el_log_enabled (level))
        return;
    if (log_rank >= 0)
        n = snprintf (
            line, sizeof (line), "elastic[rank %d]: %s: ", log_rank, names[level]);
    else
        n = snprintf (line, sizeof (line), "elastic: %s: ", names[level]);
    va_start (ap, fmt);
    vsnprintf (line + n, sizeof (line) - n - 1, fmt, ap);
    va_end (ap);
    /* one write per line so that ranks' lines do not interleave */
    strcat (line, "\n");
    fputs (line, stderr);
    fflush (stderr);
}
