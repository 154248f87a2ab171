/* agent.c - the agent core: create, configure, run, and the views
 *
 * The core is torchelastic's SimpleElasticAgent over a backend and a
 * rendezvous module, both tables of function pointers: the state machine
 * is in machine.c, the events (signals, the loop) in agent_loop.c, what an
 * attempt needs before it starts in agent_setup.c, the worker records in
 * group.c.  The core names no backend: elastic_agent_create picks one from
 * the built-in table (backends.c) by the spec's wireup, and a backend
 * reaches the core through <elastic/agent.h> and agent_backend.h only.
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
#include "health.h"
#include "util.h"

const char *elastic_agent_state_name (int state)
{
    static const char *names[] = {
        "UNKNOWN", "INIT", "HEALTHY", "UNHEALTHY", "STOPPED", "SUCCEEDED", "FAILED"};

    if (state < 0 || state > ELASTIC_AGENT_FAILED)
        return "UNKNOWN";
    return names[state];
}

/* ---- the static rendezvous ------------------------------------------------ */

static int static_next (elastic_agent_t *agent,
                        void *ctx,
                        struct elastic_agent_rdzv_info *info,
                        elastic_error_t *err)
{
    *info = agent->static_info;
    return ELASTIC_OK;
}

static const struct elastic_agent_rdzv static_rdzv = {
    .name = "static",
    .next_rendezvous = static_next,
};

/* ---- create / destroy ------------------------------------------------------ */

elastic_agent_t *elastic_agent_create (const elastic_agent_spec_t *spec,
                                       elastic_error_t *err)
{
    struct elastic_agent *agent;

    if (!spec) {
        errprintf (err, "elastic_agent_create: NULL spec");
        return NULL;
    }
    if (!spec->argv && !spec->fn && !(spec->hosting && spec->nproc == 0)) {
        errprintf (err, "no entrypoint: give the program to run and its arguments");
        return NULL;
    }
    if (spec_check (spec, err) < 0)
        return NULL;
    log_init_from_env ("elastic-agent", "ELASTIC_LOG");
    if (!(agent = calloc (1, sizeof (*agent))))
        goto nomem;
    agent->spec = spec;
    agent->sigfd = agent->wakefd = -1;
    agent->master_port = -1;
    agent->health_port = -1;
    agent->last_fail_rank = -1;
    pthread_mutex_init (&agent->lock, NULL);
    agent->rdzv = &static_rdzv;
    agent->static_info.group_rank = 0;
    agent->static_info.group_world_size = 1;
    agent->static_info.rank_base = -1;
    agent->nworkers = agent->wcap = spec->nproc;
    if (!(agent->w = calloc ((size_t)spec->nproc, sizeof (*agent->w))))
        goto nomem;
    if (!(agent->loop = loop_create ()))
        goto nomem;
    if (agent_backend_load (agent,
                            spec_wireup (spec) == WIREUP_PMIX ? "pmix" : "local",
                            err) != ELASTIC_OK) {
        elastic_agent_destroy (agent);
        return NULL;
    }
    return agent;
nomem:
    errprintf (err, "out of memory");
    elastic_agent_destroy (agent);
    return NULL;
}

void elastic_agent_destroy (elastic_agent_t *agent)
{
    int saved = errno;

    if (agent) {
        group_release (agent);
        if (agent->backend && agent->backend->destroy)
            agent->backend->destroy (agent->backend_ctx);
        if (agent->rdzv && agent->rdzv->destroy)
            agent->rdzv->destroy (agent->rdzv_ctx);
        agent_watches_free (agent);
        loop_destroy (agent->loop);
        free (agent->w);
        pthread_mutex_destroy (&agent->lock);
        free (agent);
    }
    errno = saved;
}

int elastic_agent_set_failure_note (elastic_agent_t *agent, const char *line)
{
    if (!agent)
        return ELASTIC_ERR_INVAL;
    if (agent->running)
        return ELASTIC_ERR_STATE;
    snprintf (agent->failure_note, sizeof (agent->failure_note), "%s", line ? line : "");
    return ELASTIC_OK;
}

int agent_backend_check (const struct elastic_agent_backend *ops, elastic_error_t *err)
{
    if (ops->abi != ELASTIC_AGENT_BACKEND_ABI)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "backend '%s': ABI %u is not one this agent knows (%d): build "
                         "it against this <elastic/agent.h>",
                         ops->name ? ops->name : "custom",
                         ops->abi,
                         ELASTIC_AGENT_BACKEND_ABI);
    return ELASTIC_OK;
}

int elastic_agent_set_backend (elastic_agent_t *agent,
                               const struct elastic_agent_backend *ops,
                               void *ctx)
{
    elastic_error_t e;
    int rc;

    if (!agent || !ops || !ops->start_workers || !ops->monitor_workers ||
        !ops->stop_workers)
        return ELASTIC_ERR_INVAL;
    if ((rc = agent_backend_check (ops, &e)) != ELASTIC_OK) {
        log_err ("%s", e.text);
        return rc;
    }
    if (agent->running)
        return ELASTIC_ERR_STATE;
    if (agent->backend && agent->backend->destroy)
        agent->backend->destroy (agent->backend_ctx);
    agent->backend = ops;
    agent->backend_ctx = ctx;
    return ELASTIC_OK;
}

int elastic_agent_set_rendezvous (elastic_agent_t *agent,
                                  const struct elastic_agent_rdzv *ops,
                                  void *ctx)
{
    if (!agent || !ops || !ops->next_rendezvous)
        return ELASTIC_ERR_INVAL;
    if (agent->running)
        return ELASTIC_ERR_STATE;
    if (agent->rdzv && agent->rdzv->destroy)
        agent->rdzv->destroy (agent->rdzv_ctx);
    agent->rdzv = ops;
    agent->rdzv_ctx = ctx;
    return ELASTIC_OK;
}

int elastic_agent_set_static_rendezvous (elastic_agent_t *agent,
                                         const struct elastic_agent_rdzv_info *info,
                                         elastic_error_t *err)
{
    int rc;

    if (!agent || !info) {
        return errcodef (
            err, ELASTIC_ERR_INVAL, "elastic_agent_set_static_rendezvous: NULL argument");
    }
    if ((rc = agent_check_rdzv_info (info, agent->spec->nproc, err)) != ELASTIC_OK)
        return rc;
    if ((rc = elastic_agent_set_rendezvous (agent, &static_rdzv, NULL)) != ELASTIC_OK)
        return rc;
    agent->static_info = *info;
    return ELASTIC_OK;
}

/* ---- run -------------------------------------------------------------------- */

/* The agent_start event: what this run was asked to do. */
static void emit_agent_start (elastic_agent_t *agent)
{
    const struct elastic_agent_spec *spec = agent->spec;
    char handled[256], preempt[256];
    json_t *argv = json_array ();

    signal_list_format (&spec->handled, handled, sizeof (handled));
    signal_list_format (&spec->preempt, preempt, sizeof (preempt));
    for (int i = 0; argv && spec->argv && i < spec->argc; i++)
        json_array_append_new (argv, json_string (spec->argv[i]));
    eventlog_emit (agent->ev,
                   "agent_start",
                   json_pack ("{s:o s:i s:i s:f s:f s:s s:s s:i s:s s:b s:f s:s s:s s:s}",
                              "entrypoint",
                              argv ? argv : json_null (),
                              "nproc",
                              spec->nproc,
                              "max_restarts",
                              spec->max_restarts,
                              "monitor_interval_s",
                              spec->monitor_interval,
                              "shutdown_timeout_s",
                              spec->shutdown_timeout,
                              "signals_to_handle",
                              handled,
                              "preempt_signals",
                              preempt,
                              "health_port",
                              agent->health_port,
                              "rendezvous",
                              agent->rdzv->name ? agent->rdzv->name : "custom",
                              "file_timer",
                              spec->file_timer,
                              "hang_timeout_s",
                              spec->hang_timeout,
                              "backend",
                              agent->backend->name ? agent->backend->name : "custom",
                              "wireup",
                              spec_wireup_name (spec_wireup (spec)),
                              "restart_policy",
                              spec_restart_policy_name (spec_restart_policy (spec))));
}

/* Open what a run needs before the workers: the event log, the signals,
 * the health server.  Returns ELASTIC_OK or an error with err. */
static int run_begin (elastic_agent_t *agent, elastic_error_t *err)
{
    const struct elastic_agent_spec *spec = agent->spec;

    agent->running = 1;
    agent->ran = 1;
    agent->start_wall = wall_now ();
    agent->start_mono = mono_now ();
    agent->remaining_restarts = spec->max_restarts;
    agent->health_reported = 1;
    __atomic_store_n (&agent->tick_ns, mono_ns (), __ATOMIC_RELEASE);
    if (spec->run_id)
        snprintf (agent->run_id, sizeof (agent->run_id), "%s", spec->run_id);
    else
        agent_make_run_id (agent->run_id, sizeof (agent->run_id));

    if (spec->event_log &&
        !(agent->ev = eventlog_open (spec->event_log, agent->run_id, spec->role)))
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "event-log: cannot open %s: %s",
                         spec->event_log,
                         strerror (errno));
    if (agent_signals_setup (agent, err) < 0)
        return ELASTIC_ERR_IO;
    if (spec->health_port >= 0) {
        if (!(agent->health =
                  health_start (agent, spec->health_addr, spec->health_port, err)))
            return ELASTIC_ERR_INVAL;
        agent->health_port = health_port (agent->health);
    }
    emit_agent_start (agent);
    if (agent->health_port >= 0)
        log_info ("health server on %s:%d", spec->health_addr, agent->health_port);
    return ELASTIC_OK;
}

/* Shut the backend down and close what run_begin opened. */
static void run_end (elastic_agent_t *agent, int rc, int status, int final_state)
{
    if (agent->backend->shutdown)
        agent->backend->shutdown (agent, agent->backend_ctx, SIGKILL, 0);
    eventlog_emit (agent->ev,
                   "shutdown",
                   json_pack ("{s:s s:i s:i s:f}",
                              "state",
                              elastic_agent_state_name (final_state),
                              "exit_status",
                              rc == ELASTIC_OK ? status : -1,
                              "restarts",
                              agent->restart_count,
                              "duration_s",
                              mono_now () - agent->start_mono));
    health_stop (agent->health);
    agent->health = NULL;
    watchdog_teardown (agent);
    agent_signals_restore (agent);
    if (agent->base_is_tmp && agent->base_dir[0]) {
        pthread_mutex_lock (&agent->lock);
        group_release (agent);
        pthread_mutex_unlock (&agent->lock);
        remove_tree (agent->base_dir);
        agent->base_dir[0] = '\0';
        agent->base_is_tmp = 0;
    }
    eventlog_close (agent->ev);
    agent->ev = NULL;
    agent->running = 0;
}

int elastic_agent_run (elastic_agent_t *agent,
                       elastic_agent_result_t **result,
                       elastic_error_t *err)
{
    int rc, status = 1, final_state = ELASTIC_AGENT_UNKNOWN;

    if (result)
        *result = NULL;
    if (!agent)
        return errcodef (err, ELASTIC_ERR_INVAL, "elastic_agent_run: NULL agent");
    if (agent->running || agent->ran)
        return errcodef (err,
                         ELASTIC_ERR_STATE,
                         "elastic_agent_run: an agent runs once (create another)");
    if ((rc = run_begin (agent, err)) == ELASTIC_OK) {
        rc = agent_run_machine (agent, &status, &final_state, err);
        if (rc != ELASTIC_OK && agent->started) {
            /* the workers ran: the failure belongs in the result */
            log_err ("%s", err ? err->text : "agent error");
            if (group_alive (agent) > 0)
                agent_stop (agent, SIGKILL, 0);
            final_state = ELASTIC_AGENT_FAILED;
            status = agent_failure_status (agent);
            rc = ELASTIC_OK;
        }
        if (agent->started && result)
            *result = result_build (agent, final_state, status);
    }
    run_end (agent, rc, status, final_state);
    return rc;
}

/* ---- views ----------------------------------------------------------------- */

int elastic_agent_group_info (elastic_agent_t *agent,
                              struct elastic_agent_group_info *info)
{
    if (!agent || !info)
        return ELASTIC_ERR_INVAL;
    pthread_mutex_lock (&agent->lock);
    info->state = agent->state;
    info->group_rank = agent->rinfo.group_rank;
    info->group_world_size =
        agent->rinfo.group_world_size ? agent->rinfo.group_world_size : 1;
    info->nworkers = agent->nworkers;
    info->world_size = agent->nworkers > 0 ? agent->w[0].world_size : 0;
    info->restart_count = agent->restart_count;
    info->max_restarts = agent->spec->max_restarts;
    info->master_port = agent->master_port;
    info->start_time = agent->start_wall;
    pthread_mutex_unlock (&agent->lock);
    return ELASTIC_OK;
}

int elastic_agent_worker_info (elastic_agent_t *agent,
                               int index,
                               struct elastic_agent_worker_info *info)
{
    struct worker *w;

    if (!agent || !info)
        return ELASTIC_ERR_INVAL;
    pthread_mutex_lock (&agent->lock);
    if (index < 0 || index >= agent->nworkers) {
        pthread_mutex_unlock (&agent->lock);
        return ELASTIC_ERR_NOT_FOUND;
    }
    w = &agent->w[index];
    info->index = index;
    info->local_rank = w->local_rank;
    info->rank = w->rank;
    info->role_rank = w->role_rank;
    info->world_size = w->world_size;
    info->role_world_size = w->role_world_size;
    info->pid = w->pid;
    info->state = w->state;
    info->exitcode = w->exited ? w->exitcode : 0;
    info->step = -1;
    info->snapshot_step = -1;
    info->progress_age = -1;
    if (w->hb &&
        __atomic_load_n (&w->hb->magic, __ATOMIC_ACQUIRE) == ELASTIC_HEARTBEAT_MAGIC) {
        uint64_t upd = __atomic_load_n (&w->hb->updated_ns, __ATOMIC_ACQUIRE);
        if (__atomic_load_n (&w->hb->count, __ATOMIC_RELAXED) > 0)
            info->step = __atomic_load_n (&w->hb->step, __ATOMIC_RELAXED);
        info->snapshot_step =
            __atomic_load_n (&w->hb->last_snapshot_step, __ATOMIC_RELAXED);
        if (upd)
            info->progress_age = (double)(mono_ns () - upd) * 1e-9;
    }
    pthread_mutex_unlock (&agent->lock);
    return ELASTIC_OK;
}

/* ---- for backends ----------------------------------------------------------- */

int elastic_agent_worker_count (elastic_agent_t *agent)
{
    return agent ? agent->nworkers : 0;
}

char *const *elastic_agent_worker_argv (elastic_agent_t *agent, int index)
{
    if (!agent || index < 0 || index >= agent->nworkers)
        return NULL;
    return agent->w[index].argv;
}

char *const *elastic_agent_worker_env (elastic_agent_t *agent, int index)
{
    if (!agent || index < 0 || index >= agent->nworkers)
        return NULL;
    return agent->w[index].env;
}

const char *elastic_agent_worker_dir (elastic_agent_t *agent, int index)
{
    if (!agent || index < 0 || index >= agent->nworkers)
        return NULL;
    return agent->w[index].dir;
}

const struct elastic_agent_spec *agent_spec (elastic_agent_t *agent)
{
    return agent->spec;
}

struct eventlog *agent_eventlog (elastic_agent_t *agent)
{
    return agent->ev;
}

int agent_attempt (elastic_agent_t *agent)
{
    return agent->restart_count;
}

const char *agent_run_id (elastic_agent_t *agent)
{
    return agent->run_id;
}

const char *agent_attempt_dir (elastic_agent_t *agent)
{
    return agent->attempt_dir;
}

const char *agent_temp_dir (elastic_agent_t *agent)
{
    return agent->base_is_tmp && agent->base_dir[0] ? agent->base_dir : NULL;
}

const struct elastic_agent_rdzv_info *agent_rendezvous_info (elastic_agent_t *agent)
{
    return &agent->rinfo;
}

int agent_stopping (elastic_agent_t *agent)
{
    return agent->stopping;
}

int agent_signal_pending (elastic_agent_t *agent)
{
    sigset_t pending;

    if (agent->requested_signal > 0)
        return 1;
    if (!agent->signals_set || sigpending (&pending) < 0)
        return 0;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGCHLD && sigismember (&agent->blocked, sig) == 1 &&
            sigismember (&pending, sig) == 1)
            return 1;
    return 0;
}

int agent_signal_received (elastic_agent_t *agent)
{
    return agent->pending_signal;
}

const struct worker *agent_worker (elastic_agent_t *agent, int index)
{
    if (!agent || index < 0 || index >= agent->nworkers)
        return NULL;
    return &agent->w[index];
}
