/* agent_impl.h - the agent core's private header
 *
 * The core is agent.c (create, run, views), agent_loop.c (signals, the
 * loop, watches), agent_setup.c (ports, run id, run directory), machine.c
 * (the state machine and its restart policy), group.c (the worker
 * records and what backends report about them) and backends.c (the
 * built-in backends); its services, watchdog.c, health.c, metrics.c and
 * result.c, read it too.  Backends never include this header: they have
 * agent_backend.h.  Readers on other threads (the health server) take
 * `lock`; the loop thread takes it when it changes workers.
 */
#ifndef ELASTIC_EXEC_AGENT_IMPL_H
#define ELASTIC_EXEC_AGENT_IMPL_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "agent_backend.h"
#include "common/heartbeat.h"
#include "elastic/agent.h"
#include "eventlog.h"
#include "loop.h"
#include "spec.h"
#include "worker.h"

struct filetimer;
struct health;
struct watch;

struct elastic_agent {
    const struct elastic_agent_spec *spec;
    const struct elastic_agent_backend *backend;
    void *backend_ctx;
    const struct elastic_agent_rdzv *rdzv;
    void *rdzv_ctx;
    struct elastic_agent_rdzv_info static_info; /* for the static rendezvous */
    struct elastic_agent_rdzv_info rinfo;       /* the last rendezvous */

    struct loop *loop;
    struct watch *watches;
    int sigfd;
    int wakefd;
    sigset_t blocked;
    sigset_t oldmask;
    struct sigaction old_sigpipe;
    int signals_set;
    volatile sig_atomic_t requested_signal;

    pthread_mutex_t lock;
    int running;
    int ran; /* an agent runs once */
    int state;
    int nworkers; /* the attempt's workers: --nproc-per-node, then the
                     ones spawned into the running group (agent_worker_add) */
    int wcap;     /* records allocated in w */
    struct worker *w;
    int next_rank;     /* the global rank the next spawned worker gets */
    int capacity;      /* the spawn capacity last published (agent_capacity_set) */
    int hosting_ends;  /* agent_hosting_ends was called */
    int nspawned;      /* workers spawned in this attempt */
    int spawned_total; /* ... in every attempt (/metrics; atomics: the
                          metrics thread reads it and capacity) */
    int restart_count;
    int remaining_restarts;
    int started; /* workers were started at least once */
    char master_addr[256];
    int master_port; /* -1: unset */
    char run_id[128];
    char base_dir[PATH_MAX];
    int base_is_tmp;
    char attempt_dir[PATH_MAX];
    char timer_path[PATH_MAX];
    int stopping;         /* 1 while the agent stops workers on purpose */
    int escalate;         /* a second signal: kill now */
    int port_fresh;       /* this attempt's MASTER_PORT was picked for it
                             (or there is none) */
    double pending_since; /* mono_now () when pending_signal arrived */
    int pending_signal;
    uint64_t fail_seq;

    struct eventlog *ev;
    struct filetimer *ft;
    struct health *health;
    int health_port;

    double start_wall;
    double start_mono;
    uint64_t tick_ns;    /* last loop iteration (atomic) */
    int health_reported; /* 1 healthy, 0 unhealthy (atomic) */

    /* a worker asked to end the job (elastic_agent_abort) */
    int abort_requested;
    int abort_status; /* the agent's exit status for it */

    /* counters and the last failure, for /metrics (under lock) */
    int failures_total;
    int lost_total; /* workers lost and recovered in place */
    int watchdog_fires;
    int last_fail_rank;
    int last_fail_local_rank;
    int last_fail_exitcode;
    int last_fail_signal;
    double last_fail_time;
    char last_fail_message[256];
    char failure_note[1024]; /* elastic_agent_set_failure_note; "" none */
    int failure_noted;
};

/* ---- agent.c ---- */

/* ELASTIC_OK if the core knows ops's ABI, else ELASTIC_ERR_INVAL with err
 * naming the backend, its ABI and the agent's. */
int agent_backend_check (const struct elastic_agent_backend *ops, elastic_error_t *err);

/* ---- backends.c: the built-in backends ---- */

/* Create the built-in backend `name` ("local", "pmix") for agent and make
 * it the agent's.  Returns ELASTIC_OK, or an error with err (no such
 * backend in this build, an unknown ABI, or its constructor failed). */
int agent_backend_load (elastic_agent_t *agent, const char *name, elastic_error_t *err);

/* ---- agent_loop.c: signals, the loop, watches ---- */

/* Block the handled signals and read them from a signalfd in the loop,
 * with the wake-up eventfd.  Returns 0, or -1 with err. */
int agent_signals_setup (elastic_agent_t *agent, elastic_error_t *err);

/* Undo agent_signals_setup (consuming signals that arrived meanwhile). */
void agent_signals_restore (elastic_agent_t *agent);

/* One turn of the loop (up to timeout seconds), then a tick.  Returns the
 * loop's result (-1 with errno on failure). */
int agent_loop_once (elastic_agent_t *agent, double timeout);

/* Free the backend's watch records. */
void agent_watches_free (elastic_agent_t *agent);

/* 1 while the loop made progress within --health-timeout. */
int agent_loop_healthy (elastic_agent_t *agent, double *age);

/* Log a health transition (any thread) if `healthy` differs from the last. */
void agent_health_observe (elastic_agent_t *agent, int healthy, double age);

/* ---- agent_setup.c: before an attempt starts ---- */

/* Check a rendezvous answer for nproc workers.  Returns ELASTIC_OK or
 * ELASTIC_ERR_INVAL with err. */
int agent_check_rdzv_info (const struct elastic_agent_rdzv_info *info,
                           int nproc,
                           elastic_error_t *err);

/* Decide MASTER_ADDR/MASTER_PORT of this attempt.  Returns ELASTIC_OK or
 * an error with err (no free port, the spec's port in use). */
int agent_set_master (elastic_agent_t *agent,
                      const struct elastic_agent_rdzv_info *info,
                      elastic_error_t *err);

/* A random run id ("xxxxxxxx-xxxx-xxxx") into buf. */
void agent_make_run_id (char *buf, size_t size);

/* Decide and create the run directory once (--log-dir, else a temporary
 * one).  Returns 0, or -1 with err. */
int agent_setup_base_dir (elastic_agent_t *agent, elastic_error_t *err);

/* ---- machine.c: the state machine ---- */

/* Run the state machine: start, monitor, restart or stop.  Sets *statusp
 * and *final_state when the run ends; returns ELASTIC_OK, or an error with
 * err when the agent itself could not work. */
int agent_run_machine (elastic_agent_t *agent,
                       int *statusp,
                       int *final_state,
                       elastic_error_t *err);

/* Stop every worker on purpose as req asks (the backend's stop_workers);
 * returns req->detached. */
int agent_stop_workers (elastic_agent_t *agent, struct elastic_agent_stop *req);

/* agent_stop_workers with signum and timeout, no flags. */
void agent_stop (elastic_agent_t *agent, int signum, double timeout);

/* The exit status a failed run reports: the root cause's. */
int agent_failure_status (elastic_agent_t *agent);

/* ---- group.c: the worker records ---- */

/* Assign ranks from agent->rinfo, create the attempt's directories, error
 * and heartbeat files, and build each worker's environment and argv.
 * Returns 0, or -1 with one line in err. */
int group_prepare (elastic_agent_t *agent, elastic_error_t *err);

/* Free the records' per-attempt resources (mappings, env, messages). */
void group_release (elastic_agent_t *agent);

/* Change the group's state, logging the transition. */
void group_set_state (elastic_agent_t *agent, int state);

/* The group state that the workers' records imply (torchelastic's
 * _monitor_workers): FAILED/UNHEALTHY, SUCCEEDED, or HEALTHY. */
int group_derive_state (elastic_agent_t *agent);

/* Number of workers that have a pid and have not exited. */
int group_alive (elastic_agent_t *agent);

/* Log what a successful group lost on the way (nothing if it lost none). */
void group_summary (elastic_agent_t *agent);

/* Record that w failed (the caller holds agent->lock): its failure
 * sequence number, its time (epoch seconds) and message (taken; NULL:
 * none), the failure counters and the last failure /metrics shows, with
 * exitcode (or -signal) and signum. */
void worker_fail (elastic_agent_t *agent,
                  struct worker *w,
                  double when,
                  char *message,
                  int exitcode,
                  int signum);

/* Find the worker whose process group holds pid; NULL if none. */
struct worker *agent_worker_by_pid (elastic_agent_t *agent, pid_t pid);

/* Kill a running worker for a watchdog and record it as a failure. */
void agent_watchdog_fire (elastic_agent_t *agent,
                          struct worker *w,
                          pid_t target,
                          int signum,
                          const char *kind,
                          const char *reason,
                          json_t *fields);

/* ---- watchdog.c: file timer and progress heartbeat ---- */

/* Open the file timer FIFO if enabled.  Returns 0, or -1 with err. */
int watchdog_setup (elastic_agent_t *agent, elastic_error_t *err);

/* Close the file timer. */
void watchdog_teardown (elastic_agent_t *agent);

/* Fire what expired: file timers and --hang-timeout.  Returns the number
 * of workers killed. */
int watchdog_check (elastic_agent_t *agent);

/* Seconds until the next watchdog deadline (capped at `cap`). */
double watchdog_next (elastic_agent_t *agent, double cap);

/* ---- metrics.c, result.c ---- */

/* Render /metrics in Prometheus text format into a malloc'ed string. */
char *agent_metrics (elastic_agent_t *agent);

/* The run result of the workers' records (NULL on out of memory). */
elastic_agent_result_t *result_build (elastic_agent_t *agent, int state, int exit_status);

#endif /* ELASTIC_EXEC_AGENT_IMPL_H */
