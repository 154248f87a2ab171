/* loopapp.c - a small MPI program whose failures are driven by its arguments,
 * for elastic-mpirun's relaunch-loop tests
 *
 *   loopapp --state FILE [--steps N] [--persist P] [--step-ms MS]
 *           [--fail LAUNCH:ACTION:RANK:STEP]... [--log-reshard LAUNCH:STEP]
 *
 * It iterates N steps; each step is an MPI_Allreduce whose result feeds a
 * checksum that does not depend on the world size.  Every P steps rank 0
 * writes "step checksum" to FILE atomically (the program's own stand-in for
 * an L3 snapshot).  With ELASTIC_RESUME=1 it resumes from FILE; without, it
 * starts from step 0.  FILE.launches counts the launches (the program's own
 * record), so a failure can be injected into one launch only:
 *   exit76  every rank exits 76 at STEP (a library that cannot recover)
 *   kill    rank RANK SIGKILLs itself at STEP; the survivors see the failure
 *           (ULFM) and exit 76, or mpirun aborts the job (no ULFM)
 * --log-reshard makes rank 0 append, at STEP of launch LAUNCH, the JSON line
 * libelastic writes after an in-place recovery to $ELASTIC_EVENT_LOG (the
 * test stands in for the library; it checks that the variable reaches the
 * ranks and that elastic-mpirun counts the line).
 * SIGUSR1 or SIGTERM asks for a suspension: at the next step the ranks agree,
 * rank 0 writes FILE, and every rank exits 75.
 * Rank 0 prints "launch L resume R world W from step S", "persisted S",
 * "suspended at step S", and finally "done steps=N checksum=C world=W".
 */
#include <errno.h>
#include <mpi.h>
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXFAIL 8

struct fail {
    int launch;
    char action[16];
    int rank;
    long step;
};

static volatile sig_atomic_t suspend_requested;

static void on_preempt (int sig)
{
    (void)sig;
    suspend_requested = 1;
}

static void usage (void)
{
    fprintf (stderr,
             "usage: loopapp --state FILE [--steps N] [--persist P] [--step-ms MS] "
             "[--fail LAUNCH:exit76|kill:RANK:STEP]...\n");
    exit (2);
}

static int write_state (const char *path, long step, unsigned long long sum)
{
    char tmp[4096];
    FILE *f;

    snprintf (tmp, sizeof (tmp), "%s.tmp", path);
    if (!(f = fopen (tmp, "w")))
        return -1;
    fprintf (f, "%ld %llu\n", step, sum);
    if (fflush (f) != 0 || fsync (fileno (f)) != 0) {
        fclose (f);
        return -1;
    }
    if (fclose (f) != 0)
        return -1;
    return rename (tmp, path);
}

/* Count this launch in FILE.launches; returns the launch number (1-based). */
static int count_launch (const char *state)
{
    char path[4096];
    FILE *f;
    int n = 0;

    snprintf (path, sizeof (path), "%s.launches", state);
    if ((f = fopen (path, "r"))) {
        if (fscanf (f, "%d", &n) != 1)
            n = 0;
        fclose (f);
    }
    n++;
    if ((f = fopen (path, "w"))) {
        fprintf (f, "%d\n", n);
        fclose (f);
    }
    return n;
}

static void sleep_ms (long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void log_reshard (long step, int size)
{
    const char *path = getenv ("ELASTIC_EVENT_LOG");
    FILE *f;

    if (!path || !(f = fopen (path, "a"))) {
        fprintf (stderr, "loopapp: no ELASTIC_EVENT_LOG to write to\n");
        return;
    }
    fprintf (f,
             "{\"event\":\"reshard_down\",\"step\":%ld,\"old_size\":%d,\"new_size\":%d,"
             "\"failed\":[],\"spares_used\":[],\"attempts\":1,\"handler_tries\":1,"
             "\"t_total_ms\":12.500,\"rank\":0}\n",
             step,
             size + 1,
             size);
    fclose (f);
}

/* A peer failed (ULFM) or the job is broken: leave with the relaunch code. */
static void peer_failure (int rank, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    MPI_Error_string (rc, msg, &len);
    printf ("rank %d: MPI error (%s): this test app does no in-place recovery, exit 76\n",
            rank,
            msg);
    fflush (stdout);
#ifdef MPIX_ERR_PROC_FAILED
    {
        MPI_Comm shrunk;
        MPIX_Comm_revoke (MPI_COMM_WORLD);
        if (MPIX_Comm_shrink (MPI_COMM_WORLD, &shrunk) == MPI_SUCCESS) {
            MPI_Barrier (shrunk);
            MPI_Comm_free (&shrunk);
        }
    }
#endif
    _exit (76);
}

int main (int argc, char **argv)
{
    const char *state = NULL;
    long steps = 20, persist = 5, step_ms = 20, start = 0;
    struct fail fails[MAXFAIL];
    int nfail = 0, rank, size, launch = 0, resume, log_launch = 0;
    long log_step = -1;
    unsigned long long sum = 0;
    const char *env;

    for (int i = 1; i < argc; i++) {
        if (!strcmp (argv[i], "--state") && i + 1 < argc)
            state = argv[++i];
        else if (!strcmp (argv[i], "--steps") && i + 1 < argc)
            steps = atol (argv[++i]);
        else if (!strcmp (argv[i], "--persist") && i + 1 < argc)
            persist = atol (argv[++i]);
        else if (!strcmp (argv[i], "--step-ms") && i + 1 < argc)
            step_ms = atol (argv[++i]);
        else if (!strcmp (argv[i], "--fail") && i + 1 < argc && nfail < MAXFAIL) {
            struct fail *f = &fails[nfail++];
            if (sscanf (argv[++i],
                        "%d:%15[a-z0-9]:%d:%ld",
                        &f->launch,
                        f->action,
                        &f->rank,
                        &f->step) != 4 ||
                (strcmp (f->action, "exit76") && strcmp (f->action, "kill")))
                usage ();
        } else if (!strcmp (argv[i], "--log-reshard") && i + 1 < argc) {
            if (sscanf (argv[++i], "%d:%ld", &log_launch, &log_step) != 2)
                usage ();
        } else
            usage ();
    }
    if (!state || steps < 1 || persist < 1)
        usage ();

    signal (SIGUSR1, on_preempt);
    signal (SIGTERM, on_preempt);
    MPI_Init (&argc, &argv);
    MPI_Comm_set_errhandler (MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);

    env = getenv ("ELASTIC_RESUME");
    resume = env && !strcmp (env, "1");
    if (rank == 0) {
        FILE *f;
        launch = count_launch (state);
        if (resume && (f = fopen (state, "r"))) {
            if (fscanf (f, "%ld %llu", &start, &sum) != 2) {
                start = 0;
                sum = 0;
            }
            fclose (f);
        }
        printf (
            "launch %d resume %d world %d from step %ld\n", launch, resume, size, start);
        fflush (stdout);
    }
    {
        long long hdr[3] = {launch, start, (long long)sum};
        MPI_Bcast (hdr, 3, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        launch = (int)hdr[0];
        start = hdr[1];
        sum = (unsigned long long)hdr[2];
    }

    for (long step = start; step < steps; step++) {
        long long local = (step * step) % 1009 + 1, v = 0, flag = suspend_requested,
                  any = 0;
        int rc;

        for (int i = 0; i < nfail; i++) {
            const struct fail *f = &fails[i];
            if (f->launch != launch || f->step != step)
                continue;
            if (!strcmp (f->action, "exit76")) {
                if (rank == 0) {
                    printf ("launch %d: every rank exits 76 at step %ld\n", launch, step);
                    fflush (stdout);
                }
                MPI_Barrier (MPI_COMM_WORLD);
                _exit (76);
            }
            if (!strcmp (f->action, "kill") && f->rank == rank) {
                printf ("rank %d: SIGKILL at step %ld\n", rank, step);
                fflush (stdout);
                raise (SIGKILL);
            }
        }
        if (rank == 0 && launch == log_launch && step == log_step)
            log_reshard (step, size);
        if ((rc = MPI_Allreduce (
                 &flag, &any, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD)) != MPI_SUCCESS)
            peer_failure (rank, rc);
        if (any) {
            if (rank == 0) {
                if (write_state (state, step, sum) < 0)
                    fprintf (stderr, "loopapp: %s: %s\n", state, strerror (errno));
                printf ("suspended at step %ld\n", step);
                fflush (stdout);
            }
            MPI_Barrier (MPI_COMM_WORLD);
            MPI_Finalize ();
            return 75;
        }
        if ((rc = MPI_Allreduce (
                 &local, &v, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD)) != MPI_SUCCESS)
            peer_failure (rank, rc);
        sum = (sum * 31 + (unsigned long long)v) % 1000000007ULL;
        if ((step + 1) % persist == 0 && rank == 0) {
            if (write_state (state, step + 1, sum) < 0)
                fprintf (stderr, "loopapp: %s: %s\n", state, strerror (errno));
            printf ("persisted %ld\n", step + 1);
            fflush (stdout);
        }
        if (step_ms > 0)
            sleep_ms (step_ms);
    }
    if (rank == 0) {
        printf ("done steps=%ld checksum=%llu world=%d\n", steps, sum, size);
        fflush (stdout);
    }
    MPI_Barrier (MPI_COMM_WORLD);
    MPI_Finalize ();
    return 0;
}
