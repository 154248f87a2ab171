/* ft_app.c - an MPI program that loses ranks and recovers with ULFM
 *
 * Usage: ft_app [-v LIST]... [-s|-x] [-l] [-k USEC] [-a RANK:CODE]
 *               [-i RANK -w FILE] [-b RANK] [-p FILE]
 *
 *   -v LIST    one failure round: the world ranks (comma-separated) that die
 *              together; repeat -v for further rounds
 *   -s         victims kill themselves (raise SIGKILL) instead of waiting
 *              to be killed from outside
 *   -x         victims exit (code 3) without MPI_Finalize instead
 *   -l         loop mode: every rank iterates an allreduce and an agreement;
 *              the victims (of all rounds) die while it runs
 *   -k USEC    loop mode with -s: a victim dies USEC microseconds into the
 *              loop (default 20000)
 *   -a R:C     rank R calls MPI_Abort (MPI_COMM_WORLD, C) after MPI_Init
 *   -i R       rank R enters MPI_Init at once, the others only once FILE
 *   -w FILE    exists (so R can be killed inside MPI_Init)
 *   -b R       rank R kills itself before MPI_Init in the first attempt
 *              (ELASTIC_RESTART_COUNT unset or 0)
 *   -p FILE    the survivors wait for FILE to exist before MPI_Finalize
 *
 * Barrier mode (default): after MPI_Init every rank prints
 * "up RANK PID"; in round K each victim prints "ready K RANK PID" and dies;
 * the survivors, blocked in MPI_Barrier, must get MPIX_ERR_PROC_FAILED (or
 * MPIX_ERR_REVOKED), revoke, shrink, and check an allreduce of their world
 * ranks against the expected sum.  Times are CLOCK_MONOTONIC nanoseconds so
 * a benchmark can subtract a victim's "kill" time from a survivor's
 * "error" time.  The last line of rank 0 of the final communicator is
 * "ft-app: ok ..." or "ft-app: FAIL ...".  Exit 0 on success.
 *
 * Loop mode also prints "fault-event RANK LOST CODE t=NS" when this rank's PMIx
 * client receives the launcher's fault event for rank LOST (a handler of
 * its own, first in the chain, that passes the event on to Open MPI's):
 * when a run hangs, it tells whether the launcher's notice reached every
 * survivor (t5004).
 */
#include <errno.h>
#include <mpi.h>
#include <mpi-ext.h>
#include <pmix.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS  8
#define MAX_VICTIMS 64

static int rounds;
static int nvict[MAX_ROUNDS];
static int victim[MAX_ROUNDS][MAX_VICTIMS];
static int world_rank, world_size;
static int exit_instead; /* -x */

static int64_t now_ns (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void say (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static void say (const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int n;

    va_start (ap, fmt);
    n = vsnprintf (buf, sizeof (buf) - 1, fmt, ap);
    va_end (ap);
    if (n > (int)sizeof (buf) - 2)
        n = (int)sizeof (buf) - 2;
    buf[n++] = '\n';
    if (write (STDOUT_FILENO, buf, (size_t)n) < 0) {
    }
}

static int is_victim_of (int round, int rank)
{
    for (int i = 0; i < nvict[round]; i++)
        if (victim[round][i] == rank)
            return 1;
    return 0;
}

/* The round in which rank dies, or -1. */
static int death_round (int rank)
{
    for (int k = 0; k < rounds; k++)
        if (is_victim_of (k, rank))
            return k;
    return -1;
}

static void die (int round, int self_kill, int delay_us)
{
    say ("ready %d %d %d", round + 1, world_rank, (int)getpid ());
    if (!self_kill) {
        for (;;)
            pause ();
    }
    if (delay_us > 0)
        usleep ((useconds_t)delay_us);
    say ("kill %d %d t=%lld", round + 1, world_rank, (long long)now_ns ());
    if (exit_instead)
        _exit (3);
    raise (SIGKILL);
}

/* Revoke and shrink *comm in place.  Returns 0, or -1 if shrink failed. */
static int recover (MPI_Comm *comm, double *shrink_ms)
{
    MPI_Comm shrunk;
    double t0 = MPI_Wtime ();

    MPIX_Comm_revoke (*comm);
    if (MPIX_Comm_shrink (*comm, &shrunk) != MPI_SUCCESS)
        return -1;
    if (shrink_ms)
        *shrink_ms = (MPI_Wtime () - t0) * 1e3;
    MPI_Comm_free (comm);
    *comm = shrunk;
    MPI_Comm_set_errhandler (*comm, MPI_ERRORS_RETURN);
    return 0;
}

/* The sum of the world ranks that must be alive after `upto` rounds. */
static long want_sum (int upto)
{
    long want = 0;

    for (int i = 0; i < world_size; i++) {
        int k = death_round (i);
        if (k < 0 || k >= upto)
            want += i;
    }
    return want;
}

static int want_size (int upto)
{
    int n = world_size;

    for (int k = 0; k < upto; k++)
        n -= nvict[k];
    return n;
}

/* Check size and sum on comm after `upto` rounds.  Returns 1 if right. */
static int check (MPI_Comm comm, int upto, const char *what)
{
    long r = world_rank, sum = -1;
    int n = 0, crank = 0;

    MPI_Comm_size (comm, &n);
    MPI_Comm_rank (comm, &crank);
    if (MPI_Allreduce (&r, &sum, 1, MPI_LONG, MPI_SUM, comm) != MPI_SUCCESS) {
        say ("rank %d: %s: allreduce failed", world_rank, what);
        return 0;
    }
    if (n != want_size (upto) || sum != want_sum (upto)) {
        say ("rank %d: %s: size %d (want %d), sum %ld (want %ld)",
             world_rank,
             what,
             n,
             want_size (upto),
             sum,
             want_sum (upto));
        return 0;
    }
    return 1;
}

static int barrier_mode (int self_kill, MPI_Comm *commp)
{
    MPI_Comm comm;
    int good = 1;

    MPI_Comm_dup (MPI_COMM_WORLD, &comm);
    *commp = comm;
    MPI_Comm_set_errhandler (comm, MPI_ERRORS_RETURN);
    for (int k = 0; k < rounds; k++) {
        int64_t t0, t1;
        int rc, eclass = 0, before = 0, after = 0;
        double shrink_ms = 0;

        if (is_victim_of (k, world_rank))
            die (k, self_kill, 20000);
        MPI_Comm_size (comm, &before);
        t0 = now_ns ();
        rc = MPI_Barrier (comm);
        t1 = now_ns ();
        MPI_Error_class (rc, &eclass);
        if (eclass != MPIX_ERR_PROC_FAILED && eclass != MPIX_ERR_REVOKED) {
            say ("rank %d: round %d: expected MPIX_ERR_PROC_FAILED or MPIX_ERR_REVOKED, "
                 "got class %d",
                 world_rank,
                 k + 1,
                 eclass);
            return 0;
        }
        say ("error %d %d class=%s t=%lld wait_ms=%.3f",
             k + 1,
             world_rank,
             eclass == MPIX_ERR_PROC_FAILED ? "PROC_FAILED" : "REVOKED",
             (long long)t1,
             (double)(t1 - t0) / 1e6);
        if (recover (&comm, &shrink_ms) < 0) {
            say ("rank %d: round %d: MPIX_Comm_shrink failed", world_rank, k + 1);
            return 0;
        }
        *commp = comm;
        MPI_Comm_size (comm, &after);
        good = check (comm, k + 1, "after shrink") && good;
        say ("shrunk %d %d %d -> %d shrink_ms=%.3f",
             k + 1,
             world_rank,
             before,
             after,
             shrink_ms);
    }
    return check (comm, rounds, "final") && good;
}

static int loop_mode (int self_kill, int kill_us, MPI_Comm *commp)
{
    MPI_Comm comm;
    int my_round = death_round (world_rank), total = 0, iter, good;
    int64_t start = now_ns ();
    long r = world_rank, sum;

    for (int k = 0; k < rounds; k++)
        total += nvict[k];
    MPI_Comm_dup (MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler (comm, MPI_ERRORS_RETURN);
    *commp = comm;
    if (my_round >= 0 && !self_kill)
        say ("ready %d %d %d", my_round + 1, world_rank, (int)getpid ());
    /* One decision point per iteration: an agreement, which every survivor
     * reaches (an allreduce that failed somewhere revokes the communicator,
     * so the others leave theirs too).  Recovering anywhere else would let
     * one rank's shrink (itself an agreement) meet another's MPIX_Comm_agree. */
    for (iter = 0;; iter++) {
        int n, flag, rc;

        if (my_round >= 0 && self_kill && now_ns () - start >= (int64_t)kill_us * 1000) {
            say ("kill %d %d t=%lld", my_round + 1, world_rank, (long long)now_ns ());
            if (exit_instead)
                _exit (3);
            raise (SIGKILL);
        }
        rc = MPI_Allreduce (&r, &sum, 1, MPI_LONG, MPI_SUM, comm);
        if (rc != MPI_SUCCESS)
            MPIX_Comm_revoke (comm);
        MPI_Comm_size (comm, &n);
        flag =
            (rc == MPI_SUCCESS ? 1 : 0) | (world_size - n >= total && iter >= 10 ? 2 : 0);
        rc = MPIX_Comm_agree (comm, &flag);
        if (rc != MPI_SUCCESS || !(flag & 1)) {
            if (recover (&comm, NULL) < 0) {
                say ("rank %d: MPIX_Comm_shrink failed", world_rank);
                return 0;
            }
            *commp = comm;
            continue;
        }
        if (flag & 2)
            break;
        usleep (200);
    }
    good = check (comm, rounds, "final");
    say ("loop %d iterations=%d", world_rank, iter);
    return good;
}

static int parse_rank (const char *s, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol (s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 100000)
        return -1;
    *out = (int)v;
    return 0;
}

static void wait_for_file (const char *path)
{
    struct stat st;

    for (int i = 0; i < 30000 && stat (path, &st) < 0; i++)
        usleep (10000);
}

/* The fault events a launcher sends (src/exec/pmix/pmix_host.c) */
static void on_fault (size_t id,
                      pmix_status_t status,
                      const pmix_proc_t *source,
                      pmix_info_t info[],
                      size_t ninfo,
                      pmix_info_t *results,
                      size_t nresults,
                      pmix_event_notification_cbfunc_fn_t cbfunc,
                      void *cbdata)
{
    long lost = source ? (long)source->rank : -1;

    (void)id;
    (void)results;
    (void)nresults;
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY (&info[i], PMIX_EVENT_AFFECTED_PROC) &&
            info[i].value.type == PMIX_PROC && info[i].value.data.proc)
            lost = (long)info[i].value.data.proc->rank;
    say ("fault-event %d %ld %s t=%lld",
         world_rank,
         lost,
         PMIx_Error_string (status),
         (long long)now_ns ());
    if (cbfunc)
        cbfunc (PMIX_EVENT_NO_ACTION_TAKEN, NULL, 0, NULL, NULL, cbdata);
}

/* Watch for fault events (after MPI_Init: PMIx is initialized already,
 * this takes a second reference, which unwatch_faults drops: with it held,
 * MPI_Finalize would not tell the launcher that the rank finalized).
 * Returns 1 when it took the reference. */
static int watch_faults (void)
{
    pmix_status_t codes[] = {
        PMIX_ERR_PROC_ABORTED_BY_SIG, PMIX_ERR_PROC_TERM_WO_SYNC, PMIX_ERR_PROC_ABORTED};
    pmix_info_t first;
    pmix_proc_t me;
    bool yes = true;
    pmix_status_t rc;

    if ((rc = PMIx_Init (&me, NULL, 0)) != PMIX_SUCCESS) {
        say ("rank %d: PMIx_Init: %s (no fault-event lines)",
             world_rank,
             PMIx_Error_string (rc));
        return 0;
    }
    PMIX_INFO_LOAD (&first, PMIX_EVENT_HDLR_FIRST, &yes, PMIX_BOOL);
    rc = PMIx_Register_event_handler (codes, 3, &first, 1, on_fault, NULL, NULL);
    PMIX_INFO_DESTRUCT (&first);
    if (rc < 0)
        say ("rank %d: PMIx_Register_event_handler: %s (no fault-event lines)",
             world_rank,
             PMIx_Error_string (rc));
    return 1;
}

int main (int argc, char **argv)
{
    int self_kill = 0, loop = 0, kill_us = 20000, abort_rank = -1, abort_code = 0;
    int init_victim = -1, before_victim = -1, opt, good, watching = 0;
    MPI_Comm comm = MPI_COMM_NULL;
    const char *wait_file = NULL, *linger_file = NULL,
               *attempt = getenv ("ELASTIC_RESTART_COUNT");
    const char *pmix_rank = getenv ("PMIX_RANK");
    int64_t t0, t1;
    double init_max_ms = 0, init_ms;

    while ((opt = getopt (argc, argv, "v:sxlk:a:i:w:b:p:")) != -1) {
        switch (opt) {
            case 'v': {
                char *copy = strdup (optarg), *tok, *save = NULL;
                if (rounds == MAX_ROUNDS) {
                    fprintf (stderr, "ft_app: at most %d rounds\n", MAX_ROUNDS);
                    return 2;
                }
                for (tok = strtok_r (copy, ",", &save); tok;
                     tok = strtok_r (NULL, ",", &save)) {
                    if (nvict[rounds] == MAX_VICTIMS ||
                        parse_rank (tok, &victim[rounds][nvict[rounds]]) < 0) {
                        fprintf (stderr, "ft_app: -v: '%s' is not a rank list\n", optarg);
                        return 2;
                    }
                    nvict[rounds]++;
                }
                free (copy);
                rounds++;
                break;
            }
            case 's':
                self_kill = 1;
                break;
            case 'x':
                self_kill = 1;
                exit_instead = 1;
                break;
            case 'l':
                loop = 1;
                break;
            case 'k':
                if (parse_rank (optarg, &kill_us) < 0) {
                    fprintf (stderr,
                             "ft_app: -k: '%s' is not a number of microseconds\n",
                             optarg);
                    return 2;
                }
                break;
            case 'a':
                if (sscanf (optarg, "%d:%d", &abort_rank, &abort_code) != 2) {
                    fprintf (stderr, "ft_app: -a: '%s' is not RANK:CODE\n", optarg);
                    return 2;
                }
                break;
            case 'i':
                if (parse_rank (optarg, &init_victim) < 0)
                    return 2;
                break;
            case 'w':
                wait_file = optarg;
                break;
            case 'b':
                if (parse_rank (optarg, &before_victim) < 0)
                    return 2;
                break;
            case 'p':
                linger_file = optarg;
                break;
            default:
                fprintf (stderr,
                         "usage: ft_app [-v LIST]... [-s|-x] [-l] [-k USEC] [-a R:C] [-i "
                         "R -w FILE] [-b R] [-p FILE]\n");
                return 2;
        }
    }

    /* before MPI_Init, the rank comes from the launcher's environment */
    if (pmix_rank) {
        int pr = atoi (pmix_rank);
        int first = !attempt || !strcmp (attempt, "0");
        if (pr == before_victim && first) {
            say ("suicide %d %d", pr, (int)getpid ());
            raise (SIGKILL);
        }
        if (init_victim >= 0 && pr == init_victim)
            say ("preinit %d %d", pr, (int)getpid ());
        else if (init_victim >= 0 && wait_file)
            wait_for_file (wait_file);
    }

    t0 = now_ns ();
    MPI_Init (&argc, &argv);
    t1 = now_ns ();
    init_ms = (double)(t1 - t0) / 1e6;
    MPI_Comm_rank (MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size (MPI_COMM_WORLD, &world_size);
    MPI_Comm_set_errhandler (MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int k = 0; k < rounds; k++)
        for (int i = 0; i < nvict[k]; i++)
            if (victim[k][i] >= world_size) {
                if (world_rank == 0)
                    say ("ft-app: FAIL victim %d out of range (size %d)",
                         victim[k][i],
                         world_size);
                MPI_Finalize ();
                return 2;
            }
    MPI_Reduce (&init_ms, &init_max_ms, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    say ("up %d %d init_ms=%.3f", world_rank, (int)getpid (), init_ms);
    if (world_rank == 0)
        say ("init_max_ms=%.3f size=%d", init_max_ms, world_size);
    MPI_Barrier (MPI_COMM_WORLD);

    if (abort_rank >= 0) {
        if (world_rank == abort_rank) {
            say ("abort %d %d", world_rank, abort_code);
            MPI_Abort (MPI_COMM_WORLD, abort_code);
        }
        MPI_Barrier (MPI_COMM_WORLD); /* killed here by the launcher */
        say ("rank %d: still alive after MPI_Abort", world_rank);
        return 1;
    }

    if (loop)
        watching = watch_faults ();
    good = loop ? loop_mode (self_kill, kill_us, &comm) : barrier_mode (self_kill, &comm);
    {
        /* the survivors agree on the outcome */
        int ok = good, n = 0, crank = 0;

        MPI_Comm_size (comm, &n);
        MPI_Comm_rank (comm, &crank);
        if (MPI_Allreduce (&good, &ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
            ok = 0;
        if (crank == 0)
            say ("ft-app: %s size %d -> %d after %d round%s",
                 ok ? "ok" : "FAIL",
                 world_size,
                 n,
                 rounds,
                 rounds == 1 ? "" : "s");
        say ("done %d", world_rank);
        MPI_Comm_free (&comm);
        good = ok;
    }
    if (linger_file)
        wait_for_file (linger_file);
    if (watching)
        PMIx_Finalize (NULL, 0);
    MPI_Finalize ();
    return good ? 0 : 1;
}
