/* drain.c - workers of an earlier attempt, stopped in the background
 *
 * Stopping for a restart (ELASTIC_AGENT_STOP_DETACH) need not wait: when
 * the stop signal is sure to end every survivor without running its code
 * (its default action, neither caught, ignored nor blocked, as in a Python
 * worker that installs no handler; or SIGKILL), local.c moves the
 * survivors here (drain_detach_live) and the next attempt starts at once,
 * while the kernel tears the old processes down.  A drained worker that is
 * still alive at its deadline gets SIGKILL, each drained group is swept
 * and stays with the guardian until it is empty, and the backend's
 * shutdown waits for the drain list (drain_finish).  See local.c.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "eventlog.h"
#include "guardian.h"
#include "local_impl.h"
#include "output.h"
#include "util.h"

static void drain_close_stream (struct local *l, struct ostream **sp)
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
int drain_stops_promptly (struct local *l, int signum)
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
int drain_detach_live (struct local *l, double timeout)
{
    elastic_agent_t *agent = l->agent;
    double now = mono_now ();
    int moved = 0;

    for (int i = 0; i < l->n; i++) {
        struct lworker *lw = &l->lw[i];
        struct ldrain *d;
        const struct worker *w = agent_worker (agent, i);
        if (lw->pid <= 0 || lw->reaped || w->failed || !(d = calloc (1, sizeof (*d))))
            continue;
        d->l = l;
        d->pid = lw->pid;
        d->index = i;
        d->pidfd = lw->pidfd; /* stays watched: on_pidfd reaps drains too */
        d->rank = w->rank;
        d->local_rank = w->local_rank;
        d->attempt = agent_attempt (agent);
        d->t_signal = now;
        d->deadline = now + timeout;
        if (lw->out) {
            elastic_agent_unwatch (agent, ostream_fd (lw->out));
            d->out = lw->out;
            elastic_agent_watch (agent, ostream_fd (d->out), local_on_output, &d->out);
        }
        if (lw->err) {
            elastic_agent_unwatch (agent, ostream_fd (lw->err));
            d->err = lw->err;
            elastic_agent_watch (agent, ostream_fd (d->err), local_on_output, &d->err);
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
        local_on_output (l->agent, ostream_fd (d->out), 0, &d->out);
    if (d->err)
        local_on_output (l->agent, ostream_fd (d->err), 0, &d->err);
    drain_close_stream (l, &d->out);
    drain_close_stream (l, &d->err);
    kill (-d->pid, SIGKILL); /* whatever else is left in its group */
    if (l->wu.drained)
        l->wu.drained (l->wu.arg, d->index, status);
    eventlog_emit (agent_eventlog (l->agent),
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

int drain_reaped_pid (struct local *l, pid_t pid, int status)
{
    for (struct ldrain *d = l->drains; d; d = d->next) {
        if (d->pid == pid && !d->reaped) {
            drain_done (l, d, status);
            return 1;
        }
    }
    return 0;
}

void drain_reap (struct local *l)
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

void drain_free (struct local *l, struct ldrain *d)
{
    if (d->pidfd >= 0) {
        elastic_agent_unwatch (l->agent, d->pidfd);
        close (d->pidfd);
    }
    drain_close_stream (l, &d->out);
    drain_close_stream (l, &d->err);
    if (l->guard)
        guardian_remove (l->guard, d->pid);
    free (d);
}

/* SIGKILL drained workers past their deadline; forget those whose group is
 * empty (or that were swept 2 s ago: its orphans are ours to reap). */
void drain_check (struct local *l)
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
            eventlog_emit (agent_eventlog (l->agent),
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

    local_reap (l);
    drain_check (l);
    return l->drains == NULL;
}

/* Wait for the drain list: each drained worker until its deadline, then
 * SIGKILL (at once when the agent was told to hurry). */
void drain_finish (struct local *l)
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
