/* pmix_host_impl.h - the hosted PMIx server's internals, shared by
 * pmix_host.c (the caller's side) and pmix_upcalls.c (PMIx's side)
 *
 * Everything below is guarded by pmixhost->lock.  Not for other modules.
 */
#ifndef ELASTIC_EXEC_PMIX_HOST_IMPL_H
#define ELASTIC_EXEC_PMIX_HOST_IMPL_H

#include <limits.h>
#include <pthread.h>
#include <sys/types.h>

#include <pmix_server.h>

#include "pmix_host.h"
#include "pmix_nodelay.h"

struct rank_state {
    int local; /* hosted by this server (else on another node) */
    pid_t pid;
    int connected;
    int finalized;
    int lost;
    int exited;
    int wstatus;
    int deregistered;
    char **env;
};

struct pmixhost_job {
    struct pmixhost *h;
    struct pmixhost_job *next;
    char nspace[PMIX_MAX_NSLEN + 1];
    char dir[PATH_MAX + PMIX_MAX_NSLEN + 2];
    int nranks; /* the job's ranks, on every node */
    int nlocal; /* of which this server hosts */
    int nnodes;
    int node;       /* this server's node */
    int registered; /* PMIx knows the namespace */
    int init_fences;
    int fences;
    int initialized;
    int init_broken; /* an init fence completed without every rank */
    int oversubscribed;
    int aborting;
    int abort_rank;
    int abort_status;
    char abort_msg[256];
    int stopping;
    int restart_needed;
    int restart_rank;
    int failed;
    int nexited;
    int nderegistered;
    struct rank_state *r;
};

struct event_item {
    struct pmixhost_event ev;
    struct event_item *next;
};

struct pmixhost {
    pthread_mutex_t lock;
    int pipefd[2];
    struct event_item *head, *tail;
    struct pmixhost_job *jobs;
    char dir[PATH_MAX];
    pmix_proc_t myproc;
    const struct pmixhost_transport *tp;
    void *tp_ctx;
    int pmix_up;
    int tainted; /* a namespace was left registered (see job_may_be_torn) */
    size_t lost_ref;
    int lost_registered;
    struct nodelay_set listeners;
};

/* The one server of this process (PMIx upcalls carry no context).  Read
 * it only through pmixhost_get/put outside of create and destroy. */
extern struct pmixhost *pmixhost_self;

/* An upcall's hold on the server: NULL once pmixhost_destroy has begun to
 * take it down; else the server, which is not freed before the matching
 * pmixhost_put.  (PMIx's progress thread can outlive the server where
 * PMIx_server_finalize is skipped: see job_may_be_torn.) */
struct pmixhost *pmixhost_get (void);
void pmixhost_put (struct pmixhost *h);

/* The server module handed to PMIx_server_init (pmix_upcalls.c). */
extern pmix_server_module_t pmixhost_module;

/* Handler for PMIx's PMIX_ERR_LOST_CONNECTION events (pmix_upcalls.c). */
void pmixhost_lost_connection (size_t id,
                               pmix_status_t status,
                               const pmix_proc_t *source,
                               pmix_info_t info[],
                               size_t ninfo,
                               pmix_info_t *results,
                               size_t nresults,
                               pmix_event_notification_cbfunc_fn_t cbfunc,
                               void *cbdata);

/* CLOCK_MONOTONIC in seconds. */
double pmixhost_now (void);

/* Queue an event and wake the caller's loop (lock held). */
void pmixhost_push_event (struct pmixhost *h,
                          struct pmixhost_job *job,
                          int type,
                          int rank,
                          int status,
                          const char *msg);

/* The job of a namespace, or NULL (lock held). */
struct pmixhost_job *pmixhost_find_job (struct pmixhost *h, const char *nspace);

/* The state of proc and, in *jobp, its job; NULL if unknown (lock held). */
struct rank_state *pmixhost_find_rank (struct pmixhost *h,
                                       const pmix_proc_t *proc,
                                       struct pmixhost_job **jobp);

#endif /* ELASTIC_EXEC_PMIX_HOST_IMPL_H */
