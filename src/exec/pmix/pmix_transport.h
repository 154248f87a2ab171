/* pmix_transport.h - how the hosted PMIx server reaches the other nodes
 *
 * On one node everything a PMIx server does is local.  Across nodes three
 * paths leave the node, and they all go through this table so a cross-node
 * transport (the agents' own connections) can be plugged in later without
 * touching pmix_host.c:
 *
 *   fence         an allgather among the servers of the job's nodes: each
 *                 contributes its local ranks' data and gets everyone's.
 *                 It must leave out dead ranks and dead servers (PRRTE's
 *                 does not, which is why a lost node aborts a PRRTE job).
 *   direct_modex  fetch the data of a rank on another node from the
 *                 server that hosts it (PMIx_server_dmodex_request there).
 *   failure       a local rank died after MPI_Init: tell the other
 *                 servers, which call pmixhost_job_remote_failure() so
 *                 their ranks get the same fault event.  A lost node is a
 *                 transport matter too: its heartbeat stops, and the
 *                 transport reports each of its ranks the same way.
 *   notify        a client's event whose range reaches beyond this node.
 *
 * fence, direct_modex and notify are called from PMIx's progress thread
 * and must not block; they complete through the PMIx callback they are
 * given (which may be called from any thread, before or after they return),
 * exactly like the PMIx server module functions they mirror, and return
 * PMIX_SUCCESS (callback pending), PMIX_OPERATION_SUCCEEDED (done, callback
 * not called) or an error (callback not called).  failure is called from
 * the caller's thread and returns 0 or -1.
 */
#ifndef ELASTIC_EXEC_PMIX_TRANSPORT_H
#define ELASTIC_EXEC_PMIX_TRANSPORT_H

#include <pmix_server.h>

struct pmixhost_transport {
    const char *name;
    pmix_status_t (*fence) (void *ctx,
                            const pmix_proc_t procs[],
                            size_t nprocs,
                            const pmix_info_t info[],
                            size_t ninfo,
                            char *data,
                            size_t ndata,
                            pmix_modex_cbfunc_t cbfunc,
                            void *cbdata);
    pmix_status_t (*direct_modex) (void *ctx,
                                   const pmix_proc_t *proc,
                                   const pmix_info_t info[],
                                   size_t ninfo,
                                   pmix_modex_cbfunc_t cbfunc,
                                   void *cbdata);
    int (*failure) (void *ctx, const char *nspace, int rank, pmix_status_t status);
    pmix_status_t (*notify) (void *ctx,
                             pmix_status_t code,
                             const pmix_proc_t *source,
                             pmix_data_range_t range,
                             pmix_info_t info[],
                             size_t ninfo,
                             pmix_op_cbfunc_t cbfunc,
                             void *cbdata);
    /* data a rank of this node published (PMIx_Publish, stored here):
     * hand it to the other nodes' servers, whose ranks may look it up (a
     * spawn's other side).  May be NULL (one node). */
    void (*publish) (void *ctx,
                     const pmix_proc_t *proc,
                     const pmix_info_t info[],
                     size_t ninfo);
    void (*destroy) (void *ctx); /* may be NULL */
};

/* Store what a rank of another node published (the other end of
 * struct pmixhost_transport.publish), as if published here, without
 * handing it on.  Any thread.  PMIX_ERR_INIT when no server runs. */
pmix_status_t
pmixhost_publish_peer (const pmix_proc_t *proc, const pmix_info_t info[], size_t ninfo);

/* The single-node transport: a fence hands this node's data back at once
 * (every rank is here), a direct modex finds nothing (never asked on one
 * node), a failure or an event has nobody else to reach. */
extern const struct pmixhost_transport pmixhost_transport_local;

#endif /* ELASTIC_EXEC_PMIX_TRANSPORT_H */
