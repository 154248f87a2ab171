/* initreport.c - tell elastic-mpirun which ranks have finished MPI_Init
 *
 * Under elastic-mpirun (ELASTIC_REPORT_INIT=1, ELASTIC_EVENT_LOG set) each
 * rank appends two lines to the event log: "rank_loaded" as the library
 * loads (a constructor: before main, so before MPI_Init), and
 * "rank_initialized" once MPI is initialized, as elastic_manager_create or
 * the first progress report sees it (at load already when MPI_Init came
 * first, as with mpi4py).  A rank that wrote the first line and not the
 * second has not finished MPI_Init: when a rank of the attempt has died
 * meanwhile, its peers may wait inside MPI_Init for ever, and
 * elastic-mpirun's --init-timeout stops the attempt.  The rank is the
 * launcher's (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, RANK); without
 * one nothing is written.  Each line is one write(2) with O_APPEND, as
 * libelastic's other events.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>

#include "common/json.h"
#include "initreport.h"

enum { INIT_OFF = 0, INIT_WAITING, INIT_DONE };

static int state; /* INIT_* */

/* The launcher's rank from the environment, or -1. */
static int launcher_rank (void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK"};

    for (size_t i = 0; i < sizeof (vars) / sizeof (vars[0]); i++) {
        const char *s = getenv (vars[i]);
        char *end;
        long v;

        if (!s || !*s)
            continue;
        errno = 0;
        v = strtol (s, &end, 10);
        if (errno == 0 && *end == '\0' && v >= 0 && v <= INT_MAX)
            return (int)v;
    }
    return -1;
}

/* Append {"event":kind,"rank":R,"pid":P,"host":H,"attempt":A,"time":T}. */
static void write_line (const char *path, const char *kind)
{
    char line[1024], host[256] = "", qhost[600], when[64];
    const char *attempt = getenv ("ELASTIC_ATTEMPT");
    struct timeval tv;
    struct tm tm;
    int n, fd;

    if (gethostname (host, sizeof (host)) < 0)
        host[0] = '\0';
    host[sizeof (host) - 1] = '\0';
    if (json_quote (qhost, sizeof (qhost), host) >= sizeof (qhost))
        snprintf (qhost, sizeof (qhost), "\"\"");
    gettimeofday (&tv, NULL);
    gmtime_r (&tv.tv_sec, &tm);
    strftime (when, sizeof (when), "%Y-%m-%dT%H:%M:%S", &tm);
    n = snprintf (line,
                  sizeof (line),
                  "{\"event\":\"%s\",\"rank\":%d,\"pid\":%d,\"host\":%s,\"attempt\":%ld,"
                  "\"time\":\"%s.%03dZ\"}\n",
                  kind,
                  launcher_rank (),
                  (int)getpid (),
                  qhost,
                  attempt ? strtol (attempt, NULL, 10) : 0L,
                  when,
                  (int)(tv.tv_usec / 1000));
    if (n <= 0 || (size_t)n >= sizeof (line))
        return;
    if ((fd = open (path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
        return; /* elastic-mpirun then judges this rank as unknown, never hung */
    if (write (fd, line, (size_t)n) != n) {
        /* a short write leaves a line that the reader skips */
    }
    close (fd);
}

static const char *report_path (void)
{
    const char *on = getenv ("ELASTIC_REPORT_INIT"), *path = getenv ("ELASTIC_EVENT_LOG");

    if (!on || strcmp (on, "1") != 0 || !path || !*path || launcher_rank () < 0)
        return NULL;
    return path;
}

void initreport_mpi_ready (void)
{
    int expected = INIT_WAITING, flag = 0;
    const char *path;

    if (__atomic_load_n (&state, __ATOMIC_ACQUIRE) != INIT_WAITING)
        return;
    if (MPI_Initialized (&flag) != MPI_SUCCESS || !flag)
        return;
    if (!__atomic_compare_exchange_n (
            &state, &expected, INIT_DONE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    if ((path = report_path ()))
        write_line (path, "rank_initialized");
}

__attribute__ ((constructor)) static void initreport_load (void)
{
    const char *path = report_path ();

    if (!path)
        return;
    write_line (path, "rank_loaded");
    __atomic_store_n (&state, INIT_WAITING, __ATOMIC_RELEASE);
    initreport_mpi_ready ();
}
