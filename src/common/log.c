/* log.c - timestamped diagnostic lines from the tools, on stderr */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *log_prog = "elastic";
static int log_level = LOG_WARN;
static int log_initialized;

void log_init (const char *prog, int level)
{
    if (prog)
        log_prog = prog;
    log_level = level;
    log_initialized = 1;
}

void log_init_from_env (const char *prog, const char *var)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    const char *v = getenv (var);

    if (log_initialized)
        return;
    if (prog)
        log_prog = prog;
    for (int i = 0; v && i < 4; i++)
        if (strcmp (v, names[i]) == 0)
            log_level = i;
}

void log_set_level (int level)
{
    log_level = level;
}

int log_get_level (void)
{
    return log_level;
}

void log_msg (int level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    int saved_errno = errno;
    char buf[4096];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    size_t n;
    int len;

    if (level > log_level || level < 0)
        return;
    gettimeofday (&tv, NULL);
    gmtime_r (&tv.tv_sec, &tm);
    n = strftime (buf, sizeof (buf), "%Y-%m-%dT%H:%M:%S", &tm);
    len = snprintf (buf + n,
                    sizeof (buf) - n,
                    ".%03ldZ %s[%d]: %s: ",
                    (long)tv.tv_usec / 1000,
                    log_prog,
                    (int)getpid (),
                    names[level > LOG_DEBUG ? LOG_DEBUG : level]);
    if (len > 0)
        n += (size_t)len;
    if (n < sizeof (buf) - 1) {
        va_start (ap, fmt);
        len = vsnprintf (buf + n, sizeof (buf) - n, fmt, ap);
        va_end (ap);
        if (len > 0)
            n += (size_t)len < sizeof (buf) - n ? (size_t)len : sizeof (buf) - n - 1;
    }
    if (n >= sizeof (buf) - 1)
        n = sizeof (buf) - 2;
    buf[n++] = '\n';
    if (write (STDERR_FILENO, buf, n) < 0) {
        /* nowhere left to report it */
    }
    errno = saved_errno;
}
