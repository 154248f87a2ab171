/* local.c - the local-process backend (torchelastic's LocalElasticAgent)
 *
 * Each worker is fork()ed into its own process group with
 * PR_SET_PDEATHSIG=SIGKILL (it dies with the agent) and registered with the
 * guardian (its group dies with the agent too).  Exits are seen through a
 * pidfd per worker, so the core wakes the moment a worker dies; with the
 * agent a child subreaper, SIGCHLD also reaps orphaned grandchildren.
 * Stopping sends the signal to whole process groups, waits up to the
 * timeout, then SIGKILLs the groups.
 *
 * Stopping for a restart (agent->stop_detach) need not wait: when the
 * stop signal is sure to end every survivor without running its code (its
 * default action, neither caught, ignored nor blocked, as in a Python
 * worker that installs no handler; or SIGKILL), the survivors are moved to
 * a drain list and the next attempt starts at once, while the kernel tears
 * the old processes down.  torchelastic signals, waits up to its timeout
 * and SIGKILLs; here the same signals and the same --shutdown-timeout
 * apply, only the wait moved to the background: a drained worker that is
 * still alive at its deadline gets SIGKILL, each drained group is swept
 * and stays with the guardian until it is empty, and the agent's shutdown
 * waits for the drain list.  The dying processes are reniced to 19, so
 * that their teardown does not take the CPUs from the next attempt's
 * start.  The attempts cannot collide: each has its own process groups,
 * directories (attempt_N) and MASTER_PORT (agent.c detaches only when the
 * port is picked per attempt), and a backend that shares state with its
 * workers (a hosted PMIx namespace with connected ranks) turns detaching
 * off (local_allow_detach).  A worker that handles the signal (libelastic
 * writes a snapshot on SIGTERM) is waited for as before, so a new attempt
 * never reads state an old one is still writing.
 *
 * Binding (with hwloc, when asked: see spec_binding_wanted): every start
 * computes a fresh plan for the node's local ranks (this agent's workers,
 * or the launcher's local size in wrapper mode), logs it, binds each child
 * between fork and exec, gives it CUDA_VISIBLE_DEVICES as planned, and
 * frees the plan once the children are forked.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_impl.h"
#include "binding.h"
#include "common/log.h"
#include "errorfile.h"
#include "guardian.h"
#include "output.h"
#include "template.h"
#include "util.h"

extern char **environ;

struct lworker {
    pid_t pid;
    int pidfd;
    int reaped;
    struct ostream *out;
    struct ostream *err;
};

/* A worker of an earlier attempt, signalled and not yet gone. */
struct ldrain {
    struct ldrain *next;
    struct local *l;
    pid_t pid; /* and its process group */
    int index; /* its worker index in its attempt */
    int pidfd;
    int reaped;
    int killed; /* SIGKILL sent at the deadline */
    int rank;
    int local_rank;
    int attempt;
    double t_signal; /* CLOCK_MONOTONIC */
    double deadline; /* SIGKILL then */
    double t_reaped;
    struct ostream *out;
    struct ostream *err;
};

struct local {
    elastic_agent_t *agent;
    struct lworker *lw;
    int n;
    struct ldrain *drains; /* stopped workers not yet reaped and swept */
    int no_detach;         /* the wire-up asked to wait for stopped workers */
    struct guardian *guard;
    int dup_out_fd; /* filtered_stdout.log of this attempt */
    int dup_err_fd;
    pid_t agent_pid;
    struct binding_plan *plan; /* this start's placement; NULL = no binding */
    char note[1024];           /* the binding note logged last */
    struct local_wireup wu;    /* what a wire-up adds (all NULL: nothing) */
};

static void drain_free (struct local *l, struct ldrain *d);

void *local_backend_create (elastic_agent_t *agent)
{
    struct local *l;

    if (!(l = calloc (1, sizeof (*l))))
        return NULL;
    l->agent = agent;
    l->n = agent->nworkers;
    l->dup_out_fd = l->dup_err_fd = -1;
    if (!(l->lw = calloc ((size_t)l->n, sizeof (*l->lw)))) {
        free (l);
        return NULL;
    }
    for (int i = 0; i < l->n; i++)
        l->lw[i].pidfd = -1;
    return l;
}

void local_set_wireup (void *ctx, const struct local_wireup *w)
{
    struct local *l = ctx;

    if (w)
        l->wu = *w;
    else
        memset (&l->wu, 0, sizeof (l->wu));
}

struct guardian *local_guardian (void *ctx)
{
    return ((struct local *)ctx)->guard;
}

static void local_destroy (void *ctx)
{
    struct local *l = ctx;

    if (l) {
#if HAVE_HWLOC
        binding_plan_destroy (l->plan);
#endif
        while (l->drains) {
            struct ldrain *d = l->drains;
            l->drains = d->next;
            if (!d->reaped)
                kill (-d->pid, SIGKILL);
            drain_free (l, d);
        }
        guardian_stop (l->guard);
        if (l->dup_out_fd >= 0)
            close (l->dup_out_fd);
        if (l->dup_err_fd >= 0)
            close (l->dup_err_fd);
        free (l->lw);
        free (l);
    }
}

/* ---- output routing ------------------------------------------------------- */

/* 1 if fd is a terminal or /dev/null (or cannot be looked at): a worker
 * that inherits it needs no pty. */
static int terminal_or_null (int fd)
{
    struct stat st, null;

    if (isatty (fd) || fstat (fd, &st) < 0)
        return 1;
    return S_ISCHR (st.st_mode) && stat ("/dev/null", &null) == 0 &&
           st.st_rdev == null.st_rdev;
}

static void plan_stream (const struct elastic_agent_spec *spec,
                         const struct worker *w,
                         int bit,
                         struct output_plan *p)
{
    int redir = stdmap_get (&spec->redirects, w->local_rank) & bit;
    int tee = stdmap_get (&spec->tee, w->local_rank) & bit;
    int nfilters = bit == STD_OUT ? spec->ndup_out : spec->ndup_err;
    int console = (!redir || tee) && spec_rank_on_console (spec, w->local_rank);

    memset (p, 0, sizeof (*p));
    p->want_file = redir || tee;
    p->console_fd = console ? (bit == STD_OUT ? STDOUT_FILENO : STDERR_FILENO) : -1;
    p->want_dup = console && nfilters > 0;
    if (spec->prefix_template)
        template_expand (spec->prefix_template,
                         spec->role,
                         w->local_rank,
                         w->rank,
                         host_name (),
                         p->prefix,
                         sizeof (p->prefix));
    else if (tee)
        template_expand ("[${role_name}${local_rank}]:",
                         spec->role,
                         w->local_rank,
                         w->rank,
                         host_name (),
                         p->prefix,
                         sizeof (p->prefix));
    if (console && (p->prefix[0] || p->want_file || p->want_dup))
        p->mode = OUTPUT_PIPE;
    else if (console)
        p->mode = OUTPUT_INHERIT;
    else if (p->want_file)
        p->mode = OUTPUT_FILE;
    else
        p->mode = OUTPUT_NULL;
    /* stdout that does not go to a terminal goes through the agent's pty
     * (open_stream), so that the worker line-buffers it as under mpirun */
    if (bit == STD_OUT && (p->mode == OUTPUT_FILE || (p->mode == OUTPUT_INHERIT &&
                                                      !terminal_or_null (p->console_fd))))
        p->mode = OUTPUT_PIPE;
}

/* Descriptors for one stream: *child_fd for the worker (-1: inherit),
 * *stream for the agent side. */
static int open_stream (struct local *l,
                        const struct worker *w,
                        int bit,
                        int *child_fd,
                        struct ostream **stream,
                        char *err,
                        size_t errsz)
{
    const struct elastic_agent_spec *spec = l->agent->spec;
    struct output_plan p;
    char path[PATH_MAX];
    int file_fd = -1, pfd[2];

    *child_fd = -1;
    *stream = NULL;
    plan_stream (spec, w, bit, &p);
    if (p.want_file) {
        if (pathfmt (path,
                     sizeof (path),
                     "%s/%s",
                     w->dir,
                     bit == STD_OUT ? "stdout.log" : "stderr.log") < 0 ||
            (file_fd = open (
                 path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644)) < 0) {
            errfmt (err, errsz, "cannot create %s: %s", path, strerror (errno));
            return -1;
        }
    }
    switch (p.mode) {
        case OUTPUT_INHERIT:
            return 0;
        case OUTPUT_NULL:
            if ((*child_fd = open ("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
                snprintf (err, errsz, "/dev/null: %s", strerror (errno));
                return -1;
            }
            return 0;
        case OUTPUT_FILE:
            *child_fd = file_fd;
            return 0;
        case OUTPUT_PIPE:
            break;
    }
    if (bit == STD_OUT) {
        if (output_pty (&pfd[0], &pfd[1]) < 0) {
            snprintf (err, errsz, "pseudo-terminal for stdout: %s", strerror (errno));
            goto error;
        }
    } else if (pipe2 (pfd, O_CLOEXEC) < 0) {
        snprintf (err, errsz, "pipe: %s", strerror (errno));
        goto error;
    } else
        fcntl (pfd[0], F_SETFL, fcntl (pfd[0], F_GETFL) | O_NONBLOCK);
    if (!(*stream = ostream_create (
              pfd[0],
              file_fd,
              p.console_fd,
              p.want_dup ? (bit == STD_OUT ? l->dup_out_fd : l->dup_err_fd) : -1,
              bit == STD_OUT ? spec->dup_out : spec->dup_err,
              bit == STD_OUT ? spec->ndup_out : spec->ndup_err,
              p.prefix))) {
        snprintf (err, errsz, "out of memory");
        close (pfd[0]);
        close (pfd[1]);
        goto error;
    }
    *child_fd = pfd[1];
    return 0;
error:
    if (file_fd >= 0)
        close (file_fd);
    return -1;
}

static void on_output (elastic_agent_t *agent, int fd, int revents, void *arg)
{
    struct ostream **sp = arg;

    if (*sp && ostream_read (*sp, 16) != 1) {
        elastic_agent_unwatch (agent, fd);
        ostream_destroy (*sp);
        *sp = NULL;
    }
}

static void close_streams (struct local *l, struct lworker *lw)
{
    if (lw->out) {
        elastic_agent_unwatch (l->agent, ostream_fd (lw->out));
        ostream_destroy (lw->out);
        lw->out = NULL;
    }
    if (lw->err) {
        elastic_agent_unwatch (l->agent, ostream_fd (lw->err));
        ostream_destroy (lw->err);
        lw->err = NULL;
    }
}

/* ---- reaping -------------------------------------------------------------- */

static void worker_reaped (struct local *l, int i, int status)
{
    struct lworker *lw = &l->lw[i];

    lw->reaped = 1;
    if (lw->pidfd >= 0) {
        elastic_agent_unwatch (l->agent, lw->pidfd);
        close (lw->pidfd);
        lw->pidfd = -1;
    }
    /* the output written before the exit comes first */
    if (lw->out)
        on_output (l->agent, ostream_fd (lw->out), 0, &lw->out);
    if (lw->err)
        on_output (l->agent, ostream_fd (lw->err), 0, &lw->err);
    if (WIFEXITED (status) && WEXITSTATUS (status) == 0 && l->agent->spec->fn) {
        char path[PATH_MAX];
        size_t len;
        char *buf;
        if (pathfmt (path,
                     sizeof (path),
                     "%s/return.bin",
                     elastic_agent_worker_dir (l->agent, i)) == 0 &&
            (buf = read_file (path, 64u << 20, &len))) {
            elastic_agent_worker_set_return (l->agent, i, buf, len);
            free (buf);
        }
    }
    if (l->wu.reaped)
        l->wu.reaped (l->wu.arg, i, status);
    else if (WIFSIGNALED (status))
        elastic_agent_worker_exited (l->agent, i, 0, WTERMSIG (status));
    else
        elastic_agent_worker_exited (l->agent, i, WEXITSTATUS (status), 0);
}

static void drains_reap (struct local *l);
static int drain_reaped_pid (struct local *l, pid_t pid, int status);

static int index_of (struct local *l, pid_t pid)
{
    for (int i = 0; i < l->n; i++)
        if (l->lw[i].pid == pid && !l->lw[i].reaped)
            return i;
    return -1;
}

/* Reap workers that exited and, as a subreaper, orphans. */
static void reap (struct local *l)
{
    int status;
    pid_t pid;

    for (int i = 0; i < l->n; i++) {
        struct lworker *lw = &l->lw[i];
        if (lw->pid <= 0 || lw->reaped)
            continue;
        pid = waitpid (lw->pid, &status, WNOHANG);
        if (pid == lw->pid)
            worker_reaped (l, i, status);
        else if (pid < 0 && errno == ECHILD) {
            /* someone else reaped it: its status is lost */
            log_warn ("worker pid %d was reaped elsewhere", (int)lw->pid);
            worker_reaped (l, i, 1 << 8);
        }
    }
    drains_reap (l);
    if (!l->agent->spec->subreaper)
        return;
    while ((pid = waitpid (-1, &status, WNOHANG)) > 0) {
        int i = index_of (l, pid);
        if (i >= 0)
            worker_reaped (l, i, status);
        else if (drain_reaped_pid (l, pid, status))
            ;
        else if (pid == guardian_pid (l->guard))
            log_err ("the guardian process %d exited unexpectedly", (int)pid);
        else
            log_debug ("reaped orphan %d", (int)pid);
    }
}

static void on_pidfd (elastic_agent_t *agent, int fd, int revents, void *arg)
{
    struct local *l = arg;
    reap (l);
}

/* ---- workers stopped in the background (see the top of the file) ---------- */

static void close_stream (struct local *l, struct ostream **sp)
{
    if (*sp) {
        elastic_agent_unwatch (l->agent, ostream_fd (*sp));
        ostream_destroy (*sp);
        *sp = NULL;
    }
}

/* 1 if the process's status shows sig blocked, ignored or caught (or it
 * cannot be read while the process exists). */
static int handles_signal (pid_t pid, int sig)
{
    static const char *const fields[] = {"SigBlk:", "SigIgn:", "SigCgt:"};
    char path[64], line[256];
    int seen = 0, handles = 0;
    FILE *f;

    snprintf (path, sizeof (path), "/proc/%d/status", (int)pid);
    if (!(f = fopen (path, "re")))
        return errno != ENOENT;
    while (!handles && fgets (line, sizeof (line), f)) {
        for (size_t k = 0; k < sizeof (fields) / sizeof (fields[0]); k++) {
            size_t len = strlen (fields[k]);
            if (strncmp (line, fields[k], len) == 0) {
                unsigned long long mask = strtoull (line + len, NULL, 16);
                seen++;
                if (sig <= 64 && (mask >> (sig - 1)) & 1)
                    handles = 1;
            }
        }
    }
    fclose (f);
    return handles || seen < 3;
}

/* The process group of /proc/<name>, or -1. */
static pid_t proc_pgrp (const char *name)
{
    char path[300], buf[512], *p;
    ssize_t n;
    int fd;
    long pgrp;

    snprintf (path, sizeof (path), "/proc/%s/stat", name);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* pid (comm) state ppid pgrp ...: comm may hold anything but ')' ends it */
    if (!(p = strrchr (buf, ')')) || sscanf (p + 1, " %*c %*d %ld", &pgrp) != 1)
        return -1;
    return (pid_t)pgrp;
}

/* 1 if signum ends every process in the live workers' groups by its
 * default action: none of them blocks, ignores or catches it. */
static int stops_promptly (struct local *l, int signum)
{
    struct dirent *de;
    DIR *d;
    int ok = 1;

    if (signum == SIGKILL)
        return 1;
    if (!signal_default_terminates (signum) || !(d = opendir ("/proc")))
        return 0;
    while (ok && (de = readdir (d))) {
        pid_t pgrp;
        if (de->d_name[0] < '0' || de->d_name[0] > '9' ||
            (pgrp = proc_pgrp (de->d_name)) <= 0)
            continue;
        for (int i = 0; i < l->n; i++) {
            struct lworker *lw = &l->lw[i];
            if (lw->pid > 0 && !lw->reaped && pgrp == lw->pid &&
                handles_signal ((pid_t)atoi (de->d_name), signum)) {
                log_debug ("pid %s (group %d) handles %s: waiting for it to stop",
                           de->d_name,
                           (int)lw->pid,
                           signal_name (signum));
                ok = 0;
                break;
            }
        }
    }
    closedir (d);
    return ok;
}

/* Move every live worker (already signalled) to the drain list, but for
 * those the core counts as failed (a watchdog killed them): their exit is
 * part of the failure's report.  Returns how many were moved. */
static int detach_live (struct local *l, double timeout)
{
    elastic_agent_t *agent = l->agent;
    double now = mono_now ();
    int moved = 0;

    for (int i = 0; i < l->n; i++) {
        struct lworker *lw = &l->lw[i];
        struct ldrain *d;
        if (lw->pid <= 0 || lw->reaped || agent->w[i].failed ||
            !(d = calloc (1, sizeof (*d))))
            continue;
        d->l = l;
        d->pid = lw->pid;
        d->index = i;
        d->pidfd = lw->pidfd; /* stays watched: on_pidfd reaps drains too */
        d->rank = agent->w[i].rank;
        d->local_rank = agent->w[i].local_rank;
        d->attempt = agent->restart_count;
        d->t_signal = now;
        d->deadline = now + timeout;
        if (lw->out) {
            elastic_agent_unwatch (agent, ostream_fd (lw->out));
            d->out = lw->out;
            elastic_agent_watch (agent, ostream_fd (d->out), on_output, &d->out);
        }
        if (lw->err) {
            elastic_agent_unwatch (agent, ostream_fd (lw->err));
            d->err = lw->err;
            elastic_agent_watch (agent, ostream_fd (d->err), on_output, &d->err);
        }
        lw->out = lw->err = NULL;
        lw->pidfd = -1;
        lw->pid = 0; /* the drain owns it now, guardian entry included */
        d->next = l->drains;
        l->drains = d;
        moved++;
    }
    return moved;
}

/* A drained worker was reaped: report it, sweep its group. */
static void drain_done (struct local *l, struct ldrain *d, int status)
{
    int sig = WIFSIGNALED (status) ? WTERMSIG (status) : 0;
    int code = WIFEXITED (status) ? WEXITSTATUS (status) : -sig;

    d->reaped = 1;
    d->t_reaped = mono_now ();
    if (d->pidfd >= 0) {
        elastic_agent_unwatch (l->agent, d->pidfd);
        close (d->pidfd);
        d->pidfd = -1;
    }
    /* what it wrote before it died */
    if (d->out)
        on_output (l->agent, ostream_fd (d->out), 0, &d->out);
    if (d->err)
        on_output (l->agent, ostream_fd (d->err), 0, &d->err);
    close_stream (l, &d->out);
    close_stream (l, &d->err);
    kill (-d->pid, SIGKILL); /* whatever else is left in its group */
    if (l->wu.drained)
        l->wu.drained (l->wu.arg, d->index, status);
    eventlog_emit (l->agent->ev,
                   "worker_exit",
                   json_pack ("{s:i s:i s:i s:i s:i s:s? s:s s:b s:b s:f}",
                              "rank",
                              d->rank,
                              "local_rank",
                              d->local_rank,
                              "pid",
                              (int)d->pid,
                              "attempt",
                              d->attempt,
                              "exitcode",
                              code,
                              "signal",
                              sig ? signal_name (sig) : NULL,
                              "state",
                              "STOPPED",
                              "background",
                              1,
                              "killed",
                              d->killed,
                              "stop_ms",
                              (d->t_reaped - d->t_signal) * 1e3));
    log_debug ("rank %d of attempt %d (pid %d) stopped in %.1f ms",
               d->rank,
               d->attempt,
               (int)d->pid,
               (d->t_reaped - d->t_signal) * 1e3);
}

static int drain_reaped_pid (struct local *l, pid_t pid, int status)
{
    for (struct ldrain *d = l->drains; d; d = d->next) {
        if (d->pid == pid && !d->reaped) {
            drain_done (l, d, status);
            return 1;
        }
    }
    return 0;
}

static void drains_reap (struct local *l)
{
    int status;

    for (struct ldrain *d = l->drains; d; d = d->next) {
        pid_t pid;
        if (d->reaped)
            continue;
        pid = waitpid (d->pid, &status, WNOHANG);
        if (pid == d->pid)
            drain_done (l, d, status);
        else if (pid < 0 && errno == ECHILD)
            drain_done (l, d, 1 << 8);
    }
}

static void drain_free (struct local *l, struct ldrain *d)
{
    if (d->pidfd >= 0) {
        elastic_agent_unwatch (l->agent, d->pidfd);
        close (d->pidfd);
    }
    close_stream (l, &d->out);
    close_stream (l, &d->err);
    if (l->guard)
        guardian_remove (l->guard, d->pid);
    free (d);
}

/* SIGKILL drained workers past their deadline; forget those whose group is
 * empty (or that were swept 2 s ago: its orphans are ours to reap). */
static void drains_check (struct local *l)
{
    struct ldrain **dp = &l->drains;
    double now = mono_now ();

    while (*dp) {
        struct ldrain *d = *dp;
        if (!d->reaped && !d->killed && now >= d->deadline) {
            log_warn ("rank %d of attempt %d (pid %d) still running %.1f s after "
                      "the stop signal: sending SIGKILL",
                      d->rank,
                      d->attempt,
                      (int)d->pid,
                      now - d->t_signal);
            eventlog_emit (l->agent->ev,
                           "kill",
                           json_pack ("{s:i s:f s:i}",
                                      "workers",
                                      1,
                                      "after_s",
                                      now - d->t_signal,
                                      "attempt",
                                      d->attempt));
            if (kill (-d->pid, SIGKILL) < 0 && errno == ESRCH)
                kill (d->pid, SIGKILL);
            d->killed = 1;
        }
        if (d->reaped &&
            ((kill (-d->pid, 0) < 0 && errno == ESRCH) || now - d->t_reaped > 2.0)) {
            *dp = d->next;
            drain_free (l, d);
            continue;
        }
        dp = &d->next;
    }
}

static int drains_done (elastic_agent_t *agent, void *arg)
{
    struct local *l = arg;

    reap (l);
    drains_check (l);
    return l->drains == NULL;
}

/* Wait for the drain list: each drained worker until its deadline, then
 * SIGKILL (at once when the agent was told to hurry). */
static void drains_finish (struct local *l)
{
    double wait = 0, now = mono_now ();

    if (!l->drains)
        return;
    for (struct ldrain *d = l->drains; d; d = d->next)
        if (!d->reaped && d->deadline - now > wait)
            wait = d->deadline - now;
    if (elastic_agent_wait (l->agent, wait + 10.0, drains_done, l) == ELASTIC_OK)
        return;
    for (struct ldrain *d = l->drains; d; d = d->next) {
        if (!d->reaped) {
            kill (-d->pid, SIGKILL);
            d->killed = 1;
            d->deadline = mono_now ();
        }
    }
    now = mono_now ();
    while (!drains_done (l->agent, l) && mono_now () < now + 10.0)
        usleep (1000);
    if (l->drains)
        log_err ("workers of an earlier attempt did not die within 10 s of SIGKILL");
    while (l->drains) {
        struct ldrain *d = l->drains;
        l->drains = d->next;
        drain_free (l, d);
    }
}

void local_allow_detach (void *ctx, int allowed)
{
    ((struct local *)ctx)->no_detach = !allowed;
}

int local_draining (void *ctx)
{
    for (struct ldrain *d = ((struct local *)ctx)->drains; d; d = d->next)
        if (!d->reaped)
            return 1;
    return 0;
}

/* ---- start ------------------------------------------------------------------ */

/* 1 if the NULL-terminated list v sets the variable of "NAME=value" e. */
static int env_sets (char *const *v, const char *e)
{
    size_t len = strcspn (e, "=");

    for (; v && *v; v++)
        if (strncmp (*v, e, len) == 0 && (*v)[len] == '=')
            return 1;
    return 0;
}

/* The agent's environment (without what the wire-up drops) overlaid with
 * the NULL-terminated lists of layers, each winning over the ones before
 * it: the contract's variables, the wire-up's, the binding's. */
static char **build_environ (struct local *l, char *const *layers[], int nlayers)
{
    size_t n = 0, k = 0;
    char **env;

    for (char **e = environ; e && *e; e++)
        n++;
    for (int j = 0; j < nlayers; j++)
        for (char *const *a = layers[j]; a && *a; a++)
            n++;
    if (!(env = calloc (n + 1, sizeof (*env))))
        return NULL;
    for (char **e = environ; e && *e; e++) {
        int over = l->wu.drop && l->wu.drop (l->wu.arg, *e);
        for (int j = 0; j < nlayers && !over; j++)
            over = env_sets (layers[j], *e);
        if (!over)
            env[k++] = *e;
    }
    for (int j = 0; j < nlayers; j++) {
        for (char *const *a = layers[j]; a && *a; a++) {
            int over = 0;
            for (int m = j + 1; m < nlayers && !over; m++)
                over = env_sets (layers[m], *a);
            if (!over)
                env[k++] = *a;
        }
    }
    env[k] = NULL;
    return env;
}

/* ---- binding ---------------------------------------------------------------- */

#if HAVE_HWLOC
/* The local ranks of the node that this agent's workers are among: the
 * launcher's local size in wrapper mode, else this agent's workers. */
static int node_local_ranks (struct local *l)
{
    const struct elastic_agent_rdzv_info *ri = &l->agent->rinfo;
    int n = ri->node_local_size > 0 ? ri->node_local_size : l->n;

    if (ri->local_rank_base + l->n > n)
        n = ri->local_rank_base + l->n;
    return n;
}
#endif

/* Compute this start's plan (none unless binding was asked for) and log
 * its note once.  Returns ELASTIC_OK, or ELASTIC_ERR_INVAL with err set
 * when the plan cannot be made. */
static int binding_prepare (struct local *l, elastic_error_t *err)
{
#if HAVE_HWLOC
    const struct elastic_agent_spec *spec = l->agent->spec;
    struct binding_opts opts;
    char msg[1024];
    const char *note;
    int nlocal;

    binding_plan_destroy (l->plan);
    l->plan = NULL;
    if (!spec_binding_wanted (spec))
        return ELASTIC_OK;
    nlocal = node_local_ranks (l);
    spec_binding_opts (spec, nlocal, l->n, &opts);
    if (!(l->plan = binding_plan_create (&opts, nlocal, err)))
        return ELASTIC_ERR_INVAL;
    note = spec_binding_note (l->plan, l->agent->w[0].local_rank, msg, sizeof (msg));
    if (note[0] && strcmp (note, l->note) != 0) {
        if (spec->binding.policy != BINDING_NONE)
            log_warn ("binding: %s", note);
        else
            log_info ("binding: %s", note);
        snprintf (l->note, sizeof (l->note), "%s", note);
    }
#else
    (void)l;
    (void)err;
#endif
    return ELASTIC_OK;
}

/* The variables the plan sets for worker i: CUDA_VISIBLE_DEVICES when the
 * plan chose it, and CUDA_DEVICE_ORDER=PCI_BUS_ID (so that CUDA numbers
 * GPUs as hwloc did) when the plan found a GPU and the variable is unset.
 * v has room for 3 pointers; cvd holds the first string. */
static void binding_env (struct local *l, int i, char **v, char *cvd, size_t cvdsz)
{
    static char order[] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
    int k = 0;
#if HAVE_HWLOC
    const struct binding_slot *s =
        l->plan ? binding_plan_slot (l->plan, l->agent->w[i].local_rank) : NULL;

    if (s && s->cuda_visible_devices[0] &&
        snprintf (cvd, cvdsz, "CUDA_VISIBLE_DEVICES=%s", s->cuda_visible_devices) <
            (int)cvdsz)
        v[k++] = cvd;
    if (s && s->gpu >= 0 && !getenv ("CUDA_DEVICE_ORDER"))
        v[k++] = order;
#else
    (void)l;
    (void)i;
    (void)cvd;
    (void)cvdsz;
    (void)order;
#endif
    v[k] = NULL;
}

/* In the child: bind as planned, or report why not (on the worker's
 * stderr and in its error file, so the failure report shows it) and exit
 * 126. */
static void binding_apply_or_exit (struct local *l, int i)
{
#if HAVE_HWLOC
    const struct worker *w = &l->agent->w[i];
    elastic_error_t e;
    char line[1100];
    int n;

    if (!l->plan || binding_apply (l->plan, w->local_rank, &e) == 0)
        return;
    n = snprintf (line, sizeof (line), "elastic-exec: %s\n", e.text);
    if (n < 0 || n >= (int)sizeof (line))
        n = (int)strlen (line);
    (void)write_all (STDERR_FILENO, line, (size_t)n);
    (void)errorfile_write (w->error_file, e.text, wall_now ());
    _exit (126);
#else
    (void)l;
    (void)i;
#endif
}

/* Log worker i's placement and put it in the event log. */
static void binding_report (struct local *l, int i, pid_t pid)
{
#if HAVE_HWLOC
    elastic_agent_t *agent = l->agent;
    const struct worker *w = &agent->w[i];
    const struct binding_slot *s =
        l->plan ? binding_plan_slot (l->plan, w->local_rank) : NULL;
    char line[2048];

    if (!s)
        return;
    if (binding_format (l->plan, w->local_rank, w->rank, line, sizeof (line)) >= 0)
        log_info ("binding: %s pid %d", line, (int)pid);
    eventlog_emit (agent->ev,
                   "worker_binding",
                   json_pack ("{s:i s:i s:i s:i s:s s:i s:b s:s s:b s:i s:s s:s}",
                              "rank",
                              w->rank,
                              "local_rank",
                              w->local_rank,
                              "pid",
                              (int)pid,
                              "attempt",
                              agent->restart_count,
                              "cpus",
                              s->cpus,
                              "ncores",
                              s->ncores,
                              "kept",
                              s->kept,
                              "numa",
                              s->mems,
                              "membind",
                              s->membind,
                              "gpu",
                              s->gpu,
                              "gpu_busid",
                              s->gpu_busid,
                              "cuda_visible_devices",
                              s->cuda_visible_devices));
#else
    (void)l;
    (void)i;
    (void)pid;
#endif
}

/* Write the function's result where the agent reads it. */
static void save_return (const char *dir, const void *buf, size_t len)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    int fd;

    if (pathfmt (path, sizeof (path), "%s/return.bin", dir) < 0 ||
        pathfmt (tmp, sizeof (tmp), "%s/.return.bin.tmp", dir) < 0)
        return;
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return;
    if (write_all (fd, buf, len) == 0 && close (fd) == 0)
        rename (tmp, path);
    else
        unlink (tmp);
}

static void __attribute__ ((noreturn))
child (struct local *l, int i, char **env, int out_fd, int err_fd, pid_t parent)
{
    elastic_agent_t *agent = l->agent;
    const struct elastic_agent_spec *spec = agent->spec;
    char *const *argv = elastic_agent_worker_argv (agent, i);

    setpgid (0, 0);
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    if (getppid () != parent)
        _exit (127); /* the agent died before we got here */
    elastic_agent_child_reset (agent);
    if (out_fd >= 0 && dup2 (out_fd, STDOUT_FILENO) < 0)
        _exit (127);
    if (err_fd >= 0 && dup2 (err_fd, STDERR_FILENO) < 0)
        _exit (127);
    binding_apply_or_exit (l, i);
    if (argv && l->wu.close_fds) {
        /* a PMIx server's accepted sockets are not close-on-exec: the
         * program gets 0, 1 and 2 only */
#ifdef SYS_close_range
        if (syscall (SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */) < 0)
#endif
            for (int fd = 3; fd < 65536; fd++)
                fcntl (fd, F_SETFD, FD_CLOEXEC);
    }
    if (argv) {
        execvpe (argv[0], argv, env);
        char msg[PATH_MAX + 128];
        int n = errfmt (msg,
                        sizeof (msg),
                        "elastic-exec: cannot run %s: %s\n",
                        argv[0],
                        strerror (errno));
        if (n < 0 || n >= (int)sizeof (msg))
            n = (int)strlen (msg);
        (void)write_all (STDERR_FILENO, msg, (size_t)n);
        _exit (127);
    }
    /* a function entrypoint: its environment is the worker's */
    for (int k = 0; k < l->n; k++) {
        if (l->lw[k].out)
            close (ostream_fd (l->lw[k].out));
        if (l->lw[k].err)
            close (ostream_fd (l->lw[k].err));
        if (l->lw[k].pidfd >= 0)
            close (l->lw[k].pidfd);
    }
    for (struct ldrain *d = l->drains; d; d = d->next) {
        if (d->out)
            close (ostream_fd (d->out));
        if (d->err)
            close (ostream_fd (d->err));
        if (d->pidfd >= 0)
            close (d->pidfd);
    }
    environ = env;
    void *ret = NULL;
    size_t retlen = 0;
    int rc = spec->fn (spec->fn_arg, &ret, &retlen);
    if (ret) {
        save_return (elastic_agent_worker_dir (agent, i), ret, retlen);
        free (ret);
    }
    fflush (NULL);
    _exit (rc & 0xff);
}

static int start_one (struct local *l, int i, elastic_error_t *err)
{
    elastic_agent_t *agent = l->agent;
    struct lworker *lw = &l->lw[i];
    struct worker *w = &agent->w[i];
    int out_fd = -1, err_fd = -1, rc = ELASTIC_ERR_IO;
    char msg[256] = "", cvd[1100], *extra[3];
    char *const *layers[3];
    char **env = NULL;
    pid_t pid;

    memset (lw, 0, sizeof (*lw));
    lw->pidfd = -1;
    if (open_stream (l, w, STD_OUT, &out_fd, &lw->out, msg, sizeof (msg)) < 0 ||
        open_stream (l, w, STD_ERR, &err_fd, &lw->err, msg, sizeof (msg)) < 0)
        goto out;
    binding_env (l, i, extra, cvd, sizeof (cvd));
    layers[0] = elastic_agent_worker_env (agent, i);
    layers[1] = l->wu.env ? l->wu.env (l->wu.arg, i) : NULL;
    layers[2] = extra;
    if (!(env = build_environ (l, layers, 3))) {
        snprintf (msg, sizeof (msg), "out of memory");
        goto out;
    }
    fflush (NULL);
    if ((pid = fork ()) < 0) {
        snprintf (msg, sizeof (msg), "fork: %s", strerror (errno));
        goto out;
    }
    if (pid == 0)
        child (l, i, env, out_fd, err_fd, l->agent_pid);
    setpgid (pid, pid);
    lw->pid = pid;
    if (l->wu.started)
        l->wu.started (l->wu.arg, i, pid);
    if (l->guard && guardian_add (l->guard, pid) < 0)
        log_warn ("guardian: %s", strerror (errno));
    lw->pidfd = (int)syscall (SYS_pidfd_open, pid, 0);
    if (lw->pidfd >= 0) {
        fcntl (lw->pidfd, F_SETFD, FD_CLOEXEC);
        if (elastic_agent_watch (agent, lw->pidfd, on_pidfd, l) != ELASTIC_OK) {
            close (lw->pidfd);
            lw->pidfd = -1;
        }
    }
    if (lw->out)
        elastic_agent_watch (agent, ostream_fd (lw->out), on_output, &lw->out);
    if (lw->err)
        elastic_agent_watch (agent, ostream_fd (lw->err), on_output, &lw->err);
    elastic_agent_worker_started (agent, i, pid);
    binding_report (l, i, pid);
    rc = ELASTIC_OK;
out:
    free (env);
    if (out_fd >= 0)
        close (out_fd);
    if (err_fd >= 0)
        close (err_fd);
    if (rc != ELASTIC_OK) {
        close_streams (l, lw);
        if (err)
            errfmt (err->text, sizeof (err->text), "starting rank %d: %s", w->rank, msg);
    }
    return rc;
}

static int
open_dup_file (struct local *l, const char *name, int *fd, elastic_error_t *err)
{
    char path[PATH_MAX];

    if (*fd >= 0)
        close (*fd);
    if (pathfmt (path, sizeof (path), "%s/%s", l->agent->attempt_dir, name) < 0 ||
        (*fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)) <
            0) {
        if (err)
            errfmt (err->text,
                    sizeof (err->text),
                    "cannot create %s: %s",
                    path,
                    strerror (errno));
        return -1;
    }
    return 0;
}

static int local_start (elastic_agent_t *agent, void *ctx, elastic_error_t *err)
{
    struct local *l = ctx;
    const struct elastic_agent_spec *spec = agent->spec;
    elastic_error_t gerr;
    int rc;

    l->agent_pid = getpid ();
    if (!l->guard) {
        if (!(l->guard = guardian_start (&gerr)))
            log_warn ("%s: worker process groups will not be cleaned up if the agent is "
                      "killed",
                      gerr.text);
        else if (agent->base_is_tmp && agent->base_dir[0])
            guardian_add_dir (l->guard, agent->base_dir); /* if the agent is killed */
    }
    if (spec->ndup_out > 0 &&
        open_dup_file (l, "filtered_stdout.log", &l->dup_out_fd, err) < 0)
        return ELASTIC_ERR_IO;
    if (spec->ndup_err > 0 &&
        open_dup_file (l, "filtered_stderr.log", &l->dup_err_fd, err) < 0)
        return ELASTIC_ERR_IO;
    if ((rc = binding_prepare (l, err)) != ELASTIC_OK)
        return rc;
    for (int i = 0; i < l->n; i++)
        if ((rc = start_one (l, i, err)) != ELASTIC_OK)
            break;
#if HAVE_HWLOC
    /* the children have their copies */
    binding_plan_destroy (l->plan);
    l->plan = NULL;
#endif
    return rc;
}

/* ---- monitor, stop, shutdown ----------------------------------------------- */

static int local_monitor (elastic_agent_t *agent, void *ctx)
{
    reap (ctx);
    drains_check (ctx);
    return ELASTIC_OK;
}

static void local_child_event (elastic_agent_t *agent, void *ctx)
{
    reap (ctx);
}

static int all_reaped (elastic_agent_t *agent, void *arg)
{
    struct local *l = arg;

    reap (l);
    drains_check (l); /* their deadlines run during any wait */
    for (int i = 0; i < l->n; i++)
        if (l->lw[i].pid > 0 && !l->lw[i].reaped)
            return 0;
    return 1;
}

static void signal_groups (struct local *l, int signum, int only_live)
{
    for (int i = 0; i < l->n; i++) {
        struct lworker *lw = &l->lw[i];
        if (lw->pid <= 0 || (only_live && lw->reaped))
            continue;
        if (kill (-lw->pid, signum) < 0 && errno == ESRCH && !lw->reaped)
            kill (lw->pid, signum);
    }
}

/* SIGKILL what is left in the workers' process groups and, as the
 * subreaper that inherits those orphans, reap them (bounded wait). */
static void sweep_groups (struct local *l)
{
    double deadline = mono_now () + 2.0;
    int left;

    signal_groups (l, SIGKILL, 0);
    if (!l->agent->spec->subreaper)
        return;
    do {
        left = 0;
        reap (l);
        for (int i = 0; i < l->n; i++)
            if (l->lw[i].pid > 0 && kill (-l->lw[i].pid, 0) == 0)
                left++;
        if (left)
            usleep (1000);
    } while (left && mono_now () < deadline);
}

static int local_stop (elastic_agent_t *agent, void *ctx, int signum, double timeout)
{
    struct local *l = ctx;
    int rc = ELASTIC_OK, detach;

    agent->stop_detached = 0;
    if (!all_reaped (agent, l)) {
        /* decided before the signal: who handles it is visible only then */
        detach = agent->stop_detach && !l->no_detach && signum > 0 &&
                 stops_promptly (l, signum);
        /* their teardown (unmapping what may be gigabytes) needs no hurry:
         * the next attempt's processes get the CPUs first */
        for (int i = 0; detach && i < l->n; i++)
            if (l->lw[i].pid > 0 && !l->lw[i].reaped)
                setpriority (PRIO_PGRP, (id_t)l->lw[i].pid, 19);
        if (signum > 0)
            signal_groups (l, signum, 1);
        if (detach) {
            agent->stop_detached = detach_live (l, timeout);
            log_debug ("%d stopped worker%s left to exit in the background",
                       agent->stop_detached,
                       agent->stop_detached == 1 ? "" : "s");
        }
        /* what was not detached (a failed worker, whose exit the core
         * still reports) is waited for */
        if (signum != SIGKILL &&
            elastic_agent_wait (agent, timeout, all_reaped, l) != ELASTIC_OK) {
            int left = 0;
            for (int i = 0; i < l->n; i++)
                if (l->lw[i].pid > 0 && !l->lw[i].reaped)
                    left++;
            log_warn ("%d worker%s still running after %.1f s: sending SIGKILL",
                      left,
                      left == 1 ? "" : "s",
                      timeout);
            eventlog_emit (agent->ev,
                           "kill",
                           json_pack ("{s:i s:f}", "workers", left, "after_s", timeout));
        }
        signal_groups (l, SIGKILL, 1);
        if (elastic_agent_wait (agent, 10.0, all_reaped, l) != ELASTIC_OK) {
            log_err ("workers did not die within 10 s of SIGKILL");
            rc = ELASTIC_ERR_STATE;
        }
    }
    /* whatever the workers left behind in their groups goes too */
    sweep_groups (l);
    for (int i = 0; i < l->n; i++) {
        struct lworker *lw = &l->lw[i];
        close_streams (l, lw);
        if (lw->pid > 0 && l->guard)
            guardian_remove (l->guard, lw->pid);
        if (lw->pidfd >= 0) {
            elastic_agent_unwatch (agent, lw->pidfd);
            close (lw->pidfd);
            lw->pidfd = -1;
        }
    }
    reap (l);
    return rc;
}

static void local_shutdown (elastic_agent_t *agent, void *ctx, int signum, double timeout)
{
    struct local *l = ctx;

    /* stops what still runs; sweeps the groups of what exited */
    local_stop (agent, ctx, signum, timeout);
    drains_finish (l);
    if (l->guard && agent->base_is_tmp && agent->base_dir[0])
        guardian_remove_dir (l->guard, agent->base_dir); /* the agent removes it */
    guardian_stop (l->guard);
    l->guard = NULL;
    if (l->dup_out_fd >= 0)
        close (l->dup_out_fd);
    if (l->dup_err_fd >= 0)
        close (l->dup_err_fd);
    l->dup_out_fd = l->dup_err_fd = -1;
}

const struct elastic_agent_backend local_backend = {
    .name = "local",
    .start_workers = local_start,
    .monitor_workers = local_monitor,
    .stop_workers = local_stop,
    .shutdown = local_shutdown,
    .child_event = local_child_event,
    .destroy = local_destroy,
};
