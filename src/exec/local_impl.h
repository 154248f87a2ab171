/* local_impl.h - the local backend's private header: local.c (start,
 * reap, stop) and drain.c (workers stopped in the background)
 */
#ifndef ELASTIC_EXEC_LOCAL_IMPL_H
#define ELASTIC_EXEC_LOCAL_IMPL_H

#include <sys/types.h>

#include "agent_backend.h"
#include "local.h"

struct binding_plan;
struct elastic_agent_spec;
struct ostream;

struct lworker {
    pid_t pid;
    int pidfd;
    int reaped;
    struct ostream *out;
    struct ostream *err;
    const char *cwd; /* a spawned worker's directory (borrowed up to its
                        fork); NULL: the agent's */
};

/* A worker of an earlier attempt, signalled and not yet gone. */
struct ldrain {
    struct ldrain *next;
    struct local *l;
    pid_t pid; /* and its process group */
    int index; /* its worker index in its attempt */
    int pidfd;
    int reaped;
    int killed; /* SIGKILL sent at the deadline */
    int rank;
    int local_rank;
    int attempt;
    double t_signal; /* CLOCK_MONOTONIC */
    double deadline; /* SIGKILL then */
    double t_reaped;
    struct ostream *out;
    struct ostream *err;
};

struct local {
    elastic_agent_t *agent;
    const struct elastic_agent_spec *spec; /* the agent's (it outlives us) */
    struct lworker *lw;
    int n;                 /* workers: the slots, then the ones spawned meanwhile */
    int nslots;            /* the workers every start starts (--nproc-per-node) */
    int lwcap;             /* records allocated in lw */
    struct ldrain *drains; /* stopped workers not yet reaped and swept */
    int no_detach;         /* the wire-up asked to wait for stopped workers */
    struct guardian *guard;
    int dup_out_fd; /* filtered_stdout.log of this attempt */
    int dup_err_fd;
    pid_t agent_pid;
    struct binding_plan *plan; /* this start's placement; NULL = no binding */
    char note[1024];           /* the binding note logged last */
    struct local_wireup wu;    /* what a wire-up adds (all NULL: nothing) */
};

/* ---- local.c ---- */

/* Reap workers that exited and, as a subreaper, orphans (drained ones
 * included). */
void local_reap (struct local *l);

/* Copy what a worker's output stream holds (a watch callback; arg is the
 * struct ostream ** to close at its end). */
void local_on_output (elastic_agent_t *agent, int fd, int revents, void *arg);

/* ---- drain.c ---- */

/* 1 if signum ends every process in the live workers' groups by its
 * default action: none of them blocks, ignores or catches it. */
int drain_stops_promptly (struct local *l, int signum);

/* Move every live worker (already signalled) to the drain list, but for
 * those the core counts as failed.  Returns how many were moved. */
int drain_detach_live (struct local *l, double timeout);

/* Reap drained workers that exited (waitpid on each). */
void drain_reap (struct local *l);

/* 1 if pid (reaped with status) was a drained worker, now reported. */
int drain_reaped_pid (struct local *l, pid_t pid, int status);

/* SIGKILL drained workers past their deadline; forget those whose group is
 * empty. */
void drain_check (struct local *l);

/* Wait for the drain list to empty (SIGKILL at the deadlines). */
void drain_finish (struct local *l);

/* Free a drain record (its watches, streams, guardian entry). */
void drain_free (struct local *l, struct ldrain *d);

#endif /* ELASTIC_EXEC_LOCAL_IMPL_H */
