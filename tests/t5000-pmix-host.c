/* t5000-pmix-host.c - the hosted PMIx server with real PMIx clients
 *
 * The test is both sides: it hosts the server (src/exec/pmix/pmix_host.c) and
 * re-executes itself as PMIx clients ("t5000-pmix-host client MODE"), which
 * connect, run the four fences Open MPI 5's MPI_Init runs, and then finish,
 * die by SIGKILL, exit without finalizing, or call PMIx_Abort.  A waiting
 * client must receive the fault event exactly as ULFM reads it: status,
 * source = the dead rank, an info of type PMIX_PROC naming it.  No MPI.
 *
 * A client that is to fail waits, after its fences, for a byte on its "go"
 * pipe (descriptor GO_FD): the server side sends it once it has looked at
 * the job's sockets, so that what it counts never races with the failure.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

#include "exec/pmix/pmix_host.h"
#include "lib/tap.h"

extern char **environ;

#define GO_FD 3 /* a client's "go" pipe: fail only after a byte arrives */

/* ---- client side -------------------------------------------------------- */

static volatile int got_event;

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
    int affected = -1, nproc = 0;

    (void)id;
    (void)results;
    (void)nresults;
    for (size_t i = 0; i < ninfo; i++) {
        if (info[i].value.type == PMIX_PROC &&
            PMIX_CHECK_KEY (&info[i], PMIX_EVENT_AFFECTED_PROC)) {
            affected = (int)info[i].value.data.proc->rank;
            nproc++;
        }
    }
    printf ("event status=%d source=%d affected=%d nproc=%d\n",
            (int)status,
            (int)source->rank,
            affected,
            nproc);
    fflush (stdout);
    got_event = 1;
    if (cbfunc)
        cbfunc (PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static int client (const char *mode)
{
    pmix_proc_t me;
    pmix_status_t codes[2] = {PMIX_ERR_PROC_ABORTED_BY_SIG, PMIX_ERR_PROC_TERM_WO_SYNC};
    pmix_info_t info;
    bool yes = true;
    pmix_status_t rc;

    if ((rc = PMIx_Init (&me, NULL, 0)) != PMIX_SUCCESS) {
        printf ("client: PMIx_Init: %s\n", PMIx_Error_string (rc));
        return 1;
    }
    PMIx_Register_event_handler (codes, 2, NULL, 0, on_fault, NULL, NULL);
    PMIX_INFO_LOAD (&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    for (int i = 0; i < 4; i++) {
        if ((rc = PMIx_Fence (NULL, 0, i % 2 ? NULL : &info, i % 2 ? 0 : 1)) !=
            PMIX_SUCCESS) {
            printf ("client: fence %d: %s\n", i, PMIx_Error_string (rc));
            return 1;
        }
    }
    printf ("client %d initialized\n", (int)me.rank);
    fflush (stdout);
    if (!strcmp (mode, "die") || !strcmp (mode, "exit3") || !strcmp (mode, "abort")) {
        struct pollfd go = {.fd = GO_FD, .events = POLLIN};
        char c;
        if (poll (&go, 1, 30000) != 1 || read (GO_FD, &c, 1) != 1) {
            printf ("client: no go from the server within 30 s\n");
            return 1;
        }
    }
    if (!strcmp (mode, "die"))
        raise (SIGKILL);
    if (!strcmp (mode, "exit3"))
        _exit (3);
    if (!strcmp (mode, "abort")) {
        PMIx_Abort (5, "unit abort", NULL, 0);
        _exit (5);
    }
    if (!strcmp (mode, "wait")) {
        for (int i = 0; i < 3000 && !got_event; i++)
            usleep (10000);
    }
    if (!strcmp (mode, "hang"))
        for (;;)
            pause ();
    PMIx_Finalize (NULL, 0);
    return !strcmp (mode, "wait") && !got_event ? 1 : 0;
}

/* ---- server side -------------------------------------------------------- */

static char tmp[PATH_MAX];

static double now (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_has (char *const *env, const char *entry)
{
    for (; env && *env; env++)
        if (!strcmp (*env, entry))
            return 1;
    return 0;
}

static int env_has_prefix (char *const *env, const char *prefix)
{
    for (; env && *env; env++)
        if (!strncmp (*env, prefix, strlen (prefix)))
            return 1;
    return 0;
}

/* Start rank r of job as "client MODE", stdout to tmp/out.<tag>.<r>; *go
 * (if not NULL) gets the write end of its "go" pipe. */
static pid_t
spawn (struct pmixhost_job *job, int r, const char *mode, const char *tag, int *go)
{
    char *const *over = pmixhost_job_env (job, r);
    char out[PATH_MAX + 64], *argv[] = {"/proc/self/exe", "client", (char *)mode, NULL};
    size_t n = 0, k = 0;
    char **env;
    pid_t pid;
    int fd, gp[2] = {-1, -1};

    snprintf (out, sizeof (out), "%s/out.%s.%d", tmp, tag, r);
    if ((fd = open (out, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        return -1;
    if (go && pipe2 (gp, O_CLOEXEC) < 0) {
        close (fd);
        return -1;
    }
    for (char **e = environ; *e; e++)
        n++;
    for (char *const *e = over; *e; e++)
        n++;
    if (!(env = calloc (n + 1, sizeof (*env))))
        return -1;
    for (char **e = environ; *e; e++)
        if (strncmp (*e, "PMIX_", 5) && strncmp (*e, "OMPI_MCA_", 9))
            env[k++] = *e;
    for (char *const *e = over; *e; e++)
        env[k++] = *e;
    if ((pid = fork ()) == 0) {
        dup2 (fd, STDOUT_FILENO);
        if (gp[0] >= 0)
            dup2 (gp[0], GO_FD); /* dup2 clears close-on-exec */
        execve (argv[0], argv, env);
        _exit (127);
    }
    close (fd);
    free (env);
    if (gp[0] >= 0)
        close (gp[0]);
    if (go)
        *go = gp[1];
    if (pid > 0)
        pmixhost_job_started (job, r, pid);
    return pid;
}

static char *slurp (const char *tag, int r)
{
    static char buf[4096];
    char path[PATH_MAX + 64];
    FILE *f;
    size_t n;

    snprintf (path, sizeof (path), "%s/out.%s.%d", tmp, tag, r);
    buf[0] = '\0';
    if ((f = fopen (path, "r"))) {
        n = fread (buf, 1, sizeof (buf) - 1, f);
        buf[n] = '\0';
        fclose (f);
    }
    return buf;
}

struct run {
    struct pmixhost *h;
    struct pmixhost_job *job;
    int n;
    pid_t pid[4];
    int alive[4];
    int verdict[4];
    int wstatus[4];
    int events[8]; /* count per type */
    int abort_status;
    char abort_msg[256];
    int nodelay_without;
    int nodelay_total;
    int remote_fail_rank; /* > 0: report it failed on "another node" */
    int go[4];            /* write ends of the "go" pipes, -1 if none */
};

/* Let every client that waits for it go on (see GO_FD). */
static void release (struct run *R)
{
    for (int r = 0; r < 4; r++)
        if (R->go[r] >= 0) {
            if (write (R->go[r], "g", 1) != 1)
                diag ("go pipe of rank %d: %s", r, strerror (errno));
            close (R->go[r]);
            R->go[r] = -1;
        }
}

/* Count and act on the server's pending events. */
static void drain (struct run *R)
{
    struct pmixhost_event ev;

    while (pmixhost_next_event (R->h, &ev)) {
        if (ev.type > 0 && ev.type < 8)
            R->events[ev.type]++;
        if (ev.type == PMIXHOST_EV_INITIALIZED) {
            R->nodelay_without = pmixhost_nodelay_check (R->h, &R->nodelay_total);
            if (R->remote_fail_rank > 0)
                pmixhost_job_remote_failure (R->job, R->remote_fail_rank, 1);
            release (R); /* the sockets are counted: the failures may come */
        }
        if (ev.type == PMIXHOST_EV_ABORT) {
            R->abort_status = ev.status;
            snprintf (R->abort_msg, sizeof (R->abort_msg), "%s", ev.message);
            for (int r = 0; r < R->n; r++)
                if (R->alive[r])
                    kill (R->pid[r], SIGKILL);
        }
    }
}

/* Drive a job until every rank exited (30 s at most).  Returns 0 or -1. */
static int drive (struct run *R)
{
    double deadline = now () + 30;
    int left = R->n;

    for (int r = 0; r < R->n; r++)
        R->alive[r] = 1;
    while (left > 0 && now () < deadline) {
        struct pollfd pfd = {.fd = pmixhost_fd (R->h), .events = POLLIN};
        int st;
        pid_t pid;

        poll (&pfd, 1, 20);
        drain (R);
        while ((pid = waitpid (-1, &st, WNOHANG)) > 0) {
            for (int r = 0; r < R->n; r++) {
                if (R->alive[r] && R->pid[r] == pid) {
                    R->alive[r] = 0;
                    R->wstatus[r] = st;
                    R->verdict[r] = pmixhost_job_exited (R->job, r, st);
                    left--;
                }
            }
        }
    }
    release (R); /* close what an early end left open */
    for (int r = 0; r < R->n; r++)
        if (R->alive[r]) {
            kill (R->pid[r], SIGKILL);
            waitpid (R->pid[r], NULL, 0);
        }
    /* a rank's last events (its finalize) may still be queued when its
     * exit is reaped */
    drain (R);
    return left == 0 ? 0 : -1;
}

static struct pmixhost_job *make_job (struct pmixhost *h, int attempt, int n)
{
    struct pmixhost_job_opts o = {
        .run_id = "unit", .attempt = attempt, .nranks = n, .oversubscribed = -1};
    elastic_error_t err = {{0}};
    struct pmixhost_job *job = pmixhost_job_create (h, &o, &err);

    if (!job)
        diag ("pmixhost_job_create: %s", err.text);
    return job;
}

/* Two ranks: rank 1 does `mode`, rank 0 waits for the fault event. */
static void
failure_case (struct pmixhost *h, int attempt, const char *mode, int want_status)
{
    struct run R = {.h = h, .n = 2, .go = {-1, -1, -1, -1}};
    char want[256];

    if (!(R.job = make_job (h, attempt, 2))) {
        ok (0, "%s: job created", mode);
        return;
    }
    R.pid[0] = spawn (R.job, 0, "wait", mode, NULL);
    R.pid[1] = spawn (R.job, 1, mode, mode, &R.go[1]);
    ok (drive (&R) == 0, "%s: both ranks exited", mode);
    is_int (R.events[PMIXHOST_EV_CONNECTED], 2, "%s: 2 connected events", mode);
    is_int (
        R.events[PMIXHOST_EV_INITIALIZED], 1, "%s: initialized after the 4 fences", mode);
    is_int (R.nodelay_without, 0, "%s: no client socket without TCP_NODELAY", mode);
    is_int (R.nodelay_total, 2, "%s: 2 client sockets seen", mode);
    is_int (R.verdict[1],
            PMIXHOST_EXIT_RECOVERABLE,
            "%s: rank 1's death is recoverable",
            mode);
    is_int (R.verdict[0], PMIXHOST_EXIT_DONE, "%s: rank 0 finished", mode);
    is_int (R.wstatus[0], 0, "%s: rank 0 exited 0 (it got the event)", mode);
    snprintf (
        want, sizeof (want), "event status=%d source=1 affected=1 nproc=1", want_status);
    ok (strstr (slurp (mode, 0), want) != NULL, "%s: rank 0 got '%s'", mode, want);
    if (!strstr (slurp (mode, 0), want))
        diag ("rank 0 printed: %s", slurp (mode, 0));
    is_int (R.events[PMIXHOST_EV_FINALIZED], 1, "%s: rank 0 finalized", mode);
    pmixhost_job_destroy (R.job);
}

int main (int argc, char **argv)
{
    struct pmixhost_opts hopts = {0};
    struct pmixhost *h, *h2;
    struct pmixhost_job *job, *job2;
    struct pmixhost_job_opts o = {0};
    struct pmixhost_job_info ji;
    elastic_error_t err = {{0}};
    char path[PATH_MAX + 256], jobdir[PATH_MAX + 128], srvdir[PATH_MAX];
    char *const *env;
    struct stat st;

    if (argc == 3 && !strcmp (argv[1], "client"))
        return client (argv[2]);
    signal (SIGPIPE, SIG_IGN);
    snprintf (tmp,
              sizeof (tmp),
              "%s/t5000.XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if (!mkdtemp (tmp))
        bail_out ("mkdtemp: %s", strerror (errno));

    /* errors */
    hopts.tmpdir = "/nonexistent/dir";
    h = pmixhost_create (&hopts, &err);
    ok (h == NULL && strstr (err.text, "/nonexistent/dir"),
        "a bad tmpdir is refused, naming it");
    diag ("%s", err.text);
    hopts.tmpdir = tmp;
    h = pmixhost_create (&hopts, &err);
    ok (h != NULL, "server started");
    if (!h)
        bail_out ("pmixhost_create: %s", err.text);
    snprintf (srvdir, sizeof (srvdir), "%s", pmixhost_dir (h));
    ok (stat (srvdir, &st) == 0 && S_ISDIR (st.st_mode),
        "server directory %s exists",
        srvdir);
    ok (pmixhost_fd (h) >= 0, "event fd is valid");
    h2 = pmixhost_create (&hopts, &err);
    ok (h2 == NULL && errno == EBUSY && strstr (err.text, "already"),
        "a second server is refused");
    diag ("%s", err.text);

    o.run_id = "bad id";
    o.nranks = 2;
    ok (!pmixhost_job_create (h, &o, &err) && strstr (err.text, "'bad id'"),
        "a bad run id is refused, naming it");
    diag ("%s", err.text);
    o.run_id = "unit";
    o.nranks = 0;
    ok (!pmixhost_job_create (h, &o, &err) && strstr (err.text, "ranks: 0"),
        "0 ranks are refused");
    diag ("%s", err.text);
    o.nranks = 2;
    o.btl = "ib";
    ok (!pmixhost_job_create (h, &o, &err) &&
            strstr (err.text, "btl: 'ib' is not accepted (sm, tcp)"),
        "an unknown btl is refused with the accepted values");
    diag ("%s", err.text);
    o.btl = NULL;
    o.attempt = -1;
    ok (!pmixhost_job_create (h, &o, &err) && strstr (err.text, "attempt: -1"),
        "a negative attempt is refused");

    /* a job's environment and directories */
    o.attempt = 9;
    o.nranks = 3;
    o.btl = "tcp";
    o.oversubscribed = 0;
    if (!(job = pmixhost_job_create (h, &o, &err)))
        bail_out ("pmixhost_job_create: %s", err.text);
    is_str (pmixhost_job_nspace (job),
            "elastic.unit.9",
            "namespace is elastic.<run id>.<attempt>");
    env = pmixhost_job_env (job, 1);
    ok (env_has (env, "PMIX_NAMESPACE=elastic.unit.9") && env_has (env, "PMIX_RANK=1"),
        "rank 1's environment names its namespace and rank");
    ok (env_has_prefix (env, "PMIX_SERVER_URI"),
        "rank 1's environment has the server's URI");
    ok (env_has (env, "OMPI_MCA_mpi_ft_enable=1") && env_has (env, "OMPI_MCA_pml=ob1") &&
            env_has (env, "OMPI_MCA_btl=self,tcp") && env_has (env, "OMPI_MCA_coll=^han"),
        "rank 1's environment sets ULFM's Open MPI parameters (tcp)");
    ok (pmixhost_job_env (job, 3) == NULL && pmixhost_job_env (job, -1) == NULL,
        "no environment for ranks out of range");
    snprintf (jobdir, sizeof (jobdir), "%s/elastic.unit.9", srvdir);
    snprintf (path, sizeof (path), "%s/2", jobdir);
    ok (stat (path, &st) == 0 && S_ISDIR (st.st_mode),
        "rank session directory %s exists",
        path);
    job2 = pmixhost_job_create (h, &o, &err);
    ok (!job2 && errno == EEXIST && strstr (err.text, "elastic.unit.9"),
        "the same namespace twice is refused");
    diag ("%s", err.text);

    /* verdicts of ranks that never connected */
    is_int (
        pmixhost_job_exited (job, 0, 0), PMIXHOST_EXIT_DONE, "exit 0 without PMIx: done");
    is_int (pmixhost_job_exited (job, 1, SIGKILL),
            PMIXHOST_EXIT_RESTART,
            "killed before MPI_Init finished: restart");
    is_int (
        pmixhost_job_exited (job, 1, SIGKILL), -1, "a rank reported twice is refused");
    pmixhost_job_info (job, &ji);
    ok (ji.restart_needed && ji.restart_rank == 1 && !ji.initialized &&
            !ji.oversubscribed,
        "job info: restart needed for rank 1, not initialized, not oversubscribed");
    pmixhost_job_stop (job);
    is_int (pmixhost_job_exited (job, 2, SIGKILL),
            PMIXHOST_EXIT_STOPPED,
            "after stop: stopped");
    pmixhost_job_destroy (job);
    ok (stat (jobdir, &st) < 0 && errno == ENOENT, "job directory removed with the job");

    /* oversubscription is automatic */
    o.attempt = 10;
    o.nranks = 4096;
    o.oversubscribed = -1;
    if ((job = pmixhost_job_create (h, &o, &err))) {
        pmixhost_job_info (job, &ji);
        ok (ji.oversubscribed == 1, "4096 ranks on this node are oversubscribed");
        pmixhost_job_stop (job);
        pmixhost_job_destroy (job);
    } else
        ok (0, "4096-rank job created (%s)", err.text);

    /* real clients */
    failure_case (h, 0, "die", PMIX_ERR_PROC_ABORTED_BY_SIG);
    failure_case (h, 1, "exit3", PMIX_ERR_PROC_TERM_WO_SYNC);
    {
        /* a failure reported by another node's server (the transport's
         * path): rank 2 "is elsewhere"; the local ranks get the event */
        struct run R = {.h = h, .n = 3, .remote_fail_rank = 2, .go = {-1, -1, -1, -1}};
        if ((R.job = make_job (h, 4, 3))) {
            R.pid[0] = spawn (R.job, 0, "wait", "remote", NULL);
            R.pid[1] = spawn (R.job, 1, "wait", "remote", NULL);
            R.pid[2] = spawn (R.job, 2, "hang", "remote", NULL);
            R.n = 2; /* drive ranks 0 and 1; rank 2 is killed below */
            ok (drive (&R) == 0, "remote: the local ranks finished");
            ok (strstr (slurp ("remote", 0),
                        "event status=-402 source=2 affected=2 nproc=1") &&
                    strstr (slurp ("remote", 1),
                            "event status=-402 source=2 affected=2 nproc=1"),
                "remote: both local ranks got the fault event for rank 2");
            pmixhost_job_info (R.job, &ji);
            is_int (ji.failed, 1, "remote: counted as a failure");
            kill (R.pid[2], SIGKILL);
            waitpid (R.pid[2], NULL, 0);
            pmixhost_job_stop (R.job);
            pmixhost_job_destroy (R.job);
        } else
            ok (0, "remote job created");
    }
    {
        struct run R = {.h = h, .n = 2, .go = {-1, -1, -1, -1}};
        if ((R.job = make_job (h, 2, 2))) {
            R.pid[0] = spawn (R.job, 0, "hang", "abort", NULL);
            R.pid[1] = spawn (R.job, 1, "abort", "abort", &R.go[1]);
            ok (drive (&R) == 0, "abort: both ranks exited");
            is_int (R.events[PMIXHOST_EV_ABORT], 1, "abort: one abort event");
            is_int (R.abort_status, 5, "abort: the code is reported");
            is_str (R.abort_msg, "unit abort", "abort: the message is reported");
            ok (R.verdict[0] == PMIXHOST_EXIT_ABORTED &&
                    R.verdict[1] == PMIXHOST_EXIT_ABORTED,
                "abort: both exits are part of the abort (no fault event)");
            ok (!strstr (slurp ("abort", 0), "event"),
                "abort: the other rank got no fault event");
            pmixhost_job_info (R.job, &ji);
            ok (ji.aborted && ji.abort_rank == 1 && ji.failed == 0, "abort: job info");
            pmixhost_job_destroy (R.job);
        } else
            ok (0, "abort job created");
    }
    {
        /* a rank killed between fences: restart, and the other is stopped */
        struct run R = {.h = h, .n = 2, .go = {-1, -1, -1, -1}};
        if ((R.job = make_job (h, 3, 2))) {
            R.pid[0] = spawn (R.job, 0, "ok", "early", NULL);
            R.pid[1] = -1;
            /* rank 1 never starts: rank 0 waits in the first fence */
            R.alive[1] = 0;
            {
                double deadline = now () + 30;
                struct pmixhost_event ev;
                int connected = 0;
                while (!connected && now () < deadline) {
                    struct pollfd pfd = {.fd = pmixhost_fd (h), .events = POLLIN};
                    poll (&pfd, 1, 20);
                    while (pmixhost_next_event (h, &ev))
                        connected |= ev.type == PMIXHOST_EV_CONNECTED;
                }
                ok (connected, "early: rank 0 connected");
            }
            is_int (pmixhost_job_exited (R.job, 1, 9),
                    PMIXHOST_EXIT_RESTART,
                    "early: a rank lost before the fences end needs a restart");
            pmixhost_job_stop (R.job);
            kill (R.pid[0], SIGKILL);
            {
                int st2;
                waitpid (R.pid[0], &st2, 0);
                is_int (pmixhost_job_exited (R.job, 0, st2),
                        PMIXHOST_EXIT_STOPPED,
                        "early: the rank stopped on purpose is 'stopped'");
            }
            pmixhost_job_destroy (R.job);
        } else
            ok (0, "early job created");
    }

    pmixhost_destroy (h);
    ok (stat (srvdir, &st) < 0 && errno == ENOENT, "server directory removed");
    {
        const char *tags[] = {"die", "exit3", "abort", "early", "remote"};
        for (int t = 0; t < 5; t++)
            for (int r = 0; r < 3; r++) {
                snprintf (path, sizeof (path), "%s/out.%s.%d", tmp, tags[t], r);
                unlink (path);
            }
    }
    ok (rmdir (tmp) == 0, "nothing else left in the test's directory");
    return done_testing ();
}
