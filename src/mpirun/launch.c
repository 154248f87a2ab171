/* launch.c - run one mpirun attempt: stderr through a parser, signals */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/file.h"
#include "common/log.h"
#include "common/shm.h"
#include "launch.h"

static int sig_pipe[2] = {-1, -1};

static void on_signal (int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;

    if (write (sig_pipe[1], &c, 1) < 0) {
        /* the pipe is full: the signal is already pending in it */
    }
    errno = saved;
}

int launch_init (void)
{
    static const int sigs[] = {
        SIGTERM, SIGUSR1, SIGINT, SIGHUP, SIGCHLD, SIGTSTP, SIGCONT};
    struct sigaction sa;

    if (sig_pipe[0] >= 0)
        return 0;
    /* processes of the job that outlive mpirun become our children (see
     * sweep_orphans), not init's */
    if (prctl (PR_SET_CHILD_SUBREAPER, 1) < 0)
        log_debug ("PR_SET_CHILD_SUBREAPER: %s", strerror (errno));
    if (pipe2 (sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    memset (&sa, 0, sizeof (sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset (&sa.sa_mask);
    for (size_t i = 0; i < sizeof (sigs) / sizeof (sigs[0]); i++)
        if (sigaction (sigs[i], &sa, NULL) < 0)
            return -1;
    signal (SIGPIPE, SIG_IGN);
    return 0;
}

static int is_preempt (int sig)
{
    return sig == SIGTERM || sig == SIGUSR1;
}

static int is_interrupt (int sig)
{
    return sig == SIGINT || sig == SIGHUP;
}

int launch_wait_signal (double wait)
{
    double deadline = mono_now () + wait;

    for (;;) {
        struct pollfd p = {.fd = sig_pipe[0], .events = POLLIN};
        unsigned char c;
        double left = deadline - mono_now ();
        while (read (sig_pipe[0], &c, 1) == 1) {
            if (is_preempt (c) || is_interrupt (c))
                return c;
            if (c == SIGTSTP)
                kill (getpid (), SIGSTOP);
        }
        if (left <= 0)
            return 0;
        if (poll (&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
            return 0;
    }
}

/* Feed complete lines of buf to the parser; keep the partial tail. */
static void
feed (struct launch_result *res, char *line, size_t *len, const char *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (data[i] == '\n' || *len + 1 >= 2048) {
            line[*len] = '\0';
            if (report_feed_line (&res->rep, line) > 0 && res->t_failure == 0)
                res->t_failure = mono_now ();
            *len = 0;
            if (data[i] == '\n')
                continue;
        }
        line[(*len)++] = data[i];
    }
}

/* The pids of the children of parent that have not exited (zombies are
 * left out: an mpirun that is stuck does not reap its ranks), at most
 * max.  Returns how many it stored. */
static int list_children_of (pid_t parent, pid_t *pids, int max)
{
    DIR *d = opendir ("/proc");
    struct dirent *e;
    int n = 0;

    if (!d)
        return 0;
    while (n < max && (e = readdir (d))) {
        char path[64], buf[512], *p;
        long ppid;
        char state;
        ssize_t len;
        int fd;

        if (!isdigit ((unsigned char)e->d_name[0]))
            continue;
        snprintf (path, sizeof (path), "/proc/%s/stat", e->d_name);
        if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
            continue;
        len = read (fd, buf, sizeof (buf) - 1);
        close (fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        /* "pid (comm) state ppid ...": comm may hold spaces and parentheses */
        if (!(p = strrchr (buf, ')')) || sscanf (p + 1, " %c %ld", &state, &ppid) != 2 ||
            state == 'Z' || state == 'X')
            continue;
        if (ppid == parent)
            pids[n++] = (pid_t)atol (e->d_name);
    }
    closedir (d);
    return n;
}

/* Our children other than those already reaped: processes of the job
 * that outlived mpirun and were reparented to us. */
static int list_children (pid_t *pids, int max)
{
    return list_children_of (getpid (), pids, max);
}

/* Reap every child that has exited.  Returns how many. */
static int reap_exited (void)
{
    int n = 0;

    while (waitpid (-1, NULL, WNOHANG) > 0)
        n++;
    return n;
}

/* Signal a reparented process and its process group (each rank of mpirun
 * leads its own); a stopped one (SIGSTOP before MPI_Init) acts on nothing
 * but SIGKILL until it is continued. */
static void signal_orphan (pid_t pid, int sig)
{
    int group = getpgid (pid) == pid;

    if (group)
        kill (-pid, sig);
    kill (pid, sig);
    if (sig != SIGKILL) {
        if (group)
            kill (-pid, SIGCONT);
        kill (pid, SIGCONT);
    }
}

/* The /dev/shm files of the job's orphans, by prefix: the name up to its
 * last '.', which holds the job's id in Open MPI's segment names
 * (sm_segment.<host>.<uid>.<job id>.<local rank>); names with fewer fields
 * are not per job.  mpirun removes them at the job's end; an mpirun that
 * died first cannot.  (The same rule as elastic-exec's pmix_backend.c.) */
#define SHM_MAX 16
struct shm_prefixes {
    int n;
    char p[SHM_MAX][256];
};

static void shm_collect (struct shm_prefixes *sp, pid_t pid)
{
    char path[64], line[1024];
    FILE *f;

    snprintf (path, sizeof (path), "/proc/%d/maps", (int)pid);
    if (!(f = fopen (path, "re")))
        return;
    while (fgets (line, sizeof (line), f)) {
        char p[sizeof (sp->p[0])];
        int known = 0;

        if (!shm_prefix_of_maps_line (line, p, sizeof (p)))
            continue;
        for (int k = 0; k < sp->n && !known; k++)
            known = !strcmp (sp->p[k], p);
        if (!known && sp->n < SHM_MAX)
            strcpy (sp->p[sp->n++], p);
    }
    fclose (f);
}

static void shm_remove (const struct shm_prefixes *sp)
{
    struct dirent *de;
    DIR *d;

    if (sp->n == 0 || !(d = opendir ("/dev/shm")))
        return;
    while ((de = readdir (d)))
        for (int k = 0; k < sp->n; k++)
            if (!strncmp (de->d_name, sp->p[k], strlen (sp->p[k]))) {
                log_warn ("/dev/shm/%s was left behind by the job: removing it",
                          de->d_name);
                unlinkat (dirfd (d), de->d_name, 0);
                break;
            }
    closedir (d);
}

/* "pid (name), ..." of the first pids, into buf. */
static void describe_pids (const pid_t *pids, int n, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && i < 4 && used < size; i++) {
        char path[64], comm[64] = "?";
        int fd, len;
        snprintf (path, sizeof (path), "/proc/%d/comm", (int)pids[i]);
        if ((fd = open (path, O_RDONLY | O_CLOEXEC)) >= 0) {
            ssize_t r = read (fd, comm, sizeof (comm) - 1);
            comm[r > 0 ? r : 0] = '\0';
            comm[strcspn (comm, "\n")] = '\0';
            close (fd);
        }
        len = snprintf (
            buf + used, size - used, "%s%d %s", i ? ", " : "", (int)pids[i], comm);
        used += len > 0 ? (size_t)len : 0;
    }
    if (n > 4 && used < size)
        snprintf (buf + used, size - used, ", ...");
}

/* After mpirun ended: processes of the job that it left behind (it crashed
 * or was SIGKILLed before its ranks exited, or they were still exiting) are
 * our children as a subreaper.  They get until `wait_until` to exit by
 * themselves (ranks still writing their suspend snapshot, a wrapper's
 * guardian on its way out), then SIGTERM, 10 s later SIGKILL, and are
 * reaped; `hard`: SIGKILL at once.  Returns how many had to be signalled. */
static int sweep_orphans (double wait_until, int hard)
{
    struct shm_prefixes shm = {0};
    pid_t pids[256];
    char names[256];
    int n, signalled = 0;

    for (int phase = hard ? 2 : 0; phase < 3; phase++) {
        /* 0: let them finish, 1: SIGTERM, 2: SIGKILL */
        double deadline = phase == 0 ? wait_until : mono_now () + (phase == 1 ? 10 : 5);
        reap_exited ();
        if ((n = list_children (pids, 256)) == 0) {
            shm_remove (&shm);
            return signalled;
        }
        describe_pids (pids, n, names, sizeof (names));
        if (phase == 0)
            log_debug ("%d process%s of the job still exiting after mpirun (%s)",
                       n,
                       n == 1 ? "" : "es",
                       names);
        else {
            log_warn ("%d process%s of the job outlived mpirun (%s): %s",
                      n,
                      n == 1 ? "" : "es",
                      names,
                      phase == 1 ? "stopping them (SIGTERM)" : "killing them (SIGKILL)");
            signalled = signalled > n ? signalled : n;
            for (int i = 0; i < n; i++) {
                shm_collect (&shm, pids[i]);
                signal_orphan (pids[i], phase == 1 ? SIGTERM : SIGKILL);
            }
        }
        while (mono_now () < deadline) {
            struct timespec ts = {0, 20 * 1000000L};
            reap_exited ();
            if (list_children (pids, 256) == 0) {
                shm_remove (&shm);
                return signalled;
            }
            nanosleep (&ts, NULL);
        }
    }
    if ((n = list_children (pids, 256)) > 0) {
        describe_pids (pids, n, names, sizeof (names));
        log_err ("%d process%s of the job could not be stopped (%s)",
                 n,
                 n == 1 ? "" : "es",
                 names);
    }
    return signalled;
}

/* After a preemption, how long mpirun may stay once it has no child left
 * (every rank, or its wrapper, exited) before it is stopped: it normally
 * exits within a second. */
#define LINGER_GRACE 10.0

/* One mpirun being run: its deadlines and what its stderr pipe holds. */
struct run {
    pid_t pid;
    int errfd;
    double suspend_timeout;
    const struct launch_params *lp;
    double suspend_deadline, kill_deadline, drain_deadline, preempt_at;
    double next_child_check, childless_since;
    int had_children;        /* mpirun was seen with children (the ranks started) */
    struct shm_prefixes shm; /* the ranks' per-job /dev/shm segments */
    int status, exited, out_open, killed;
    char line[2048]; /* the partial last line of its stderr */
    size_t llen;
};

/* Fork and exec argv with stderr into errfd_w, out of reach of the signals
 * meant for us.  Returns the pid, or -1 with errno. */
static pid_t start_mpirun (char *const argv[], int errfd_w)
{
    pid_t pid, self = getpid ();

    if ((pid = fork ()) != 0)
        return pid;
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    signal (SIGTERM, SIG_DFL);
    signal (SIGUSR1, SIG_DFL);
    signal (SIGINT, SIG_DFL);
    signal (SIGHUP, SIG_DFL);
    signal (SIGCHLD, SIG_DFL);
    signal (SIGPIPE, SIG_DFL);
    signal (SIGTSTP, SIG_DFL);
    signal (SIGCONT, SIG_DFL);
    /* Out of reach of the signals meant for us: a signal to our process
     * group (timeout(1), kill 0) or from the terminal (Ctrl-C, Ctrl-Z)
     * would reach mpirun itself, which kills the job on SIGTERM and
     * SIGINT, also while the ranks suspend.  Its own session: only we
     * signal it (a terminal's input is then not forwarded to rank 0). */
    if (setsid () < 0)
        fprintf (stderr, "elastic-mpirun: setsid: %s\n", strerror (errno));
    /* If we die, even by SIGKILL, mpirun gets SIGTERM and stops the
     * ranks (a pending death is caught by the getppid check). */
    if (prctl (PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid () != self)
        _exit (127);
    dup2 (errfd_w, 2);
    execvp (argv[0], argv);
    fprintf (stderr, "elastic-mpirun: cannot run %s: %s\n", argv[0], strerror (errno));
    _exit (127);
}

/* A preemption notice (SIGTERM, SIGUSR1): the first asks the ranks to
 * suspend, a second one stops mpirun. */
static void on_preempt (struct run *r, struct launch_result *res, int c)
{
    if (res->preempt_signal == c && mono_now () - r->preempt_at < 1.0) {
        /* the same notice twice: timeout(1) signals its child and
         * then its process group, Slurm every process of the step */
        log_info ("%s received again within 1 s: the same notice", strsignal (c));
    } else if (!res->preempt_signal) {
        res->preempt_signal = c;
        r->preempt_at = mono_now ();
        r->suspend_deadline = mono_now () + r->suspend_timeout;
        log_warn ("%s received: asking the ranks to suspend to a snapshot (SIGUSR1 "
                  "through mpirun); waiting up to %.0f s for them to exit %d",
                  strsignal (c),
                  r->suspend_timeout,
                  75);
        kill (r->pid, SIGUSR1);
    } else if (!r->kill_deadline) {
        log_warn ("%s received again: stopping mpirun", strsignal (c));
        kill (r->pid, SIGTERM);
        res->forced = 1;
        r->kill_deadline = mono_now () + 15;
    }
}

/* The signals that arrived for us, while mpirun runs. */
static void on_signals (struct run *r, struct launch_result *res)
{
    pid_t self = getpid ();
    unsigned char c;

    while (read (sig_pipe[0], &c, 1) == 1) {
        if (r->exited || c == SIGCHLD)
            continue;
        if (is_preempt (c))
            on_preempt (r, res, c);
        else if (is_interrupt (c)) {
            if (!res->interrupt_signal) {
                res->interrupt_signal = c;
                log_warn ("%s received: stopping the job (no relaunch)", strsignal (c));
                kill (r->pid, SIGTERM);
                r->kill_deadline = mono_now () + 15;
            } else {
                log_warn ("%s received again: killing mpirun", strsignal (c));
                kill (r->pid, SIGKILL);
                r->killed = 1;
            }
        } else if (c == SIGTSTP) {
            /* job control: mpirun forwards SIGTSTP to the ranks */
            kill (r->pid, SIGTSTP);
            kill (self, SIGSTOP);
        } else if (c == SIGCONT)
            kill (r->pid, SIGCONT);
    }
}

/* Stop mpirun when the ranks did not suspend in time, kill it when it
 * does not stop. */
static void check_deadlines (struct run *r, struct launch_result *res)
{
    double now = mono_now ();

    if (!r->exited && r->suspend_deadline && !r->kill_deadline &&
        now > r->suspend_deadline) {
        log_warn ("the ranks did not suspend within %.0f s: stopping mpirun",
                  r->suspend_timeout);
        kill (r->pid, SIGTERM);
        res->forced = 1;
        r->kill_deadline = now + 15;
    }
    if (!r->exited && r->kill_deadline && now > r->kill_deadline) {
        log_warn ("mpirun did not stop within %.0f s: killing it",
                  res->lingered ? 5.0 : 15.0);
        kill (r->pid, SIGKILL);
        r->killed = 1;
        r->kill_deadline = now + 3600;
    }
}

static void shm_sample_ranks (struct shm_prefixes *sp, const pid_t *kids, int n);

/* The caller's watch (the MPI_Init deadline): when it says so, stop
 * mpirun as an interrupt does (SIGTERM, check_deadlines' SIGKILL after
 * 15 s); not while mpirun is being stopped or the ranks suspend. */
static void check_watch (struct run *r, struct launch_result *res)
{
    double now = mono_now ();

    if (!r->lp->watch || r->exited || r->kill_deadline || res->watch_stopped ||
        res->preempt_signal || res->interrupt_signal)
        return;
    if (!r->lp->watch (
            r->lp->watch_arg, &res->rep, now, res->watch_why, sizeof (res->watch_why)))
        return;
    res->watch_stopped = 1;
    if (res->t_failure == 0)
        res->t_failure = now;
    log_warn ("%s: stopping the attempt (SIGTERM to mpirun, SIGKILL after 15 s)",
              res->watch_why);
    kill (r->pid, SIGTERM);
    r->kill_deadline = now + 15;
}

/* PRRTE sometimes stays after every rank suspended (seen under load: its
 * children all exited, it does not), and after a job that grew into new
 * processes completed with one of them dead (a spawned job without ULFM's
 * fault tolerance): once an mpirun that had children has had none for
 * LINGER_GRACE s, after a preemption or once the ranks said the job
 * completed, it is stopped (SIGTERM, then check_deadlines' SIGKILL), and
 * its session directory goes after it (remove_session_dir).  The ranks'
 * account decides the outcome. */
static void check_linger (struct run *r, struct launch_result *res)
{
    double now = mono_now ();
    pid_t kids[64];
    int n;

    if (r->exited || r->kill_deadline || now < r->next_child_check)
        return;
    r->next_child_check = now + (res->preempt_signal ? 0.5 : 1.0);
    if ((n = list_children_of (r->pid, kids, 64)) > 0) {
        r->had_children = 1;
        r->childless_since = 0;
        if (r->shm.n == 0)
            shm_sample_ranks (&r->shm, kids, n);
        return;
    }
    if (!r->had_children)
        return;
    if (!r->childless_since)
        r->childless_since = now;
    if (now - r->childless_since < LINGER_GRACE ||
        (!res->preempt_signal &&
         !(r->lp->completed && r->lp->completed (r->lp->completed_arg))))
        return;
    log_warn ("mpirun (pid %d) is still running %.0f s after its last rank exited: "
              "stopping it",
              (int)r->pid,
              now - r->childless_since);
    kill (r->pid, SIGTERM);
    res->lingered = 1;
    /* nothing of the job is left to stop: a short wait before SIGKILL */
    r->kill_deadline = now + 5;
}

/* The per-job /dev/shm prefixes of the ranks: mpirun's children (the ranks
 * or their wrappers) and theirs, until one is found (every local rank maps
 * the job's segments, named after its id).  mpirun removes them at the
 * job's end, but not those of a rank killed inside MPI_Finalize: they are
 * removed after mpirun's end (launch_run). */
static void shm_sample_ranks (struct shm_prefixes *sp, const pid_t *kids, int n)
{
    for (int i = 0; i < n && sp->n == 0; i++) {
        pid_t ranks[8];
        int nr = list_children_of (kids[i], ranks, 8);
        shm_collect (sp, kids[i]);
        for (int k = 0; k < nr; k++)
            shm_collect (sp, ranks[k]);
    }
    if (sp->n > 0)
        log_debug ("the job's /dev/shm segments: %s*", sp->p[0]);
}

/* $TMPDIR/prterun.<host>.<pid>.<uid>, PRRTE's session directory of the
 * mpirun that was pid (its temporary directory is the first of TMPDIR,
 * TEMP, TMP, else /tmp; its host name is short).  Removed once that mpirun
 * is gone: an mpirun that was killed or crashed leaves it. */
static void remove_session_dir (pid_t pid)
{
    const char *vars[] = {"TMPDIR", "TEMP", "TMP"}, *tmp = NULL;
    char host[256], path[PATH_MAX];
    struct stat st;

    for (size_t i = 0; i < sizeof (vars) / sizeof (vars[0]) && !tmp; i++)
        if ((tmp = getenv (vars[i])) && *tmp == '\0')
            tmp = NULL;
    if (gethostname (host, sizeof (host)) < 0)
        return;
    host[sizeof (host) - 1] = '\0';
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            char *dot = strchr (host, '.');
            if (!dot)
                break;
            *dot = '\0';
        }
        if (pathfmt (path,
                     sizeof (path),
                     "%s/prterun.%s.%d.%u",
                     tmp ? tmp : "/tmp",
                     host,
                     (int)pid,
                     (unsigned)getuid ()) < 0 ||
            lstat (path, &st) < 0 || !S_ISDIR (st.st_mode))
            continue;
        log_info ("mpirun's session directory %s was left behind: removing it", path);
        if (remove_tree (path) < 0)
            log_warn ("cannot remove %s: %s", path, strerror (errno));
    }
}

/* Copy what mpirun wrote to its stderr to ours and through the parser. */
static void copy_stderr (struct run *r, struct launch_result *res)
{
    char buf[8192];
    ssize_t n = read (r->errfd, buf, sizeof (buf));

    if (n > 0) {
        /* PRRTE 3.0 writes the terminating NUL of each help message:
         * drop NULs, which would put binary bytes in the job's log
         * and hide the dashed line that opens the next message */
        size_t k = 0;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != '\0')
                buf[k++] = buf[i];
        (void)write_all (STDERR_FILENO, buf, k);
        feed (res, r->line, &r->llen, buf, k);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        r->out_open = 0;
    }
}

/* After mpirun's end: its orphans, the last line, its exit status. */
static void finish_run (struct run *r, struct launch_result *res)
{
    /* what mpirun left running: ranks still suspending get until the
     * suspend deadline; after a SIGKILL to mpirun they go at once */
    res->orphans = sweep_orphans (
        r->suspend_deadline && !res->forced ? r->suspend_deadline : mono_now () + 2,
        r->killed);
    if (r->llen > 0) {
        r->line[r->llen] = '\0';
        if (report_feed_line (&res->rep, r->line) > 0 && res->t_failure == 0)
            res->t_failure = mono_now ();
    }
    if (report_finish (&res->rep) > 0 && res->t_failure == 0)
        res->t_failure = res->t_end;
    close (r->errfd);
    if (WIFEXITED (r->status))
        res->exit_code = WEXITSTATUS (r->status);
    else if (WIFSIGNALED (r->status)) {
        res->mpirun_signal = WTERMSIG (r->status);
        res->exit_code = 128 + res->mpirun_signal;
    }
}

int launch_run (char *const argv[],
                const struct launch_params *lp,
                struct launch_result *res,
                elastic_error_t *err)
{
    struct run r = {.out_open = 1, .suspend_timeout = lp->suspend_timeout, .lp = lp};
    int errp[2];

    memset (res, 0, sizeof (*res));
    report_init (&res->rep);
    if (pipe2 (errp, O_CLOEXEC) < 0)
        return errprintf (err, "pipe: %s", strerror (errno));
    res->t_start = mono_now ();
    if ((r.pid = start_mpirun (argv, errp[1])) < 0) {
        errprintf (err, "fork: %s", strerror (errno));
        close (errp[0]);
        close (errp[1]);
        return -1;
    }
    close (errp[1]);
    r.errfd = errp[0];

    for (;;) {
        struct pollfd p[2] = {{.fd = sig_pipe[0], .events = POLLIN},
                              {.fd = r.errfd, .events = POLLIN}};

        if (r.exited && (!r.out_open || mono_now () > r.drain_deadline))
            break;
        if (poll (p, r.out_open ? 2 : 1, 200) < 0 && errno != EINTR)
            break;
        on_signals (&r, res);
        check_deadlines (&r, res);
        check_linger (&r, res);
        check_watch (&r, res);
        if (r.out_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            copy_stderr (&r, res);
        if (!r.exited && waitpid (r.pid, &r.status, WNOHANG) == r.pid) {
            r.exited = 1;
            res->t_end = mono_now ();
            /* ranks that outlive mpirun may hold the pipe: drain briefly */
            r.drain_deadline = res->t_end + 2;
        }
    }
    finish_run (&r, res);
    remove_session_dir (r.pid);
    shm_remove (&r.shm);
    return 0;
}
