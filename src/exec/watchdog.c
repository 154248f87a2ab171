/* watchdog.c - the agent's two watchdogs
 *
 * The file timer (torchelastic's protocol, filetimer.c): a worker arms a
 * deadline on a FIFO; when it passes, the worker gets the timer's signal.
 * The progress heartbeat (--hang-timeout): a worker linked with libelastic
 * reports steps into its heartbeat file; a worker that attached and then
 * reported nothing for longer than the timeout gets --hang-signal (only the
 * hung ones when several are overdue: see check_heartbeats).  A worker that
 * has not attached yet is judged only by evidence: when attached peers are
 * overdue, it is the first suspect (it never reported); when its process
 * is seen stopped for longer than --start-timeout, it is hung (see
 * check_unattached_stopped); the hosted PMIx server times MPI_Init with
 * the same timeout (pmix_backend.c).  Either way
 * the worker counts as failed: the group restarts, or, under the in-place
 * policy with the hosted PMIx server, the survivors recover without it.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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

/* What the heartbeat watchdog knows of one worker at one check. */
struct hang {
    struct worker *w;
    pid_t target;  /* the reporting process, if it is in the worker's group */
    double idle_s; /* since its last report (or its start, or its grace) */
    int64_t step;  /* -1: it never reported (not attached) */
    uint64_t updated_ns;
    int attached; /* its heartbeat is libelastic's */
    int stopped;  /* SIGSTOPped (or stopped by a tracer) */
};

/* 1 if a was hung before b: lower step (one that never reported first),
 * then older report. */
static int hung_first (const struct hang *a, const struct hang *b)
{
    if (a->step != b->step)
        return a->step < b->step;
    return a->updated_ns < b->updated_ns;
}

static void hang_signal_worker (elastic_agent_t *agent,
                                struct worker *w,
                                pid_t target,
                                int stopped,
                                const char *kind,
                                const char *reason,
                                json_t *fields)
{
    const struct elastic_agent_spec *spec = agent->spec;

    agent_watchdog_fire (agent, w, target, spec->hang_signal, kind, reason, fields);
    /* a stopped process acts on no signal but SIGKILL until it runs */
    if (stopped && spec->hang_signal != SIGKILL)
        kill (target, SIGCONT);
}

static void hang_fire (elastic_agent_t *agent, const struct hang *h, const char *why)
{
    const struct elastic_agent_spec *spec = agent->spec;
    char reason[384], after[64];

    if (h->attached)
        snprintf (after, sizeof (after), "after step %lld", (long long)h->step);
    else
        snprintf (after, sizeof (after), "before its first progress report");
    snprintf (reason,
              sizeof (reason),
              "watchdog: no progress for %.1f s (hang-timeout %.1f s) %s%s; sent %s",
              h->idle_s,
              spec->hang_timeout,
              after,
              why,
              signal_name (spec->hang_signal));
    hang_signal_worker (agent,
                        h->w,
                        h->target,
                        h->stopped,
                        "hang",
                        reason,
                        json_pack ("{s:I s:f s:b s:b}",
                                   "step",
                                   (json_int_t)h->step,
                                   "idle_s",
                                   h->idle_s,
                                   "stopped",
                                   h->stopped,
                                   "attached",
                                   h->attached));
}

static int worker_judged (const struct worker *w)
{
    return w->hb && w->pid > 0 && !w->exited && !w->failed;
}

static int worker_attached (const struct worker *w)
{
    return __atomic_load_n (&w->hb->magic, __ATOMIC_ACQUIRE) == ELASTIC_HEARTBEAT_MAGIC;
}

/* The time the hang timeout of w runs from without a report: its start,
 * or the fresh timeout it was given. */
static uint64_t worker_ref_ns (const struct worker *w, uint64_t upd)
{
    uint64_t ref = (uint64_t)(w->start_mono * 1e9);

    if (upd > ref)
        ref = upd;
    if (w->hang_grace_ns > ref)
        ref = w->hang_grace_ns;
    return ref;
}

/* Fill h for w if it is over the hang timeout at now (an attached worker,
 * or, `unattached`, one that never reported).  Returns 1 if it is. */
static int
hang_over (elastic_agent_t *agent, struct worker *w, uint64_t now, struct hang *h)
{
    struct elastic_heartbeat *hb = w->hb;
    int attached = worker_attached (w);
    uint64_t upd = attached ? __atomic_load_n (&hb->updated_ns, __ATOMIC_ACQUIRE) : 0;
    uint64_t ref = worker_ref_ns (w, upd);

    if (now < ref || (double)(now - ref) * 1e-9 <= agent->spec->hang_timeout)
        return 0;
    memset (h, 0, sizeof (*h));
    h->w = w;
    h->attached = attached;
    h->idle_s = (double)(now - ref) * 1e-9;
    h->step = attached ? __atomic_load_n (&hb->step, __ATOMIC_RELAXED) : -1;
    h->updated_ns = upd;
    /* signal the reporting process if it is in the worker's group */
    h->target = attached ? (pid_t)__atomic_load_n (&hb->pid, __ATOMIC_RELAXED) : 0;
    if (h->target <= 0 || (h->target != w->pid && getpgid (h->target) != w->pid))
        h->target = w->pid;
    h->stopped = proc_stopped (h->target);
    return 1;
}

/* --start-timeout: a worker that has not attached (before its first
 * progress report, or not linked with libelastic) is judged by its
 * process state alone: one seen stopped for longer than the start timeout
 * is hung (a SIGSTOP or a tracer before libelastic's first report, or in
 * MPI_Init, where its peers wait for it).  One that runs is never judged
 * here: a program without libelastic may be quiet as long as it likes. */
static int check_unattached_stopped (elastic_agent_t *agent, uint64_t now)
{
    const struct elastic_agent_spec *spec = agent->spec;
    int fired = 0;

    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        double stopped_s;
        char reason[384];

        if (!worker_judged (w) || worker_attached (w)) {
            w->stopped_ns = 0;
            continue;
        }
        if (!proc_stopped (w->pid)) {
            w->stopped_ns = 0;
            continue;
        }
        if (!w->stopped_ns)
            w->stopped_ns = now;
        stopped_s = (double)(now - w->stopped_ns) * 1e-9;
        if (spec->start_timeout <= 0 || stopped_s <= spec->start_timeout)
            continue;
        snprintf (reason,
                  sizeof (reason),
                  "watchdog: stopped for %.1f s before its first progress report "
                  "(start-timeout %.1f s, %.1f s after its start); sent %s",
                  stopped_s,
                  spec->start_timeout,
                  mono_now () - w->start_mono,
                  signal_name (spec->hang_signal));
        hang_signal_worker (
            agent,
            w,
            w->pid,
            1,
            "start",
            reason,
            json_pack (
                "{s:f s:b s:b}", "stopped_s", stopped_s, "stopped", 1, "attached", 0));
        fired++;
    }
    return fired;
}

/* The workers over the hang timeout into over: the attached ones, and,
 * when some of those are (the group is stuck) and some worker attached at
 * all (so every worker runs libelastic), the ones that never reported.
 * Returns how many, and the index of the one that hung first in *first
 * and the number stopped in *nstopped. */
static int collect_overdue (
    elastic_agent_t *agent, uint64_t now, struct hang *over, int *first, int *nstopped)
{
    int nover = 0;

    *first = -1;
    *nstopped = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && nover == 0)
            break;
        for (int i = 0; i < agent->nworkers; i++) {
            struct worker *w = &agent->w[i];
            struct hang *h = &over[nover];

            if (!worker_judged (w) || worker_attached (w) != (pass == 0))
                continue;
            if (!hang_over (agent, w, now, h))
                continue;
            *nstopped += h->stopped;
            if (*first < 0 || hung_first (h, &over[*first]))
                *first = nover;
            nover++;
        }
    }
    return nover;
}

/* --hang-timeout.  In an MPI job one hung rank stops every other rank too
 * (they wait for it in their next exchange), so all of them may be over
 * the timeout at one check, and killing them all would leave nothing to
 * recover in place.  Only the hung ones are killed: every overdue worker
 * that is stopped (its process state, exact for SIGSTOP), else the single
 * one that stopped reporting first (one that never reported, then the
 * lowest step, then the oldest report: the peers of a rank that hangs
 * inside a step get at least as far as that step).  The others get a
 * fresh timeout to recover in, from now, before they are judged again. */
static int check_heartbeats (elastic_agent_t *agent)
{
    const struct elastic_agent_spec *spec = agent->spec;
    uint64_t now = mono_ns ();
    struct hang *over;
    int nover, nstopped, first, fired = 0;

    if (spec->hang_timeout <= 0 || agent->nworkers <= 0)
        return 0;
    fired = check_unattached_stopped (agent, now);
    if (!(over = calloc ((size_t)agent->nworkers, sizeof (*over))))
        return fired; /* judged at the next check */
    nover = collect_overdue (agent, now, over, &first, &nstopped);
    if (nover == 0) {
        free (over);
        return fired;
    }
    for (int k = 0; k < nover; k++) {
        if (over[k].w->failed || !(nstopped > 0 ? over[k].stopped : k == first))
            continue;
        hang_fire (agent,
                   &over[k],
                   over[k].stopped ? " (the process is stopped)"
                   : nover > 1     ? " (the first of the overdue ranks to stop)"
                                   : "");
        fired++;
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

/* A SIGKILLed process ends within milliseconds unless a thread of it
 * cannot be woken (uninterruptible sleep).  t5015 once saw every rank the
 * watchdog SIGKILLed live on until the group's SIGKILL 30 s later (#18,
 * not reproduced since): a victim still there KILL_STUCK_S after the
 * watchdog's signal is reported once, with what each of its threads is
 * doing, and where the signal was SIGKILL its whole process group gets
 * SIGKILL too (a process the signal missed, or a child it waits for). */
#define KILL_STUCK_S 5.0

static void check_victims (elastic_agent_t *agent)
{
    double now = mono_now ();

    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        char threads[1024];

        if (w->fire_mono <= 0 || w->fire_stuck || w->exited || w->pid <= 0 ||
            now - w->fire_mono < KILL_STUCK_S)
            continue;
        w->fire_stuck = 1;
        proc_threads_describe (w->fire_pid, threads, sizeof (threads));
        log_warn ("rank %d: pid %d still there %.1f s after the watchdog's %s "
                  "(threads: %s)%s",
                  w->rank,
                  (int)w->fire_pid,
                  now - w->fire_mono,
                  signal_name (w->fire_signum),
                  threads,
                  w->fire_signum == SIGKILL ? "; sending SIGKILL to its process group"
                                            : "");
        json_t *o = json_pack ("{s:i s:i s:i s:s s:f s:s}",
                               "rank",
                               w->rank,
                               "pid",
                               (int)w->pid,
                               "target_pid",
                               (int)w->fire_pid,
                               "signal",
                               signal_name (w->fire_signum),
                               "after_s",
                               now - w->fire_mono,
                               "threads",
                               threads);
        eventlog_emit (agent->ev, "watchdog_victim_alive", o);
        if (w->fire_signum == SIGKILL)
            kill (-w->pid, SIGKILL);
    }
}

int watchdog_check (elastic_agent_t *agent)
{
    check_victims (agent);
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
