/* clock.c - the clocks every component reads (see clock.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <time.h>

#include "clock.h"

double mono_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double wall_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t mono_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void format_iso_time (double t, char *buf, size_t size)
{
    time_t sec = (time_t)t;
    long usec = (long)((t - (double)sec) * 1e6);
    struct tm tm;
    size_t n;

    if (usec < 0)
        usec = 0;
    if (usec > 999999)
        usec = 999999;
    gmtime_r (&sec, &tm);
    n = strftime (buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf (buf + n, size - n, ".%06ldZ", usec);
}
