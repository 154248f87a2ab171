/* watchdog.c - the agent's two watchdogs
 *
 * The file timer (torchelastic's protocol, filetimer.c): a worker arms a
 * deadline on a FIFO; when it passes, the worker gets the timer's signal.
 * The progress heartbeat (--hang-timeout): a worker linked with libelastic
 * reports steps into its heartbeat file; a worker that attached and then
 * reported nothing for longer than the timeout gets --hang-signal.
 * Either way the worker counts as failed and the group restarts.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
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

int watchdog_setup (elastic_agent_t *agent, char *err, size_t errsz)
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
    if (!(agent->ft = filetimer_create (agent->timer_path, err, errsz)))
        return -1;
    if (loop_add (agent->loop, filetimer_fd (agent->ft), on_fifo, agent) < 0) {
        snprintf (err, errsz, "file timer: %s", strerror (errno));
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

static int check_heartbeats (elastic_agent_t *agent)
{
    const struct elastic_agent_spec *spec = agent->spec;
    uint64_t now = mono_ns ();
    int fired = 0;

    if (spec->hang_timeout <= 0)
        return 0;
    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        struct elastic_heartbeat *hb = w->hb;
        uint64_t start_ns, upd, ref;
        char reason[256];
        pid_t target;

        if (!hb || w->pid <= 0 || w->exited || w->failed)
            continue;
        if (__atomic_load_n (&hb->magic, __ATOMIC_ACQUIRE) != ELASTIC_HEARTBEAT_MAGIC)
            continue; /* not linked with libelastic (or not yet): nothing to judge */
        upd = __atomic_load_n (&hb->updated_ns, __ATOMIC_ACQUIRE);
        start_ns = (uint64_t)(w->start_mono * 1e9);
        ref = upd > start_ns ? upd : start_ns;
        if (now < ref || (double)(now - ref) * 1e-9 <= spec->hang_timeout)
            continue;
        /* signal the reporting process if it is in the worker's group */
        target = (pid_t)__atomic_load_n (&hb->pid, __ATOMIC_RELAXED);
        if (target <= 0 || (target != w->pid && getpgid (target) != w->pid))
            target = w->pid;
        snprintf (reason,
                  sizeof (reason),
                  "watchdog: no progress for %.1f s (hang-timeout %.1f s) after step "
                  "%lld; sent %s",
                  (double)(now - ref) * 1e-9,
                  spec->hang_timeout,
                  (long long)__atomic_load_n (&hb->step, __ATOMIC_RELAXED),
                  signal_name (spec->hang_signal));
        agent_watchdog_fire (
            agent,
            w,
            target,
            spec->hang_signal,
            "hang",
            reason,
            json_pack ("{s:I s:f}",
                       "step",
                       (json_int_t)__atomic_load_n (&hb->step, __ATOMIC_RELAXED),
                       "idle_s",
                       (double)(now - ref) * 1e-9));
        fired++;
    }
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
