/* local.h - the local-process backend, and what a backend layered on it
 * (pmix/pmix_backend.c) may ask of it
 */
#ifndef ELASTIC_EXEC_LOCAL_H
#define ELASTIC_EXEC_LOCAL_H

#include <sys/types.h>

#include "elastic/agent.h"

struct guardian;

/* The local backend's table (ELASTIC_AGENT_BACKEND_ABI). */
extern const struct elastic_agent_backend local_backend;

/* Create its context for agent.  Returns NULL with err set. */
void *local_backend_create (elastic_agent_t *agent, elastic_error_t *err);

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
    /* start the workers with SIGPIPE ignored (MPI ranks: Open MPI's TCP
     * transport writes to a dead peer with writev, whose SIGPIPE would
     * kill a survivor during the recovery) */
    int ignore_sigpipe;
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

/* Start worker `index`, a record the core added to the running attempt
 * (agent_worker_add: a spawned process), like the others: its own process
 * group, output with its rank's prefix, the slot's binding (its local
 * rank's), the wire-up's variables; cwd (NULL: the agent's) is its
 * working directory.  Returns ELASTIC_OK, or an error with err. */
int local_start_extra (void *ctx, int index, const char *cwd, elastic_error_t *err);

/* The local backend's guardian (guardian.h), NULL before the first start
 * or if it could not be started. */
struct guardian *local_guardian (void *ctx);

#endif /* ELASTIC_EXEC_LOCAL_H */
