/* machine.c - the agent's state machine: torchelastic's SimpleElasticAgent
 *
 *   rendezvous -> assign ranks -> start -> monitor -> restart or stop
 *              -> exit barrier -> shutdown
 *
 * Each turn of the loop (agent_loop.c) records facts; a turn here acts on
 * them in a fixed order: a job abort, a handled signal (suspend on a
 * preemption signal, else stop), the watchdogs, the backend's exits, a
 * suspension, and then the state the worker records imply (group.c):
 * SUCCEEDED ends the run after the exit barrier, FAILED or UNHEALTHY goes
 * to the restart policy (on_failure), HEALTHY checks for new members.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_impl.h"
#include "common/log.h"
#include "filetimer.h"
#include "util.h"

/* Rendezvous, assign ranks, start.  Returns ELASTIC_OK or an error with err. */
static int initialize_workers (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;
    struct elastic_agent_rdzv_info info;
    double t0 = mono_now (), t1;
    int rc;

    group_set_state (agent, ELASTIC_AGENT_INIT);
    memset (&info, 0, sizeof (info));
    info.rank_base = -1;
    if ((rc = agent->rdzv->next_rendezvous (agent, agent->rdzv_ctx, &info, err)) !=
        ELASTIC_OK)
        return rc;
    if ((rc = agent_check_rdzv_info (&info, spec->nproc, err)) != ELASTIC_OK)
        return rc;
    agent->rinfo = info;
    if (info.run_id[0] && strcmp (info.run_id, agent->run_id) != 0) {
        snprintf (agent->run_id, sizeof (agent->run_id), "%s", info.run_id);
        eventlog_set_run_id (agent->ev, agent->run_id);
    }
    if ((rc = agent_set_master (agent, &info, err)) != ELASTIC_OK)
        return rc;
    t1 = mono_now ();
    eventlog_emit (agent->ev,
                   "rendezvous",
                   json_pack ("{s:s s:i s:i s:i s:i s:s s:i s:f}",
                              "backend",
                              agent->rdzv->name ? agent->rdzv->name : "custom",
                              "attempt",
                              agent->restart_count,
                              "group_rank",
                              info.group_rank,
                              "group_world_size",
                              info.group_world_size,
                              "nproc",
                              spec->nproc,
                              "master_addr",
                              agent->master_addr,
                              "master_port",
                              agent->master_port,
                              "duration_ms",
                              (t1 - t0) * 1e3));
    if (agent_setup_base_dir (agent, err) < 0 ||
        (!agent->ft && spec->file_timer && watchdog_setup (agent, err) < 0) ||
        group_prepare (agent, err) < 0)
        return ELASTIC_ERR_IO;
    agent->stopping = 0;
    if ((rc = agent->backend->start_workers (agent, agent->backend_ctx, err)) !=
        ELASTIC_OK)
        return rc;
    agent->started = 1;
    group_set_state (agent, ELASTIC_AGENT_HEALTHY);
    eventlog_emit (agent->ev,
                   "workers_started",
                   json_pack ("{s:i s:i s:f}",
                              "attempt",
                              agent->restart_count,
                              "nproc",
                              spec->nproc,
                              "duration_ms",
                              (mono_now () - t0) * 1e3));
    return ELASTIC_OK;
}

/* Stop every worker on purpose as req asks: req->signum, then SIGKILL
 * after req->timeout.  Returns how many the backend left to die in the
 * background (req->detached). */
int agent_stop_workers (elastic_agent_t *agent, struct elastic_agent_stop *req)
{
    double t0 = mono_now ();
    int alive = group_alive (agent);

    agent->stopping = 1;
    req->detached = 0;
    if (agent->backend->stop_workers (agent, agent->backend_ctx, req) != ELASTIC_OK)
        log_warn ("stopping the workers: the backend reported an error");
    eventlog_emit (agent->ev,
                   "workers_stopped",
                   json_pack ("{s:i s:s s:i s:f s:i}",
                              "attempt",
                              agent->restart_count,
                              "signal",
                              req->signum > 0 ? signal_name (req->signum) : "none",
                              "alive_before",
                              alive,
                              "duration_ms",
                              (mono_now () - t0) * 1e3,
                              "in_background",
                              req->detached));
    if (agent->ft)
        filetimer_clear (agent->ft);
    return req->detached;
}

/* Stop every worker with signum, SIGKILL after timeout (flags: none). */
void agent_stop (elastic_agent_t *agent, int signum, double timeout)
{
    struct elastic_agent_stop req = {.signum = signum, .timeout = timeout};

    agent_stop_workers (agent, &req);
}

/* The earliest failure of this attempt that failed the group (NULL if
 * none): workers lost in place only when every failure was one (their
 * peers went on; what came after decided). */
static struct worker *root_cause (elastic_agent_t *agent)
{
    struct worker *best = NULL;

    for (int pass = 0; pass < 2 && !best; pass++) {
        for (int i = 0; i < agent->nworkers; i++) {
            struct worker *w = &agent->w[i];
            if (!w->failed || (pass == 0 && w->lost))
                continue;
            if (!best || (long long)w->fail_time < (long long)best->fail_time ||
                ((long long)w->fail_time == (long long)best->fail_time &&
                 w->fail_seq < best->fail_seq))
                best = w;
        }
    }
    return best;
}

static double first_failure_mono (elastic_agent_t *agent)
{
    double t = 0;

    for (int i = 0; i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        if (w->failed && w->exit_mono > 0 && (t == 0 || w->exit_mono < t))
            t = w->exit_mono;
    }
    return t ? t : mono_now ();
}

static json_t *failures_json (elastic_agent_t *agent)
{
    json_t *a = json_array ();

    for (int i = 0; a && i < agent->nworkers; i++) {
        struct worker *w = &agent->w[i];
        if (!w->failed)
            continue;
        json_array_append_new (a,
                               json_pack ("{s:i s:i s:i s:i s:s? s:s?}",
                                          "rank",
                                          w->rank,
                                          "local_rank",
                                          w->local_rank,
                                          "pid",
                                          (int)w->pid,
                                          "exitcode",
                                          w->exited ? w->exitcode : 0,
                                          "signal",
                                          w->signum ? signal_name (w->signum) : NULL,
                                          "message",
                                          w->message));
    }
    return a;
}

static int restart_workers (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;
    struct worker *root = root_cause (agent);
    double detected = first_failure_mono (agent), t_stop, t_start;
    int rc, detached;

    log_warn ("worker group failed (rank %d: %s); restarting (%d of %d)",
              root ? root->rank : -1,
              root && root->message ? root->message : "unknown",
              agent->restart_count + 1,
              spec->max_restarts);
    eventlog_emit (agent->ev,
                   "restart",
                   json_pack ("{s:i s:i s:i s:o}",
                              "attempt",
                              agent->restart_count + 1,
                              "max_restarts",
                              spec->max_restarts,
                              "root_cause_rank",
                              root ? root->rank : -1,
                              "failures",
                              failures_json (agent)));
    /* the next attempt need not wait for the old workers' exits when it
     * cannot collide with them: its own process groups and directories
     * always, its own MASTER_PORT when the port is picked per attempt
     * (the backend decides the rest: see local.c) */
    detached = agent_stop_workers (
        agent,
        &(struct elastic_agent_stop){
            .signum = spec->stop_signal,
            .timeout = spec->shutdown_timeout,
            .flags = ELASTIC_AGENT_STOP_FAILURE |
                     (agent->port_fresh ? ELASTIC_AGENT_STOP_DETACH : 0),
        });
    group_set_state (agent, ELASTIC_AGENT_STOPPED);
    t_stop = mono_now ();
    if (agent->pending_signal) {
        /* told to stop while we were stopping: do not start again */
        log_warn ("%s received during the restart: not restarting",
                  signal_name (agent->pending_signal));
        return ELASTIC_OK;
    }
    pthread_mutex_lock (&agent->lock);
    agent->restart_count++;
    agent->remaining_restarts--;
    pthread_mutex_unlock (&agent->lock);
    rc = initialize_workers (agent, err);
    t_start = mono_now ();
    eventlog_emit (agent->ev,
                   "restarted",
                   json_pack ("{s:i s:b s:f s:f s:i}",
                              "attempt",
                              agent->restart_count,
                              "ok",
                              rc == ELASTIC_OK,
                              "stop_ms",
                              (t_stop - detected) * 1e3,
                              "failure_to_start_ms",
                              (t_start - detected) * 1e3,
                              "stopping_in_background",
                              detached));
    return rc;
}

/* Workers started exiting with ELASTIC_EXIT_SUSPENDED: let the rest follow. */
static int suspend_workers (elastic_agent_t *agent, int signum)
{
    const struct elastic_agent_spec *spec = agent->spec;
    int suspended = 0, total = agent->nworkers;

    log_warn ("%s: relaying the preemption notice to the workers; waiting up to %.1f s "
              "for them "
              "to suspend (exit %d)",
              signum > 0 ? signal_name (signum) : "a worker suspended",
              spec->shutdown_timeout,
              ELASTIC_EXIT_SUSPENDED);
    eventlog_emit (agent->ev,
                   "preempt",
                   json_pack ("{s:s s:f}",
                              "signal",
                              signum > 0 ? signal_name (signum) : "none",
                              "timeout_s",
                              spec->shutdown_timeout));
    agent_stop (agent, signum, spec->shutdown_timeout);
    for (int i = 0; i < total; i++)
        if (agent->w[i].suspended)
            suspended++;
    if (suspended == 0 && group_derive_state (agent) == ELASTIC_AGENT_SUCCEEDED) {
        /* the notice came after every worker had finished its work
         * (elastic_progress_end) and before it exited: nothing to save,
         * and the work is done */
        log_warn ("every worker had finished its work before the preemption notice: "
                  "nothing to suspend");
        eventlog_emit (
            agent->ev,
            "suspended",
            json_pack ("{s:i s:i s:b}", "suspended", 0, "workers", total, "finished", 1));
        group_set_state (agent, ELASTIC_AGENT_SUCCEEDED);
        return 0;
    }
    eventlog_emit (agent->ev,
                   "suspended",
                   json_pack ("{s:i s:i}", "suspended", suspended, "workers", total));
    if (suspended == total)
        log_info ("all %d workers suspended", total);
    else
        log_warn ("%d of %d workers suspended (exit %d); the others were stopped",
                  suspended,
                  total,
                  ELASTIC_EXIT_SUSPENDED);
    group_set_state (agent, ELASTIC_AGENT_STOPPED);
    return ELASTIC_EXIT_SUSPENDED;
}

static int any_suspended (elastic_agent_t *agent)
{
    for (int i = 0; i < agent->nworkers; i++)
        if (agent->w[i].suspended)
            return 1;
    return 0;
}

static int first_preempt_signal (const struct elastic_agent_spec *spec)
{
    if (sigismember (&spec->preempt, SIGTERM) == 1)
        return SIGTERM;
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember (&spec->preempt, sig) == 1)
            return sig;
    return 0;
}

/* The exit status a failed run reports: the root cause's. */
int agent_failure_status (elastic_agent_t *agent)
{
    struct worker *root = root_cause (agent);

    if (!root)
        return 1;
    if (root->signum > 0)
        return 128 + root->signum;
    if (root->exited && root->exitcode > 0)
        return root->exitcode & 0xff ? root->exitcode & 0xff : 1;
    return 1;
}

/* How a run ended: the agent's exit status and the group's final state. */
struct outcome {
    int status;
    int state;
};

static int ended (struct outcome *out, int status, int state)
{
    out->status = status;
    out->state = state;
    return 1;
}

/* A worker ended the job (elastic_agent_abort): kill the rest, no restart. */
static int end_aborted (elastic_agent_t *agent, struct outcome *out)
{
    agent_stop (agent, SIGKILL, 0);
    group_set_state (agent, ELASTIC_AGENT_FAILED);
    return ended (out, agent->abort_status, ELASTIC_AGENT_FAILED);
}

/* A handled signal arrived: suspend on a preemption signal, else stop. */
static int end_signalled (elastic_agent_t *agent, struct outcome *out)
{
    const struct elastic_agent_spec *spec = agent->spec;
    int sig = agent->pending_signal, status;

    eventlog_emit (agent->ev, "signal", json_pack ("{s:s}", "signal", signal_name (sig)));
    if (sigismember (&spec->preempt, sig) == 1) {
        status = suspend_workers (agent, sig);
        if (status == 0)
            return ended (out, 0, ELASTIC_AGENT_SUCCEEDED);
    } else {
        log_warn ("%s received: stopping the workers", signal_name (sig));
        agent_stop (agent, sig, spec->shutdown_timeout);
        group_set_state (agent, ELASTIC_AGENT_STOPPED);
        status = 128 + sig;
    }
    return ended (out, status, ELASTIC_AGENT_STOPPED);
}

/* What happened since the last turn (a job abort, a signal, the watchdogs,
 * the backend's exits, a suspension).  Returns 1 if the run ended. */
static int turn_events (elastic_agent_t *agent, struct outcome *out)
{
    if (agent->abort_requested)
        return end_aborted (agent, out);
    if (agent->pending_signal)
        return end_signalled (agent, out);
    watchdog_check (agent);
    if (agent->backend->monitor_workers (agent, agent->backend_ctx) != ELASTIC_OK) {
        log_err ("the backend lost track of the workers; stopping them");
        group_set_state (agent, ELASTIC_AGENT_UNKNOWN);
        agent_stop (agent, SIGKILL, 0);
        return ended (out, 1, ELASTIC_AGENT_UNKNOWN);
    }
    if (any_suspended (agent))
        return ended (out,
                      suspend_workers (agent, first_preempt_signal (agent->spec)),
                      ELASTIC_AGENT_STOPPED);
    if (agent->abort_requested)
        return end_aborted (agent, out);
    return 0;
}

/* Every worker is done: the exit barrier, then SUCCEEDED. */
static int end_succeeded (elastic_agent_t *agent, struct outcome *out)
{
    const struct elastic_agent_spec *spec = agent->spec;
    double t0 = mono_now ();

    group_set_state (agent, ELASTIC_AGENT_SUCCEEDED);
    group_summary (agent);
    if (agent->rdzv->exit_barrier &&
        agent->rdzv->exit_barrier (agent, agent->rdzv_ctx, spec->exit_barrier_timeout) !=
            ELASTIC_OK)
        log_warn ("exit barrier: the other agents did not finish within %.0f s",
                  spec->exit_barrier_timeout);
    eventlog_emit (agent->ev,
                   "exit_barrier",
                   json_pack ("{s:f}", "duration_ms", (mono_now () - t0) * 1e3));
    return ended (out, 0, ELASTIC_AGENT_SUCCEEDED);
}

/* 1 when the rendezvous has news for a running group: nodes waiting,
 * lost, or restarting elsewhere (rdzv.num_nodes_waiting). */
static int rdzv_changed (elastic_agent_t *agent)
{
    return agent->rdzv->num_nodes_waiting &&
           agent->rdzv->num_nodes_waiting (agent, agent->rdzv_ctx) > 0;
}

/* Stop the group and meet the others in the next round, spending no
 * restart.  Returns ELASTIC_OK or an error with err. */
static int membership_restart (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;

    agent_stop (agent, spec->stop_signal, spec->shutdown_timeout);
    group_set_state (agent, ELASTIC_AGENT_STOPPED);
    return initialize_workers (agent, err);
}

/* The restart policy: a failed (or unhealthy) group restarts while
 * restarts remain, else the rest is stopped and the run ends FAILED with
 * the root cause's status.  Returns 1 if the run ended. */
static int
on_failure (elastic_agent_t *agent, int state, struct outcome *out, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;

    group_set_state (agent, state);
    if (rdzv_changed (agent)) {
        /* the group changed under the workers (a node lost, another node's
         * group restarted): a membership change, not a failure of this
         * node's workers to spend a restart on */
        log_warn ("worker group failed while the rendezvous changed: restarting "
                  "without spending a restart");
        if (membership_restart (agent, err) == ELASTIC_OK)
            return 0;
        log_err ("%s", err ? err->text : "rendezvous failed");
        agent_stop (agent, SIGKILL, 0);
        group_set_state (agent, ELASTIC_AGENT_FAILED);
        return ended (out, 1, ELASTIC_AGENT_FAILED);
    }
    if (agent->remaining_restarts > 0) {
        if (restart_workers (agent, err) == ELASTIC_OK)
            return 0;
        log_err ("restart failed: %s", err ? err->text : "");
        agent_stop (agent, SIGKILL, 0);
        group_set_state (agent, ELASTIC_AGENT_FAILED);
        return ended (out, 1, ELASTIC_AGENT_FAILED);
    }
    if (group_alive (agent) > 0)
        agent_stop_workers (agent,
                            &(struct elastic_agent_stop){
                                .signum = spec->stop_signal,
                                .timeout = spec->shutdown_timeout,
                                .flags = ELASTIC_AGENT_STOP_FAILURE,
                            });
    out->status = agent_failure_status (agent);
    group_set_state (agent, ELASTIC_AGENT_FAILED);
    out->state = ELASTIC_AGENT_FAILED;
    return 1;
}

/* A healthy group whose rendezvous has new members waiting restarts
 * without spending a restart.  Returns ELASTIC_OK or an error with err. */
static int on_membership (elastic_agent_t *agent, elastic_error_t *err)
{
    if (!rdzv_changed (agent))
        return ELASTIC_OK;
    log_info ("the rendezvous changed (a node waiting, lost or restarting): restarting "
              "the worker group");
    return membership_restart (agent, err);
}

/* One turn of the loop, as long as the health server allows. */
static int wait_turn (elastic_agent_t *agent)
{
    const struct elastic_agent_spec *spec = agent->spec;
    double cap = spec->monitor_interval;

    if (agent->health && cap > spec->health_timeout / 2)
        cap = spec->health_timeout / 2;
    return agent_loop_once (agent, watchdog_next (agent, cap));
}

int agent_run_machine (elastic_agent_t *agent,
                       int *statusp,
                       int *final_state,
                       elastic_error_t *err)
{
    struct outcome out = {.status = *statusp, .state = *final_state};
    int rc, state;

    if ((rc = initialize_workers (agent, err)) != ELASTIC_OK)
        return rc;
    for (;;) {
        if (wait_turn (agent) < 0) {
            errprintf (err, "event loop: %s", strerror (errno));
            agent_stop (agent, SIGKILL, 0);
            ended (&out, 1, ELASTIC_AGENT_UNKNOWN);
            break;
        }
        if (turn_events (agent, &out))
            break;
        state = group_derive_state (agent);
        if (state == ELASTIC_AGENT_SUCCEEDED) {
            end_succeeded (agent, &out);
            break;
        }
        if (state == ELASTIC_AGENT_FAILED || state == ELASTIC_AGENT_UNHEALTHY) {
            if (on_failure (agent, state, &out, err))
                break;
            continue;
        }
        if ((rc = on_membership (agent, err)) != ELASTIC_OK)
            return rc;
    }
    *statusp = out.status;
    *final_state = out.state;
    return ELASTIC_OK;
}
