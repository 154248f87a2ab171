/* agent_backend.h - what a built-in backend may call in the core
 *
 * A backend (local.c, drain.c, pmix/pmix_backend.c) reaches the core only
 * through <elastic/agent.h> (the public backend interface: report starts
 * and exits, watch descriptors, wait) and the read-only accessors below;
 * it never includes agent_impl.h, the core's private header.  The core
 * reaches a backend only through its struct elastic_agent_backend, picked
 * from the built-in table (backends.c) or set with elastic_agent_set_backend.
 * All of these are for the agent's loop thread.
 */
#ifndef ELASTIC_EXEC_AGENT_BACKEND_H
#define ELASTIC_EXEC_AGENT_BACKEND_H

#include <jansson.h>

#include "elastic/agent.h"
#include "worker.h"

struct elastic_agent_spec;
struct eventlog;

/* The agent's spec (borrowed: it outlives the agent).  Never fails. */
const struct elastic_agent_spec *agent_spec (elastic_agent_t *agent);

/* The agent's event log while it runs (NULL: none; eventlog_emit takes
 * NULL). */
struct eventlog *agent_eventlog (elastic_agent_t *agent);

/* The current attempt's number (ELASTIC_RESTART_COUNT). */
int agent_attempt (elastic_agent_t *agent);

/* The run id (borrowed; valid while the agent runs). */
const char *agent_run_id (elastic_agent_t *agent);

/* The current attempt's directory (borrowed). */
const char *agent_attempt_dir (elastic_agent_t *agent);

/* The run directory when the agent created it and removes it at the end
 * (a temporary one), else NULL. */
const char *agent_temp_dir (elastic_agent_t *agent);

/* The last rendezvous (borrowed). */
const struct elastic_agent_rdzv_info *agent_rendezvous_info (elastic_agent_t *agent);

/* 1 while the agent stops the workers on purpose (a stop, a restart, a
 * job abort). */
int agent_stopping (elastic_agent_t *agent);

/* 1 when a signal the agent acts on (SIGTERM, SIGINT, a preemption notice:
 * not SIGCHLD) or a stop request waits to be read by its loop: for a backend
 * that must block before the loop runs again (not from a signal handler). */
int agent_signal_pending (elastic_agent_t *agent);

/* The signal the agent's loop has read and will act on (a stop, a
 * preemption notice), or 0: for a module waiting in elastic_agent_wait. */
int agent_signal_received (elastic_agent_t *agent);

/* Worker index's record (read-only), NULL for a bad index. */
const struct worker *agent_worker (elastic_agent_t *agent, int index);

/* Kill worker index (SIGKILL or signum to its pid) as a watchdog does:
 * a failure with reason as its message, a watchdog_fire event of `kind`
 * with fields added (taken; may be NULL).  Does nothing for a bad index. */
void agent_worker_kill (elastic_agent_t *agent,
                        int index,
                        int signum,
                        const char *kind,
                        const char *reason,
                        json_t *fields);

/* Add the record of a worker that joins the running attempt (a process
 * started through MPI_Comm_spawn): the next global rank (after every rank
 * started so far), local rank `local_rank` (the slot it takes), argv
 * (copied: the program and its arguments), its own directory
 * (<attempt dir>/spawn_<rank>: logs, error file, heartbeat file) and the
 * contract's environment.  The backend then starts it and reports it as
 * any worker (elastic_agent_worker_started, _exited, _lost, ...).  Returns
 * its index (>= elastic_agent_worker_count before the call), or -1 with
 * err (no argv, out of memory, a directory that cannot be made). */
int agent_worker_add (elastic_agent_t *agent,
                      int local_rank,
                      char *const argv[],
                      elastic_error_t *err);

/* The global rank the next agent_worker_add gives: at least rank (a
 * spawn into a mesh is numbered by its requestor, job-wide). */
void agent_next_rank_at_least (elastic_agent_t *agent, int rank);

/* Publish the spawn capacity (heartbeat.h, version 3): write it into the
 * heartbeat file of every live worker whose file does not hold it yet.
 * Cheap when nothing changed (it reads the mappings); call it whenever
 * the value or the live workers may have changed. */
void agent_capacity_set (elastic_agent_t *agent, int capacity);

/* A hosting agent (spec->hosting: elastic-exec --join) with no live
 * worker stays healthy, waiting for processes spawned onto it, until its
 * backend says the job is ending; then it ends (succeeded, unless a
 * worker failed). */
void agent_hosting_ends (elastic_agent_t *agent);

/* The capacity last published (0 before any). */
int agent_capacity (elastic_agent_t *agent);

#endif /* ELASTIC_EXEC_AGENT_BACKEND_H */
