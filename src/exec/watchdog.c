/* watchdog.c - the agent's two watchdogs
 *
 * The file timer (torchelastic's protocol, filetimer.c): a worker arms a
 * deadline on a FIFO; when it passes, the worker gets the timer's signal.
 * The progress heartbeat (--hang-timeout): a worker linked with libelastic
 * reports steps into its heartbeat file; a worker that attached and then
 * reported nothing for longer than the timeout gets --hang-signal (only the
 * hung ones when several are overdue: see check_heartbeats).  Either way
 * the worker counts as failed: the group restarts, or, under the in-place
 * policy with the hosted PMIx server, the survivors recover without it.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_impl.h"
#include "common/log.h"
#include "filetimer.h"
#include "util.h"

static void on_fifo (struct loop *loop, int fd, int revents, void *arg)
{
    elastic_agent_t *agent = arg;

    if (agent->ft)
        filetimer_read (agent->ft);
}

int watchdog_setup (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;

    if (!spec->file_timer || agent->ft)
        return 0;
    if (spec->timer_file)
        snprintf (agent->timer_path, sizeof (agent->timer_path), "%s", spec->timer_file);
    else
        (void)pathfmt (agent->timer_path,
                       sizeof (agent->timer_path),
                       "%s/watchdog.fifo",
                       agent->base_dir);
    if (!(agent->ft = filetimer_create (agent->timer_path, err)))
        return -1;
    if (loop_add (agent->loop, filetimer_fd (agent->ft), on_fifo, agent) < 0) {
        errprintf (err, "file timer: %s", strerror (errno));
        filetimer_destroy (agent->ft);
        agent->ft = NULL;
        return -1;
    }
    eventlog_emit (
        agent->ev, "watchdog_start", json_pack ("{s:s}", "fifo", agent->timer_path));
    log_info ("file timer on %s", agent->timer_path);
    return 0;
}

void watchdog_teardown (elastic_agent_t *agent)
{
    if (agent->ft) {
        loop_remove (agent->loop, filetimer_fd (agent->ft));
        filetimer_destroy (agent->ft);
        agent->ft = NULL;
    }
}

static int check_timers (elastic_agent_t *agent)
{
    struct filetimer_expired ex[16];
    int n, fired = 0;

    if (!agent->ft || filetimer_count (agent->ft) == 0)
        return 0;
    n = filetimer_expire (agent->ft, wall_now (), ex, 16);
    for (int i = 0; i < n; i++) {
        struct worker *w = agent_worker_by_pid (agent, ex[i].pid);
        char reason[256];
        if (!w) {
            log_warn ("file timer: scope '%s' of pid %d expired, but that pid is not a "
                      "worker of "
                      "this agent; ignored",
                      ex[i].scope,
                      (int)ex[i].pid);
            continue;
        }
        snprintf (reason,
                  sizeof (reason),
                  "watchdog: file timer '%s' expired %.3f s ago; sent %s to pid %d",
                  ex[i].scope,
                  wall_now () - ex[i].expiration,
                  signal_name (ex[i].signum),
                  (int)ex[i].pid);
        agent_watchdog_fire (
            agent,
            w,
            ex[i].pid,
            ex[i].signum,
            "file_timer",
            reason,
            json_pack (
                "{s:s s:f}", "scope", ex[i].scope, "expiration_time", ex[i].expiration));
        fired++;
    }
    return fired;
}

/* The scheduler state of pid from /proc/PID/stat ('R', 'S', 'T', ...), or
 * 0 if it cannot be read. */
static char proc_state (pid_t pid)
{
    char path[64], buf[512], *p;
    ssize_t n;
    int fd;

    snprintf (path, sizeof (path), "/proc/%d/stat", (int)pid);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "PID (COMM) S ...": COMM may hold spaces and parentheses */
    if (!(p = strrchr (buf, ')')) || p[1] != ' ')
        return 0;
    return p[2];
}

/* What the heartbeat watchdog knows of one worker at one check. */
struct hang {
    struct worker *w;
    pid_t target;  /* the reporting process, if it is in the worker's group */
    double idle_s; /* since its last report (or its start, or its grace) */
    int64_t step;
    uint64_t updated_ns;
    int stopped; /* SIGSTOPped (or stopped by a tracer) */
};

/* 1 if a was hung before b: lower step, then older report. */
static int hung_first (const struct hang *a, const struct hang *b)
{
    if (a->step != b->step)
        return a->step < b->step;
    return a->updated_ns < b->updated_ns;
}

static void hang_fire (elastic_agent_t *agent, const struct hang *h, const char *why)
{
    const struct elastic_agent_spec *spec = agent->spec;
    char reason[384];

    snprintf (reason,
              sizeof (reason),
              "watchdog: no progress for %.1f s (hang-timeout %.1f s) after step %lld%s; "
              "sent %s",
              h->idle_s,
              spec->hang_timeout,
              (long long)h->step,
              why,
              signal_name (spec->hang_signal));
    agent_watchdog_fire (agent,
                         h->w,
                         h->target,
                         spec->hang_signal,
                         "hang",
                         reason,
                         json_pack ("{s:I s:f s:b}",
                                    "step",
                                    (json_int_t)h->step,
                                    "idle_s",
                                    h->idle_s,
                                    "stopped",
                                    h->stopped));
    /* a stopped process acts on no signal but SIGKILL until it runs */
    if (h->stopped && spec->hang_signal != SIGKILL)
        kill (h->target, SIGCONT);
}

/* --hang-timeout.  In an MPI job one hung rank stops every other rank too
 * (they wait for it in their next exchange), so all of them may be over
 * the timeout at one check, and killing them all would leave nothing to
 * recover in place.  Only the hung ones are killed: every overdue worker
 * that is stopped (its process state, exact for SIGSTOP), else the single
 * one that stopped reporting first (the lowest step, then the oldest
 * report: the peers of a rank that hangs inside a step get at least as far
 * as that step).  The others get a fresh timeout to recover in, from now,
 * before they are judged again. */
static int check_heartbeats (elastic_agent_t *agent)
{
    const struct elastic_agent_spec *spec = agent->spec;
    uint64_t now = mono_ns ();
    struct hang *over;
    int nover = 0, nstopped = 0, first = -1, fired = 0;

    if (spec->hang_timeout <= 0 || agent->nworkers <= 0)
        return 0;
    if (!(over = calloc ((size_t)agent->nworkers, sizeof (*over))))
        return 0; /* judged at the next check */
    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        struct elastic_heartbeat *hb = w->hb;
        uint64_t start_ns, upd, ref;
        struct hang *h = &over[nover];

        if (!hb || w->pid <= 0 || w->exited || w->failed)
            continue;
        if (__atomic_load_n (&hb->magic, __ATOMIC_ACQUIRE) != ELASTIC_HEARTBEAT_MAGIC)
            continue; /* not linked with libelastic (or not yet): nothing to judge */
        upd = __atomic_load_n (&hb->updated_ns, __ATOMIC_ACQUIRE);
        start_ns = (uint64_t)(w->start_mono * 1e9);
        ref = upd > start_ns ? upd : start_ns;
        if (w->hang_grace_ns > ref)
            ref = w->hang_grace_ns;
        if (now < ref || (double)(now - ref) * 1e-9 <= spec->hang_timeout)
            continue;
        h->w = w;
        h->idle_s = (double)(now - ref) * 1e-9;
        h->step = __atomic_load_n (&hb->step, __ATOMIC_RELAXED);
        h->updated_ns = upd;
        /* signal the reporting process if it is in the worker's group */
        h->target = (pid_t)__atomic_load_n (&hb->pid, __ATOMIC_RELAXED);
        if (h->target <= 0 || (h->target != w->pid && getpgid (h->target) != w->pid))
            h->target = w->pid;
        {
            char st = proc_state (h->target);
            h->stopped = st == 'T' || st == 't';
        }
        nstopped += h->stopped;
        if (first < 0 || hung_first (h, &over[first]))
            first = nover;
        nover++;
    }
    if (nover == 0) {
        free (over);
        return 0;
    }
    for (int k = 0; k < nover; k++) {
        if (nstopped > 0 ? over[k].stopped : k == first) {
            hang_fire (agent,
                       &over[k],
                       over[k].stopped ? " (the process is stopped)"
                       : nover > 1     ? " (the first of the overdue ranks to stop)"
                                       : "");
            fired++;
        }
    }
    if (nover > fired)
        log_info ("watchdog: %d other rank%s overdue, given a fresh %.1f s to recover",
                  nover - fired,
                  nover - fired == 1 ? "" : "s",
                  spec->hang_timeout);
    /* everyone not killed starts a fresh timeout */
    for (int i = 0; i < agent->nworkers; i++)
        if (!agent->w[i].failed)
            agent->w[i].hang_grace_ns = now;
    free (over);
    return fired;
}

int watchdog_check (elastic_agent_t *agent)
{
    return check_timers (agent) + check_heartbeats (agent);
}

double watchdog_next (elastic_agent_t *agent, double cap)
{
    double t = cap, next;

    if (agent->ft && (next = filetimer_next (agent->ft)) > 0) {
        double in = next - wall_now ();
        if (in < 0)
            in = 0;
        if (in < t)
            t = in;
    }
    return t;
}
