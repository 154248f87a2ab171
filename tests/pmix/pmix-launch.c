/* pmix-launch.c - start N MPI ranks under the hosted PMIx server
 *
 * A small launcher around src/exec/pmix/pmix_host.c, used by the tests and the
 * benchmarks until elastic-exec hosts the server itself:
 *
 *   pmix-launch -n N [--btl sm|tcp] [--event-log FILE] [--max-restarts K]
 *               [--init-timeout SEC] [--tmpdir DIR] [--run-id ID]
 *               [--oversubscribe|--no-oversubscribe] [--no-nodelay] [-v]
 *               -- PROG [ARGS...]
 *
 * It hosts the server, forks the N ranks (ELASTIC_RESTART_COUNT=attempt in
 * their environment), reaps them, lets the server notify the survivors of
 * a death after MPI_Init, kills every rank on MPI_Abort, restarts the group
 * (new namespace) when a rank dies during MPI_Init, and ends with a one-line
 * summary on stderr.  Exit status: 0 when every rank that finished exited 0
 * (failures recovered in place included), the MPI_Abort code, 76
 * (ELASTIC_EXIT_RELAUNCH) when a restart was needed and none is left, the
 * first failing rank's code (128+signal), or 128+signal when stopped.
 *
 * The event log (one line per event: seconds since start, event, key=value)
 * is what the tests read: start, connected, initialized, nodelay,
 * finalized, lost, exit (with the verdict), abort, restart_needed,
 * init_timeout, shm, job_end.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/parse.h"
#include "exec/pmix/pmix_host.h"

#define EXIT_RELAUNCH  76 /* ELASTIC_EXIT_RELAUNCH */
#define MAX_SHM_PREFIX 16

extern char **environ;

struct launch {
    /* options */
    int nranks;
    const char *btl;
    const char *event_log;
    int max_restarts;
    double init_timeout;
    const char *tmpdir;
    char run_id[64];
    int oversubscribe;
    int no_nodelay;
    int verbose;
    char **argv;

    /* state */
    struct pmixhost *h;
    struct pmixhost_job *job;
    int attempt;
    int evfd;
    int sigfd;
    sigset_t oldmask;
    double t0;
    double attempt_t0;
    pid_t *pid;
    int *alive;
    int nalive;
    int stop_signal;
    int init_timed_out;

    /* results of the current attempt */
    int aborted;
    int abort_rank;
    int abort_code;
    char abort_msg[256];
    int restart_needed;
    int restart_rank;
    int restart_status;
    int recovered;
    int first_fail_rank;
    int first_fail_status;
    int ndone_ok;
    int first_bad_rank; /* a finished rank that exited non-zero */
    int first_bad_status;

    /* /dev/shm segments seen mapped by the ranks */
    char shm_prefix[MAX_SHM_PREFIX][PATH_MAX];
    int nshm_prefix;
};

static double now_mono (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One event log line: "<seconds> <event> key=value ...". */
static void evlog (struct launch *L, const char *event, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void evlog (struct launch *L, const char *event, const char *fmt, ...)
{
    char buf[1024];
    int n;
    va_list ap;

    n = snprintf (buf, sizeof (buf), "%.6f %s ", now_mono () - L->t0, event);
    va_start (ap, fmt);
    n += vsnprintf (buf + n, sizeof (buf) - (size_t)n - 1, fmt, ap);
    va_end (ap);
    if (n > (int)sizeof (buf) - 2)
        n = (int)sizeof (buf) - 2;
    buf[n++] = '\n';
    if (L->evfd >= 0 && write (L->evfd, buf, (size_t)n) < 0) {
        /* the log is best effort */
    }
    if (L->verbose && write (STDERR_FILENO, buf, (size_t)n) < 0) {
    }
}

static void status_text (int wstatus, char *buf, size_t len)
{
    if (WIFSIGNALED (wstatus))
        snprintf (buf, len, "signal:%d", WTERMSIG (wstatus));
    else
        snprintf (buf, len, "exit:%d", WEXITSTATUS (wstatus));
}

static int status_code (int wstatus)
{
    return WIFSIGNALED (wstatus) ? 128 + WTERMSIG (wstatus) : WEXITSTATUS (wstatus);
}

static void usage (FILE *f)
{
    fprintf (
        f,
        "Usage: pmix-launch -n N [--btl sm|tcp] [--event-log FILE] [--max-restarts K]\n"
        "                   [--init-timeout SEC] [--tmpdir DIR] [--run-id ID]\n"
        "                   [--oversubscribe|--no-oversubscribe] [--no-nodelay] [-v]\n"
        "                   -- PROG [ARGS...]\n");
}

static int parse_args (struct launch *L, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'},
        {"btl", required_argument, NULL, 'b'},
        {"event-log", required_argument, NULL, 'e'},
        {"max-restarts", required_argument, NULL, 'r'},
        {"init-timeout", required_argument, NULL, 't'},
        {"tmpdir", required_argument, NULL, 'T'},
        {"run-id", required_argument, NULL, 'R'},
        {"oversubscribe", no_argument, NULL, 'O'},
        {"no-oversubscribe", no_argument, NULL, 'N'},
        {"no-nodelay", no_argument, NULL, 'D'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    elastic_error_t err;
    long v;
    int c;

    while ((c = getopt_long (argc, argv, "+n:vh", longopts, NULL)) != -1) {
        switch (c) {
            case 'n':
                if (parse_long ("-n", optarg, 1, 4096, &v, &err) < 0)
                    goto bad;
                L->nranks = (int)v;
                break;
            case 'b':
                if (strcmp (optarg, "sm") && strcmp (optarg, "tcp")) {
                    fprintf (stderr,
                             "pmix-launch: --btl: '%s' is not accepted (sm, tcp)\n",
                             optarg);
                    return -1;
                }
                L->btl = optarg;
                break;
            case 'e':
                L->event_log = optarg;
                break;
            case 'r':
                if (parse_long ("--max-restarts", optarg, 0, 1000, &v, &err) < 0)
                    goto bad;
                L->max_restarts = (int)v;
                break;
            case 't':
                if (parse_seconds (
                        "--init-timeout", optarg, 0, 86400, &L->init_timeout, &err) < 0)
                    goto bad;
                break;
            case 'T':
                L->tmpdir = optarg;
                break;
            case 'R':
                snprintf (L->run_id, sizeof (L->run_id), "%s", optarg);
                break;
            case 'O':
                L->oversubscribe = 1;
                break;
            case 'N':
                L->oversubscribe = 0;
                break;
            case 'D':
                L->no_nodelay = 1;
                break;
            case 'v':
                L->verbose = 1;
                break;
            case 'h':
                usage (stdout);
                exit (0);
            default:
                usage (stderr);
                return -1;
        }
    }
    if (L->nranks == 0) {
        fprintf (stderr, "pmix-launch: -n N is required (1-4096 ranks)\n");
        return -1;
    }
    if (optind >= argc) {
        fprintf (stderr, "pmix-launch: no program given after the options\n");
        usage (stderr);
        return -1;
    }
    L->argv = &argv[optind];
    return 0;
bad:
    fprintf (stderr, "pmix-launch: %s\n", err.text);
    return -1;
}

/* ---- the ranks ------------------------------------------------------------- */

/* environ without the names `over` sets and without an outer launcher's
 * PMIx variables (PMIX_* but PMIX_MCA_*: a stale server URI would confuse
 * the client), then `over`, then extra (borrowed strings in a malloc'ed
 * array). */
static char **merge_env (char *const *over, char *const *extra)
{
    size_t n = 0, k = 0;
    char **env;

    for (char **e = environ; *e; e++)
        n++;
    for (char *const *e = over; e && *e; e++)
        n++;
    for (char *const *e = extra; e && *e; e++)
        n++;
    if (!(env = calloc (n + 1, sizeof (*env))))
        return NULL;
    for (char **e = environ; *e; e++) {
        size_t len = strcspn (*e, "=");
        int replaced = !strncmp (*e, "PMIX_", 5) && strncmp (*e, "PMIX_MCA_", 9);
        for (char *const *o = over; o && *o && !replaced; o++)
            replaced = !strncmp (*o, *e, len) && (*o)[len] == '=';
        for (char *const *o = extra; o && *o && !replaced; o++)
            replaced = !strncmp (*o, *e, len) && (*o)[len] == '=';
        if (!replaced)
            env[k++] = *e;
    }
    for (char *const *e = over; e && *e; e++)
        env[k++] = *e;
    for (char *const *e = extra; e && *e; e++)
        env[k++] = *e;
    env[k] = NULL;
    return env;
}

/* In the child (async-signal-safe calls only: the parent has threads). */
static void child_exec (struct launch *L, char **env)
{
    static const char msg[] = "pmix-launch: cannot execute the program\n";
    sigset_t none;

    prctl (PR_SET_PDEATHSIG, SIGKILL);
    signal (SIGPIPE, SIG_DFL);
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    /* PMIx's accepted sockets are not close-on-exec: keep the ranks off
     * the server's descriptors. */
    if (syscall (SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */) < 0) {
        for (int fd = 3; fd < 4096; fd++)
            fcntl (fd, F_SETFD, FD_CLOEXEC);
    }
    execvpe (L->argv[0], L->argv, env);
    if (write (STDERR_FILENO, msg, sizeof (msg) - 1) < 0) {
    }
    _exit (127);
}

static int start_ranks (struct launch *L)
{
    char attempt[64];
    char *extra[2] = {attempt, NULL};

    snprintf (attempt, sizeof (attempt), "ELASTIC_RESTART_COUNT=%d", L->attempt);
    for (int r = 0; r < L->nranks; r++) {
        char **env = merge_env (pmixhost_job_env (L->job, r), extra);
        pid_t pid;

        if (!env) {
            fprintf (stderr, "pmix-launch: out of memory\n");
            return -1;
        }
        if ((pid = fork ()) < 0) {
            fprintf (stderr, "pmix-launch: fork: %s\n", strerror (errno));
            free (env);
            return -1;
        }
        if (pid == 0)
            child_exec (L, env);
        free (env);
        L->pid[r] = pid;
        L->alive[r] = 1;
        L->nalive++;
        pmixhost_job_started (L->job, r, pid);
        evlog (L,
               "start",
               "rank=%d pid=%d nspace=%s",
               r,
               (int)pid,
               pmixhost_job_nspace (L->job));
    }
    return 0;
}

static void kill_all (struct launch *L, int sig)
{
    for (int r = 0; r < L->nranks; r++)
        if (L->alive[r])
            kill (L->pid[r], sig);
}

/* Remember the /dev/shm files the live ranks map, by prefix (the name up
 * to its last '.', which holds the job's id in Open MPI's segment names). */
static void sample_shm (struct launch *L)
{
    for (int r = 0; r < L->nranks; r++) {
        char path[64], line[PATH_MAX + 256];
        FILE *f;

        if (!L->alive[r])
            continue;
        snprintf (path, sizeof (path), "/proc/%d/maps", (int)L->pid[r]);
        if (!(f = fopen (path, "r")))
            continue;
        while (fgets (line, sizeof (line), f)) {
            char *p = strstr (line, " /dev/shm/"), *dot;
            int known = 0;

            if (!p)
                continue;
            p++;
            p[strcspn (p, " \n")] = '\0';
            if (!(dot = strrchr (p, '.')) || dot < p + 9)
                continue;
            dot[1] = '\0';
            for (int i = 0; i < L->nshm_prefix && !known; i++)
                known = !strcmp (L->shm_prefix[i], p);
            if (!known && L->nshm_prefix < MAX_SHM_PREFIX) {
                snprintf (L->shm_prefix[L->nshm_prefix++], PATH_MAX, "%s", p);
                evlog (L, "shm", "prefix=%s", p);
            }
        }
        fclose (f);
    }
}

/* Count the files left in /dev/shm under the sampled prefixes. */
static int shm_leaked (struct launch *L)
{
    DIR *d;
    struct dirent *de;
    int n = 0;

    if (L->nshm_prefix == 0 || !(d = opendir ("/dev/shm")))
        return 0;
    while ((de = readdir (d))) {
        for (int i = 0; i < L->nshm_prefix; i++) {
            const char *base = L->shm_prefix[i] + strlen ("/dev/shm/");
            if (!strncmp (de->d_name, base, strlen (base))) {
                evlog (L, "shm_leak", "file=/dev/shm/%s", de->d_name);
                n++;
                break;
            }
        }
    }
    closedir (d);
    return n;
}

/* Stop the attempt on purpose: no more fault events, kill what runs. */
static void stop_job (struct launch *L)
{
    sample_shm (L);
    pmixhost_job_stop (L->job);
    kill_all (L, SIGKILL);
}

static void on_exit_status (struct launch *L, int r, int wstatus)
{
    char st[32];
    int verdict;

    L->alive[r] = 0;
    L->nalive--;
    verdict = pmixhost_job_exited (L->job, r, wstatus);
    status_text (wstatus, st, sizeof (st));
    evlog (L,
           "exit",
           "rank=%d pid=%d status=%s verdict=%s",
           r,
           (int)L->pid[r],
           st,
           pmixhost_exit_name (verdict));
    switch (verdict) {
        case PMIXHOST_EXIT_DONE:
            if (wstatus == 0)
                L->ndone_ok++;
            else if (L->first_bad_rank < 0) {
                L->first_bad_rank = r;
                L->first_bad_status = wstatus;
            }
            break;
        case PMIXHOST_EXIT_RECOVERABLE:
            L->recovered++;
            if (L->first_fail_rank < 0) {
                L->first_fail_rank = r;
                L->first_fail_status = wstatus;
            }
            break;
        case PMIXHOST_EXIT_RESTART:
            if (!L->restart_needed) {
                L->restart_needed = 1;
                L->restart_rank = r;
                L->restart_status = wstatus;
                evlog (L, "restart_needed", "rank=%d status=%s", r, st);
                stop_job (L);
            }
            break;
        default:
            break;
    }
}

static void reap (struct launch *L)
{
    int wstatus;
    pid_t pid;

    while ((pid = waitpid (-1, &wstatus, WNOHANG)) > 0) {
        for (int r = 0; r < L->nranks; r++) {
            if (L->alive[r] && L->pid[r] == pid) {
                on_exit_status (L, r, wstatus);
                break;
            }
        }
    }
}

static void on_pmix_events (struct launch *L)
{
    struct pmixhost_event ev;

    while (pmixhost_next_event (L->h, &ev)) {
        switch (ev.type) {
            case PMIXHOST_EV_CONNECTED:
                evlog (L, "connected", "rank=%d", ev.rank);
                break;
            case PMIXHOST_EV_INITIALIZED: {
                int total = 0, without = pmixhost_nodelay_check (L->h, &total);
                evlog (L,
                       "initialized",
                       "ranks=%d seconds=%.6f",
                       L->nranks,
                       ev.time - L->attempt_t0);
                evlog (L, "nodelay", "clients=%d without=%d", total, without);
                sample_shm (L);
                break;
            }
            case PMIXHOST_EV_FINALIZED:
                evlog (L, "finalized", "rank=%d", ev.rank);
                break;
            case PMIXHOST_EV_LOST:
                evlog (L, "lost", "rank=%d", ev.rank);
                break;
            case PMIXHOST_EV_ABORT:
                if (!L->aborted) {
                    L->aborted = 1;
                    L->abort_rank = ev.rank;
                    L->abort_code = ev.status;
                    snprintf (L->abort_msg, sizeof (L->abort_msg), "%s", ev.message);
                    evlog (L,
                           "abort",
                           "rank=%d code=%d message=\"%s\"",
                           ev.rank,
                           ev.status,
                           ev.message);
                    sample_shm (L);
                    kill_all (L, SIGKILL);
                }
                break;
        }
    }
}

static void on_signal (struct launch *L)
{
    struct signalfd_siginfo si;

    while (read (L->sigfd, &si, sizeof (si)) == (ssize_t)sizeof (si)) {
        if (si.ssi_signo == SIGCHLD)
            reap (L);
        else if (!L->stop_signal) {
            L->stop_signal = (int)si.ssi_signo;
            evlog (L, "signal", "signal=%d", L->stop_signal);
            stop_job (L);
        }
    }
}

/* Run one attempt until every rank is gone. */
/* Every rank is gone: wait (10 s at most) until PMIx reported the lost
 * connection of each that connected and did not finalize.  PMIx runs a
 * client's registered cleanups (Open MPI's /dev/shm segments) when it
 * handles that connection's end, in its progress thread: a namespace torn
 * down, or a launcher that exits, before that leaves them behind (a rank
 * killed inside MPI_Init on a loaded machine). */
static void wait_lost (struct launch *L)
{
    struct pollfd pfd = {.fd = pmixhost_fd (L->h), .events = POLLIN};
    struct pmixhost_job_info ji;
    double until = now_mono () + 10.0;

    for (;;) {
        pmixhost_job_info (L->job, &ji);
        if (ji.lost >= ji.connected - ji.finalized)
            return;
        if (now_mono () >= until) {
            evlog (L,
                   "lost_wait",
                   "lost=%d expected=%d timed_out=1",
                   ji.lost,
                   ji.connected - ji.finalized);
            return;
        }
        if (poll (&pfd, 1, 100) > 0)
            on_pmix_events (L);
    }
}

static void run_attempt (struct launch *L)
{
    struct pollfd pfd[2] = {
        {.fd = L->sigfd, .events = POLLIN},
        {.fd = pmixhost_fd (L->h), .events = POLLIN},
    };
    struct pmixhost_job_info ji;

    reap (L); /* a rank may have died before we polled */
    while (L->nalive > 0) {
        int timeout = -1;

        if (L->init_timeout > 0 && !L->init_timed_out && !L->restart_needed &&
            !L->aborted) {
            pmixhost_job_info (L->job, &ji);
            if (!ji.initialized) {
                double left = L->attempt_t0 + L->init_timeout - now_mono ();
                if (left <= 0) {
                    L->init_timed_out = 1;
                    L->restart_needed = 1;
                    L->restart_rank = -1;
                    evlog (L, "init_timeout", "seconds=%.3f", L->init_timeout);
                    stop_job (L);
                    continue;
                }
                timeout = (int)(left * 1000) + 1;
            }
        }
        if (poll (pfd, 2, timeout) < 0 && errno != EINTR) {
            fprintf (stderr, "pmix-launch: poll: %s\n", strerror (errno));
            stop_job (L);
            break;
        }
        if (pfd[1].revents & POLLIN)
            on_pmix_events (L);
        if (pfd[0].revents & POLLIN)
            on_signal (L);
    }
    on_pmix_events (L);
    wait_lost (L);
}

static void reset_attempt (struct launch *L)
{
    L->aborted = 0;
    L->abort_rank = -1;
    L->abort_code = 0;
    L->abort_msg[0] = '\0';
    L->restart_needed = 0;
    L->restart_rank = -1;
    L->restart_status = 0;
    L->recovered = 0;
    L->first_fail_rank = -1;
    L->first_fail_status = 0;
    L->ndone_ok = 0;
    L->first_bad_rank = -1;
    L->first_bad_status = 0;
    L->init_timed_out = 0;
    L->nshm_prefix = 0;
}

static int setup_signals (struct launch *L)
{
    sigset_t set;

    signal (SIGPIPE, SIG_IGN);
    sigemptyset (&set);
    sigaddset (&set, SIGCHLD);
    sigaddset (&set, SIGINT);
    sigaddset (&set, SIGTERM);
    sigaddset (&set, SIGHUP);
    if (sigprocmask (SIG_BLOCK, &set, &L->oldmask) < 0 ||
        (L->sigfd = signalfd (-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        fprintf (stderr, "pmix-launch: signalfd: %s\n", strerror (errno));
        return -1;
    }
    return 0;
}

int main (int argc, char **argv)
{
    struct launch L = {0};
    struct pmixhost_opts hopts = {0};
    struct pmixhost_job_opts jopts = {0};
    struct pmixhost_job_info ji;
    elastic_error_t e;
    char st[32];
    int rc = 1, leaked;

    L.btl = "sm";
    L.oversubscribe = -1;
    L.evfd = -1;
    L.t0 = now_mono ();
    snprintf (L.run_id, sizeof (L.run_id), "%d", (int)getpid ());
    if (parse_args (&L, argc, argv) < 0)
        return 2;
    if (L.event_log &&
        (L.evfd = open (L.event_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) <
            0) {
        fprintf (stderr,
                 "pmix-launch: --event-log: cannot open '%s': %s\n",
                 L.event_log,
                 strerror (errno));
        return 2;
    }
    if (!(L.pid = calloc ((size_t)L.nranks, sizeof (*L.pid))) ||
        !(L.alive = calloc ((size_t)L.nranks, sizeof (*L.alive)))) {
        fprintf (stderr, "pmix-launch: out of memory\n");
        return 1;
    }
    if (setup_signals (&L) < 0)
        return 1;
    hopts.tmpdir = L.tmpdir;
    hopts.no_nodelay = L.no_nodelay;
    if (!(L.h = pmixhost_create (&hopts, &e))) {
        fprintf (stderr, "pmix-launch: %s\n", e.text);
        return 1;
    }
    evlog (&L, "server", "dir=%s", pmixhost_dir (L.h));

    for (L.attempt = 0;; L.attempt++) {
        reset_attempt (&L);
        jopts.run_id = L.run_id;
        jopts.attempt = L.attempt;
        jopts.nranks = L.nranks;
        jopts.btl = L.btl;
        jopts.oversubscribed = L.oversubscribe;
        L.attempt_t0 = now_mono ();
        if (!(L.job = pmixhost_job_create (L.h, &jopts, &e))) {
            fprintf (stderr, "pmix-launch: %s\n", e.text);
            rc = 1;
            goto done;
        }
        pmixhost_job_info (L.job, &ji);
        evlog (&L,
               "job",
               "nspace=%s ranks=%d attempt=%d oversubscribed=%d",
               pmixhost_job_nspace (L.job),
               L.nranks,
               L.attempt,
               ji.oversubscribed);
        if (start_ranks (&L) < 0)
            stop_job (&L);
        run_attempt (&L);
        pmixhost_job_info (L.job, &ji);
        evlog (&L,
               "job_end",
               "nspace=%s connected=%d finalized=%d failed=%d lost=%d deregistered=%d "
               "fences=%d",
               pmixhost_job_nspace (L.job),
               ji.connected,
               ji.finalized,
               ji.failed,
               ji.lost,
               ji.deregistered,
               ji.fences);
        if (L.restart_needed) {
            if (L.restart_rank >= 0) {
                status_text (L.restart_status, st, sizeof (st));
                fprintf (stderr,
                         "pmix-launch: %s: restart needed: rank %d died during MPI_Init "
                         "(%s)\n",
                         pmixhost_job_nspace (L.job),
                         L.restart_rank,
                         st);
            } else
                fprintf (stderr,
                         "pmix-launch: %s: restart needed: MPI_Init did not finish "
                         "within %.3g s\n",
                         pmixhost_job_nspace (L.job),
                         L.init_timeout);
        }
        pmixhost_job_destroy (L.job);
        L.job = NULL;
        leaked = shm_leaked (&L);
        evlog (&L, "shm_check", "prefixes=%d leaked=%d", L.nshm_prefix, leaked);
        if (L.restart_needed && !L.stop_signal && !L.aborted &&
            L.attempt < L.max_restarts) {
            evlog (&L, "restart", "attempt=%d", L.attempt + 1);
            continue;
        }
        break;
    }

    /* the verdict of the last attempt */
    if (L.stop_signal) {
        fprintf (stderr, "pmix-launch: stopped by signal %d\n", L.stop_signal);
        rc = 128 + L.stop_signal;
    } else if (L.aborted) {
        fprintf (stderr,
                 "pmix-launch: MPI_Abort by rank %d with code %d%s%s\n",
                 L.abort_rank,
                 L.abort_code,
                 L.abort_msg[0] ? ": " : "",
                 L.abort_msg);
        rc = L.abort_code ? L.abort_code & 0xff : 1;
        if (rc == 0)
            rc = 1;
    } else if (L.restart_needed) {
        fprintf (
            stderr, "pmix-launch: no restart left (--max-restarts %d)\n", L.max_restarts);
        rc = EXIT_RELAUNCH;
    } else if (L.first_bad_rank >= 0) {
        status_text (L.first_bad_status, st, sizeof (st));
        fprintf (stderr, "pmix-launch: rank %d failed (%s)\n", L.first_bad_rank, st);
        rc = status_code (L.first_bad_status);
    } else if (L.ndone_ok == 0) {
        status_text (L.first_fail_status, st, sizeof (st));
        fprintf (stderr,
                 "pmix-launch: no rank finished (first failure: rank %d, %s)\n",
                 L.first_fail_rank,
                 st);
        rc = L.first_fail_rank >= 0 ? status_code (L.first_fail_status) : 1;
    } else {
        rc = 0;
    }
    fprintf (
        stderr,
        "pmix-launch: %d ranks, attempt %d, %d failure%s recovered in place, exit %d\n",
        L.nranks,
        L.attempt,
        L.recovered,
        L.recovered == 1 ? "" : "s",
        rc);
done:
    evlog (&L, "end", "exit=%d", rc);
    if (L.job) {
        kill_all (&L, SIGKILL);
        while (L.nalive > 0 && wait (NULL) > 0)
            L.nalive--;
        pmixhost_job_destroy (L.job);
    }
    pmixhost_destroy (L.h);
    if (L.evfd >= 0)
        close (L.evfd);
    free (L.pid);
    free (L.alive);
    return rc;
}
