/* agent_impl.h - the agent core's internals, shared by its modules
 *
 * The core (agent.c) owns the state machine, the worker records, the signal
 * file descriptor and the loop; the local backend (local.c), the file timer
 * (filetimer.c), the health server (health.c) and the metrics (metrics.c)
 * read what they need from here.  Readers on other threads (the health
 * server) take `lock`; the loop thread takes it when it changes workers.
 */
#ifndef ELASTIC_EXEC_AGENT_IMPL_H
#define ELASTIC_EXEC_AGENT_IMPL_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "common/heartbeat.h"
#include "elastic/agent.h"
#include "eventlog.h"
#include "loop.h"
#include "spec.h"

struct worker {
    int index;
    int local_rank; /* LOCAL_RANK (before --virtual-local-rank) */
    int rank;
    int role_rank;
    int world_size;
    int role_world_size;
    pid_t pid;
    int state; /* INIT, HEALTHY, SUCCEEDED, FAILED, STOPPED */
    double start_wall;
    double start_mono;
    int exited;
    int exitcode; /* >= 0, or -signal */
    int signum;
    double exit_mono;
    int suspended; /* exited with ELASTIC_EXIT_SUSPENDED */
    int failed;    /* a failure of this attempt */
    int lost;      /* a failure the others went on without (in place) */
    int after_end; /* killed, or exited without MPI_Finalize, after it
                      reported the end of its work: finished all the same */
    int aborted;   /* it ended the job (elastic_agent_abort) */
    int abort_code;
    uint64_t fail_seq;
    double fail_time; /* epoch seconds */
    char *message;
    char *traceback;
    char *reason;     /* why a watchdog killed it */
    double fire_mono; /* when (mono_now), 0 if none did */
    void *ret;
    size_t retlen;
    int has_ret;
    char dir[PATH_MAX];
    char error_file[PATH_MAX];
    char heartbeat_file[PATH_MAX];
    struct elastic_heartbeat *hb; /* read-only mapping */
    uint64_t hang_grace_ns;       /* the hang timeout runs from here at the
                                     earliest (a fresh one after a kill) */
    char **env;
    char **argv;
};

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
    int nworkers;
    struct worker *w;
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
    int stopping;           /* 1 while the agent stops workers on purpose */
    int stop_after_failure; /* ... because the group failed (not a signal) */
    int escalate;           /* a second signal: kill now */
    int stop_detach;        /* this stop may leave dying workers to the
                               backend, to reap in the background (a restart
                               whose next attempt cannot collide with them) */
    int stop_detached;      /* how many the backend left so (its report) */
    int port_fresh;         /* this attempt's MASTER_PORT was picked for it
                               (or there is none) */
    double pending_since;   /* mono_now () when pending_signal arrived */
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
};

/* The default backend: local processes (local.c). */
extern const struct elastic_agent_backend local_backend;
void *local_backend_create (elastic_agent_t *agent);

/* What a wire-up adds to the local backend (pmix_backend.c): variables for
 * each worker, variables to drop from the agent's environment, and the
 * report of each exit.  Every function pointer may be NULL. */
struct local_wireup {
    void *arg;
    /* worker i's extra variables ("NAME=value", NULL-terminated, borrowed
     * until the fork); they override the agent's */
    char *const *(*env) (void *arg, int i);
    /* 1 if the agent's variable `entry` ("NAME=value") is not to be passed */
    int (*drop) (void *arg, const char *entry);
    /* worker i was forked as pid */
    void (*started) (void *arg, int i, pid_t pid);
    /* worker i was reaped: report it to the core (elastic_agent_worker_*);
     * without this hook the local backend reports a plain exit */
    void (*reaped) (void *arg, int i, int wstatus);
    /* mark descriptors >= 3 close-on-exec in each child before exec */
    int close_fds;
    /* worker i of the attempt stopped in the background was reaped (the
     * core has moved on: report nothing to it) */
    void (*drained) (void *arg, int i, int wstatus);
};

/* Use w (copied; NULL: none) in the local backend whose context is ctx. */
void local_set_wireup (void *ctx, const struct local_wireup *w);

/* Let a stop for a restart leave dying workers to be reaped in the
 * background (allowed, the default) or not (the wire-up shares state with
 * the workers that must end first). */
void local_allow_detach (void *ctx, int allowed);

/* 1 while workers stopped in the background are not all reaped. */
int local_draining (void *ctx);

/* The local backend's guardian (guardian.h), NULL before the first start
 * or if it could not be started. */
struct guardian *local_guardian (void *ctx);

/* The PMIx-hosting backend (pmix_backend.c, with PMIx): the local backend
 * plus the hosted PMIx server.  Returns NULL with err set. */
#if HAVE_PMIX
extern const struct elastic_agent_backend pmix_backend;
void *pmix_backend_create (elastic_agent_t *agent, char *err, size_t errsz);
#endif

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

/* 1 while the loop made progress within --health-timeout. */
int agent_loop_healthy (elastic_agent_t *agent, double *age);

/* Log a health transition (any thread) if `healthy` differs from the last. */
void agent_health_observe (elastic_agent_t *agent, int healthy, double age);

/* Render /metrics in Prometheus text format into a malloc'ed string. */
char *agent_metrics (elastic_agent_t *agent);

#endif /* ELASTIC_EXEC_AGENT_IMPL_H */

/* group.c: the worker records of one attempt */

/* Assign ranks from agent->rinfo, create the attempt's directories, error
 * and heartbeat files, and build each worker's environment and argv.
 * Returns 0, or -1 with one line in err. */
int group_prepare (elastic_agent_t *agent, char *err, size_t errsz);

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

/* 1 if the worker's heartbeat (version 2 on) has the ELASTIC_HEARTBEAT_*
 * flag; worker_reported_end: its work is done (elastic_progress_end). */
int worker_reported (const struct worker *w, uint32_t flag);
int worker_reported_end (const struct worker *w);

/* watchdog.c: file timer and progress heartbeat */

/* Open the file timer FIFO if enabled.  Returns 0, or -1 with err. */
int watchdog_setup (elastic_agent_t *agent, char *err, size_t errsz);

/* Close the file timer. */
void watchdog_teardown (elastic_agent_t *agent);

/* Fire what expired: file timers and --hang-timeout.  Returns the number
 * of workers killed. */
int watchdog_check (elastic_agent_t *agent);

/* Seconds until the next watchdog deadline (capped at `cap`). */
double watchdog_next (elastic_agent_t *agent, double cap);

/* result.c */
elastic_agent_result_t *result_build (elastic_agent_t *agent, int state, int exit_status);
