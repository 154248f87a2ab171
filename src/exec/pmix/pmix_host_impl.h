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
    struct pmixhost_job *family;       /* the job whose spawns this one's are
                                          (itself for a job nobody spawned) */
    struct pmixhost_spawn *spawned_by; /* NULL: not spawned */
    /* spawned into a mesh (pmixhost_job_opts.spawn_host) */
    int spawn_node; /* -1: not */
    char spawn_host[256];
    int remote;     /* its ranks are another node's */
    int has_parent; /* parent is set (no spawned_by here) */
    pmix_proc_t parent;
};

/* A PMIx_Spawn request (pmix_host.h); on h->spawns. */
struct pmixhost_spawn {
    struct pmixhost_spawn *next;
    struct pmixhost *h;
    struct pmixhost_spawn_req req;
    pmix_proc_t requestor;
    int state;                  /* enum pmixhost_spawn_state */
    struct pmixhost_job *child; /* once launched */
    pmix_spawn_cbfunc_t cbfunc; /* until answered */
    void *cbdata;
};

/* Published data (pmix_pubsub.c); on h->pubs. */
struct pub_item {
    struct pub_item *next;
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_proc_t owner;
    pmix_value_t *value;
    int first_read; /* PMIX_PERSIST_FIRST_READ */
};

/* A lookup waiting for its keys (PMIX_WAIT); on h->waits. */
struct lookup_wait {
    struct lookup_wait *next;
    pmix_proc_t proc;
    char **keys;     /* NULL-terminated copy */
    double deadline; /* pmixhost_now (); 0: none */
    pmix_lookup_cbfunc_t cbfunc;
    void *cbdata;
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
    struct pmixhost_spawn *spawns;
    struct pub_item *pubs;
    int npubs;
    struct lookup_wait *waits;
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

/* ---- pmix_pubsub.c: publish, lookup, unpublish (PMIx's thread) ---- */

pmix_status_t pmixhost_publish (struct pmixhost *h,
                                const pmix_proc_t *proc,
                                const pmix_info_t info[],
                                size_t ninfo);
pmix_status_t pmixhost_lookup (struct pmixhost *h,
                               const pmix_proc_t *proc,
                               char **keys,
                               const pmix_info_t info[],
                               size_t ninfo,
                               pmix_lookup_cbfunc_t cbfunc,
                               void *cbdata);
pmix_status_t
pmixhost_unpublish (struct pmixhost *h, const pmix_proc_t *proc, char **keys);

/* Fail the waiting lookups of proc (rank PMIX_RANK_WILDCARD: of its whole
 * namespace) with status, and drop what they published when `drop`
 * (lock NOT held: calls PMIx back). */
void pubsub_forget (struct pmixhost *h,
                    const pmix_proc_t *proc,
                    pmix_status_t status,
                    int drop);

/* Free every record (server teardown, no PMIx callbacks). */
void pubsub_free_all (struct pmixhost *h);

/* ---- pmix_spawn.c ---- */

/* Queue a PMIx_Spawn request of proc (PMIx's thread).  Returns
 * PMIX_SUCCESS (answered later) or an error (cbfunc not called). */
pmix_status_t pmixhost_spawn_new (struct pmixhost *h,
                                  const pmix_proc_t *proc,
                                  const pmix_info_t job_info[],
                                  size_t ninfo,
                                  const pmix_app_t apps[],
                                  size_t napps,
                                  pmix_spawn_cbfunc_t cbfunc,
                                  void *cbdata);

/* Answer PMIx_Spawn (once; the lock NOT held): PMIX_SUCCESS with the
 * children's namespace, else the error. */
void pmixhost_spawn_answer (struct pmixhost_spawn *sp, pmix_status_t status);

/* CLOCK_MONOTONIC in seconds. */
double pmixhost_now (void);

/* Queue an event and wake the caller's loop (lock held). */
void pmixhost_push_event (struct pmixhost *h,
                          struct pmixhost_job *job,
                          int type,
                          int rank,
                          int status,
                          const char *msg);

/* pmixhost_push_event for a spawn's event (lock held). */
void pmixhost_push_spawn_event (struct pmixhost *h,
                                struct pmixhost_job *job,
                                int type,
                                struct pmixhost_spawn *sp);

/* The job of a namespace, or NULL (lock held). */
struct pmixhost_job *pmixhost_find_job (struct pmixhost *h, const char *nspace);

/* The state of proc and, in *jobp, its job; NULL if unknown (lock held). */
struct rank_state *pmixhost_find_rank (struct pmixhost *h,
                                       const pmix_proc_t *proc,
                                       struct pmixhost_job **jobp);

#endif /* ELASTIC_EXEC_PMIX_HOST_IMPL_H */
