/* elastic/agent.h - the elastic agent: start, watch, restart and report workers
 *
 * libelastic-agent is the supervisor core of elastic-exec, usable by anyone who
 * wants to write an agent.  It follows torchelastic's SimpleElasticAgent: a
 * generic core owns the state machine
 *
 *     rendezvous -> assign ranks -> start -> monitor -> restart or stop
 *                -> exit barrier -> shutdown
 *
 * over a backend (how workers are started, stopped and watched: local
 * processes, or with the spec's wireup "pmix" local processes that are the
 * MPI ranks of a PMIx server the agent hosts) and a rendezvous module (who
 * the peers are: a static one by default).  Both are tables of function
 * pointers, so other backends or a multi-node rendezvous plug in without
 * touching the core.
 *
 * Lifecycle:
 *     spec = elastic_agent_spec_create ();
 *     elastic_agent_spec_set (spec, "nproc-per-node", "4", &err);   (any flag)
 *     elastic_agent_spec_set_entrypoint (spec, argc, argv, &err);   (or _function)
 *     agent = elastic_agent_create (spec, &err);
 *     elastic_agent_run (agent, &result, &err);
 *     ... elastic_agent_result_*() ...
 *     elastic_agent_result_destroy (result);
 *     elastic_agent_destroy (agent);
 *     elastic_agent_spec_destroy (spec);
 *
 * Error contract: as in <elastic.h> - int functions return ELASTIC_OK or an
 * ELASTIC_ERR_* code, pointer functions return NULL, and an elastic_error_t
 * out-parameter (may be NULL) says what was wrong, which value, and what is
 * accepted.  Nothing here aborts the process.
 *
 * Worker group states follow torchelastic: a group starts in INIT, becomes
 * HEALTHY when its workers are started (UNHEALTHY when a watchdog fired), and
 * ends SUCCEEDED (all exited 0) or FAILED; the agent puts it in STOPPED while
 * it restarts it.  UNKNOWN means the backend lost track of the workers.
 * With in-place recovery (elastic_agent_worker_lost) a group whose lost
 * workers' peers went on succeeds when every worker left exited 0.
 */
#ifndef ELASTIC_AGENT_H
#define ELASTIC_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <elastic.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Worker and worker group states (values fixed). */
enum elastic_agent_state {
    ELASTIC_AGENT_UNKNOWN = 0,
    ELASTIC_AGENT_INIT = 1,
    ELASTIC_AGENT_HEALTHY = 2,
    ELASTIC_AGENT_UNHEALTHY = 3,
    ELASTIC_AGENT_STOPPED = 4,
    ELASTIC_AGENT_SUCCEEDED = 5,
    ELASTIC_AGENT_FAILED = 6
};

typedef struct elastic_agent elastic_agent_t;
typedef struct elastic_agent_spec elastic_agent_spec_t;
typedef struct elastic_agent_result elastic_agent_result_t;

/* A function entrypoint, run in each forked worker with the worker's
 * environment (RANK, WORLD_SIZE, ...) in place.  It returns the worker's exit
 * code and may set *result to malloc'ed bytes (*result_len long); those come
 * back in the run result keyed by global rank when the worker exits 0. */
typedef int (*elastic_agent_fn) (void *arg, void **result, size_t *result_len);

/* Return the upper-case name of a state ("HEALTHY"), "UNKNOWN" if out of
 * range.  Never fails. */
const char *elastic_agent_state_name (int state);

/* ---- the worker spec (torchelastic's WorkerSpec and the agent's settings) */

/* Create a spec with torchrun's defaults (role "default", 1 worker, no
 * restarts).  Returns NULL on out of memory. */
elastic_agent_spec_t *elastic_agent_spec_create (void);

/* Free a spec (NULL-safe).  The spec must outlive every agent made from it. */
void elastic_agent_spec_destroy (elastic_agent_spec_t *spec);

/* Set one setting by its elastic-exec flag name without the dashes
 * ("max-restarts", "redirects", "health-port", ... see elastic-exec(1));
 * booleans take 1/0/true/false/yes/no.  Returns ELASTIC_ERR_INVAL, with the
 * key, the value and what is accepted in err, on an unknown key or a bad
 * value. */
int elastic_agent_spec_set (elastic_agent_spec_t *spec,
                            const char *key,
                            const char *value,
                            elastic_error_t *err);

/* Return the current value of a setting as text (borrowed, valid until the
 * next set), or NULL for an unknown key or an unset one. */
const char *elastic_agent_spec_get (const elastic_agent_spec_t *spec, const char *key);

/* Run an executable: argv[0] is looked up in PATH like execvp(3) and must
 * exist and be executable; "${local_rank}" in an argument is replaced by the
 * worker's local rank.  Returns ELASTIC_ERR_INVAL (err names the program and
 * why) when it cannot be run. */
int elastic_agent_spec_set_entrypoint (elastic_agent_spec_t *spec,
                                       int argc,
                                       char *const argv[],
                                       elastic_error_t *err);

/* Run fn(arg) in each forked worker instead of an executable.  Returns
 * ELASTIC_ERR_INVAL if fn is NULL. */
int elastic_agent_spec_set_function (elastic_agent_spec_t *spec,
                                     elastic_agent_fn fn,
                                     void *arg,
                                     elastic_error_t *err);

/* ---- the rendezvous module ------------------------------------------------ */

/* What a rendezvous decides for this agent. */
struct elastic_agent_rdzv_info {
    int group_rank;        /* this agent's rank among the agents (GROUP_RANK) */
    int group_world_size;  /* number of agents (GROUP_WORLD_SIZE) */
    int rank_base;         /* global rank of local worker 0; -1: group_rank * nproc */
    int world_size;        /* total workers; 0: group_world_size * nproc */
    int local_rank_base;   /* LOCAL_RANK of worker 0 (0 unless several agents
                              share a node, as in wrapper mode) */
    int node_local_size;   /* LOCAL_WORLD_SIZE; 0: nproc */
    char master_addr[256]; /* MASTER_ADDR; "": master-addr, local-addr or
                              127.0.0.1 */
    int master_port;       /* MASTER_PORT; 0: the spec's master-port, else a
                              free port per attempt; -1: leave MASTER_ADDR and
                              MASTER_PORT unset */
    char run_id[128];      /* "" = keep the spec's run id */
};

/* A rendezvous module.  next_rendezvous is called before every start (and
 * restart); num_nodes_waiting lets a healthy group notice new members (it
 * may be NULL: never); exit_barrier waits, up to timeout seconds, for the
 * other agents to finish (may be NULL: no barrier); destroy frees ctx. */
struct elastic_agent_rdzv {
    const char *name;
    int (*next_rendezvous) (elastic_agent_t *agent,
                            void *ctx,
                            struct elastic_agent_rdzv_info *info,
                            elastic_error_t *err);
    int (*num_nodes_waiting) (elastic_agent_t *agent, void *ctx);
    int (*exit_barrier) (elastic_agent_t *agent, void *ctx, double timeout);
    void (*destroy) (void *ctx);
};

/* ---- the backend (SimpleElasticAgent's extension points) ----------------- */

/* The backend ABI this header describes.  A backend table sets .abi to it;
 * the agent refuses a table whose ABI it does not know (as hwloc refuses a
 * component built against another HWLOC_COMPONENT_ABI).  Version 2: the
 * abi field, and stop_workers takes a struct elastic_agent_stop. */
#define ELASTIC_AGENT_BACKEND_ABI 2

/* A stop request (stop_workers).  flags are ELASTIC_AGENT_STOP_*. */
enum {
    ELASTIC_AGENT_STOP_FAILURE = 1, /* the group failed (not a signal): the
                                       agent stops the rest to restart or end */
    ELASTIC_AGENT_STOP_DETACH = 2,  /* the backend may leave dying workers to
                                       reap in the background (a restart whose
                                       next attempt cannot collide with them) */
};

struct elastic_agent_stop {
    int signum;     /* sent to every worker first (0: none) */
    double timeout; /* seconds to wait before SIGKILL */
    int flags;      /* ELASTIC_AGENT_STOP_* */
    int detached;   /* out: how many workers the backend left so */
};

/* How workers are run.  The core calls, in its single loop thread:
 *   start_workers  - start every worker (ranks and environment are ready:
 *                    see elastic_agent_worker_env/_argv/_info); report each
 *                    with elastic_agent_worker_started();
 *   monitor_workers- report workers that exited since the last call with
 *                    elastic_agent_worker_exited() (or _lost() when its
 *                    peers go on without it, _failed() when the exit fails
 *                    the group whatever its code, elastic_agent_abort()
 *                    when a worker ended the job); return ELASTIC_OK, or an
 *                    error if the workers cannot be accounted for (UNKNOWN);
 *   stop_workers   - send req->signum to every worker, wait up to
 *                    req->timeout seconds (elastic_agent_wait keeps the loop
 *                    running), kill what is left and report the exits;
 *                    return when all are gone (or, with
 *                    ELASTIC_AGENT_STOP_DETACH, set req->detached to the
 *                    number left dying in the background);
 *   shutdown       - last call before the agent returns (signum/timeout as
 *                    for stop_workers, for workers that may still run);
 *   child_event    - optional: SIGCHLD arrived (reap orphans);
 *   destroy        - free ctx (optional).
 * The core wakes at once when a file descriptor registered with
 * elastic_agent_watch becomes ready, so exits are detected by event. */
struct elastic_agent_backend {
    unsigned int abi; /* ELASTIC_AGENT_BACKEND_ABI */
    const char *name;
    int (*start_workers) (elastic_agent_t *agent, void *ctx, elastic_error_t *err);
    int (*monitor_workers) (elastic_agent_t *agent, void *ctx);
    int (*stop_workers) (elastic_agent_t *agent,
                         void *ctx,
                         struct elastic_agent_stop *req);
    void (*shutdown) (elastic_agent_t *agent, void *ctx, int signum, double timeout);
    void (*child_event) (elastic_agent_t *agent, void *ctx);
    void (*destroy) (void *ctx);
};

/* ---- the agent ------------------------------------------------------------ */

/* Create an agent over spec (borrowed) with the local-process backend (the
 * PMIx-hosting one when the spec's wireup is pmix: the default for a
 * program entrypoint in a build with PMIx) and a single-node static
 * rendezvous.  Returns NULL with err set if the spec is incomplete (no
 * entrypoint) or inconsistent (e.g. restart-policy in-place without the
 * hosted PMIx server). */
elastic_agent_t *elastic_agent_create (const elastic_agent_spec_t *spec,
                                       elastic_error_t *err);

/* Free an agent (NULL-safe); does not stop workers (run does that). */
void elastic_agent_destroy (elastic_agent_t *agent);

/* Replace the backend; the agent owns ctx from now on (ops->destroy).
 * Returns ELASTIC_ERR_INVAL for a table without its required functions or
 * with an ABI other than ELASTIC_AGENT_BACKEND_ABI (logged: which ABI, and
 * which one this agent knows), ELASTIC_ERR_STATE once the agent runs. */
int elastic_agent_set_backend (elastic_agent_t *agent,
                               const struct elastic_agent_backend *ops,
                               void *ctx);

/* Replace the rendezvous module; the agent owns ctx (ops->destroy).
 * Returns ELASTIC_ERR_STATE once the agent runs. */
int elastic_agent_set_rendezvous (elastic_agent_t *agent,
                                  const struct elastic_agent_rdzv *ops,
                                  void *ctx);

/* Use a static rendezvous that always answers *info (wrapper mode: the rank
 * and size come from the launcher).  Returns ELASTIC_ERR_INVAL on a bad info. */
int elastic_agent_set_static_rendezvous (elastic_agent_t *agent,
                                         const struct elastic_agent_rdzv_info *info,
                                         elastic_error_t *err);

/* A line the agent writes to stderr when a worker first fails, at once
 * (before it stops or restarts anything: e.g. why the worker cannot be
 * restarted, where the launcher is about to kill this process too).
 * NULL or "": none.  Truncated at 1023 bytes.  Returns ELASTIC_ERR_STATE
 * once the agent runs. */
int elastic_agent_set_failure_note (elastic_agent_t *agent, const char *line);

/* Run the state machine until the workers succeed, restarts are exhausted,
 * or a handled signal (or elastic_agent_request_stop) ends the run; an
 * agent runs once (ELASTIC_ERR_STATE the second time).  Blocks
 * the handled signals and SIGCHLD in the calling thread while it runs.
 * Stores the run result in *result (caller destroys it) whenever the workers
 * were started.  Returns ELASTIC_OK if the run completed (see the result's
 * state), or an error with err set if the agent itself could not work
 * (rendezvous failed, a worker could not be started, a port was in use). */
int elastic_agent_run (elastic_agent_t *agent,
                       elastic_agent_result_t **result,
                       elastic_error_t *err);

/* Ask a running agent, from any thread or a signal handler, to stop its
 * workers as if signum had been received.  Returns ELASTIC_ERR_INVAL for a
 * bad signal number. */
int elastic_agent_request_stop (elastic_agent_t *agent, int signum);

/* ---- read-only views (safe from any thread while the agent runs) --------- */

struct elastic_agent_group_info {
    int state;            /* enum elastic_agent_state of the group */
    int group_rank;       /* GROUP_RANK */
    int group_world_size; /* GROUP_WORLD_SIZE */
    int nworkers;         /* workers of this agent */
    int world_size;       /* WORLD_SIZE */
    int restart_count;    /* restarts so far (ELASTIC_RESTART_COUNT) */
    int max_restarts;     /* the limit */
    int master_port;      /* MASTER_PORT of the current attempt, -1 if unset */
    double start_time;    /* epoch seconds the agent started running */
};

struct elastic_agent_worker_info {
    int index;             /* 0..nworkers-1 */
    int local_rank;        /* LOCAL_RANK */
    int rank;              /* RANK (global) */
    int role_rank;         /* ROLE_RANK */
    int world_size;        /* WORLD_SIZE */
    int role_world_size;   /* ROLE_WORLD_SIZE */
    pid_t pid;             /* 0 before start */
    int state;             /* enum elastic_agent_state of this worker */
    int exitcode;          /* exit code, or -signal (torchelastic's convention) */
    int64_t step;          /* last step reported by libelastic, -1 if none */
    int64_t snapshot_step; /* last snapshot step reported, -1 if none */
    double progress_age;   /* seconds since the last report, -1 if none */
};

/* Fill *info with the worker group's current state.  Returns
 * ELASTIC_ERR_INVAL on NULL arguments. */
int elastic_agent_group_info (elastic_agent_t *agent,
                              struct elastic_agent_group_info *info);

/* Fill *info for worker `index`.  Returns ELASTIC_ERR_NOT_FOUND if there is
 * no such worker (yet). */
int elastic_agent_worker_info (elastic_agent_t *agent,
                               int index,
                               struct elastic_agent_worker_info *info);

/* ---- the run result (torchelastic's RunResult) --------------------------- */

/* A failed worker, as the final report shows it. */
struct elastic_agent_failure {
    int rank; /* global rank */
    int local_rank;
    pid_t pid;
    int exitcode;           /* exit code, or -signal */
    int signal;             /* 0, or the signal that killed it */
    const char *message;    /* the worker's error file message, the signal
                               name, or the watchdog's reason (borrowed) */
    double timestamp;       /* epoch seconds of the failure */
    const char *error_file; /* path of the worker's error file (borrowed) */
};

/* Return the group's final state (SUCCEEDED, FAILED, STOPPED).  Never fails. */
int elastic_agent_result_state (const elastic_agent_result_t *result);

/* Return the exit status a launcher should use: 0 on success,
 * ELASTIC_EXIT_SUSPENDED after a preemption, the root cause's exit code
 * (128+signal if it was killed) on failure, 128+signal if a signal stopped
 * the agent.  Never fails. */
int elastic_agent_result_exit_status (const elastic_agent_result_t *result);

/* Return how many global ranks the result covers; ranks are read with
 * elastic_agent_result_rank(i) for i in [0, count).  Never fails. */
int elastic_agent_result_count (const elastic_agent_result_t *result);

/* Return the i-th global rank, or -1 if i is out of range. */
int elastic_agent_result_rank (const elastic_agent_result_t *result, int i);

/* Point *buf and *len at the bytes a function entrypoint returned for `rank`
 * (borrowed).  Returns ELASTIC_ERR_NOT_FOUND if that rank returned none. */
int elastic_agent_result_return_value (const elastic_agent_result_t *result,
                                       int rank,
                                       const void **buf,
                                       size_t *len);

/* Fill *f for a failed rank.  Returns ELASTIC_ERR_NOT_FOUND if `rank` did
 * not fail. */
int elastic_agent_result_failure (const elastic_agent_result_t *result,
                                  int rank,
                                  struct elastic_agent_failure *f);

/* Return the number of failed ranks, and in *root_rank (may be NULL) the
 * rank of the earliest failure (the root cause), -1 if none.  Never fails. */
int elastic_agent_result_failures (const elastic_agent_result_t *result, int *root_rank);

/* Write the failure report (root cause first, then every other failed rank
 * with exit code or signal, message and time) to the file descriptor fd.
 * Returns ELASTIC_ERR_IO if it cannot be written; writes nothing and
 * returns ELASTIC_OK if nothing failed. */
int elastic_agent_result_report (const elastic_agent_result_t *result, int fd);

/* Free a result (NULL-safe). */
void elastic_agent_result_destroy (elastic_agent_result_t *result);

/* ---- for backend authors ---------------------------------------------------- */

/* Called when a watched file descriptor is ready (events as for poll(2)). */
typedef void (*elastic_agent_watch_fn) (elastic_agent_t *agent,
                                        int fd,
                                        int revents,
                                        void *arg);

/* Watch fd for input (POLLIN) in the agent's loop.  Returns ELASTIC_ERR_INVAL
 * if fd is bad or already watched. */
int elastic_agent_watch (elastic_agent_t *agent,
                         int fd,
                         elastic_agent_watch_fn cb,
                         void *arg);

/* Stop watching fd (safe inside its own callback).  Returns
 * ELASTIC_ERR_NOT_FOUND if fd is not watched. */
int elastic_agent_unwatch (elastic_agent_t *agent, int fd);

/* Run the agent's loop (watchers, signals, watchdogs) until done(agent, arg)
 * returns non-zero or timeout seconds pass.  Returns ELASTIC_OK when done,
 * ELASTIC_ERR_STATE on timeout. */
int elastic_agent_wait (elastic_agent_t *agent,
                        double timeout,
                        int (*done) (elastic_agent_t *agent, void *arg),
                        void *arg);

/* The number of workers of this agent (the spec's nproc-per-node). */
int elastic_agent_worker_count (elastic_agent_t *agent);

/* The worker's command line (borrowed, NULL-terminated; NULL for a
 * function entrypoint) with ${local_rank} substituted. */
char *const *elastic_agent_worker_argv (elastic_agent_t *agent, int index);

/* The worker's contract variables as "NAME=value" strings (borrowed,
 * NULL-terminated, valid until the next start): RANK, LOCAL_RANK, ...
 * They are to be added to the agent's own environment. */
char *const *elastic_agent_worker_env (elastic_agent_t *agent, int index);

/* The worker's directory for this attempt (logs, error file; borrowed). */
const char *elastic_agent_worker_dir (elastic_agent_t *agent, int index);

/* In a forked child, before exec or the function: restore the signal mask
 * and dispositions the agent changed.  Async-signal-safe; never fails. */
void elastic_agent_child_reset (elastic_agent_t *agent);

/* Report that worker `index` runs as pid.  Returns ELASTIC_ERR_NOT_FOUND for
 * a bad index. */
int elastic_agent_worker_started (elastic_agent_t *agent, int index, pid_t pid);

/* Report that worker `index` exited: exitcode >= 0 and signum 0 for a normal
 * exit, or the signal that killed it.  The core reads the worker's error
 * file.  Returns ELASTIC_ERR_NOT_FOUND for a bad index. */
int elastic_agent_worker_exited (elastic_agent_t *agent,
                                 int index,
                                 int exitcode,
                                 int signum);

/* Report that worker `index` died and that its peers were told to go on
 * without it (in-place recovery: the hosted PMIx server sent the MPI
 * survivors the failure event).  It is a failure (worker_exit and
 * rank_lost events, the run result, note added to its message; note may be
 * NULL), but not the group's: the group succeeds when the workers left
 * succeed, and fails when none is left.  Returns ELASTIC_ERR_NOT_FOUND for
 * a bad index. */
int elastic_agent_worker_lost (
    elastic_agent_t *agent, int index, int exitcode, int signum, const char *note);

/* Report that worker `index` exited and that this is a failure of the
 * group whatever its exit code (a rank that died inside MPI_Init); note
 * (may be NULL) is added to its message.  Returns ELASTIC_ERR_NOT_FOUND
 * for a bad index. */
int elastic_agent_worker_failed (
    elastic_agent_t *agent, int index, int exitcode, int signum, const char *note);

/* Worker `index` asked to end the whole job (MPI_Abort): the agent kills
 * every worker at once and ends the run FAILED, without restarting, with
 * `code` as its exit status (1 if code is 0 modulo 256) and message (may
 * be NULL) in the failure report.  Only the first call counts.  Returns
 * ELASTIC_ERR_NOT_FOUND for a bad index. */
int elastic_agent_abort (elastic_agent_t *agent,
                         int index,
                         int code,
                         const char *message);

/* Record the bytes a function entrypoint returned (copied).  Returns
 * ELASTIC_ERR_NOMEM or ELASTIC_ERR_NOT_FOUND. */
int elastic_agent_worker_set_return (elastic_agent_t *agent,
                                     int index,
                                     const void *buf,
                                     size_t len);

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_AGENT_H */
