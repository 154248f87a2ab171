/* pmix_upcalls.c - what the PMIx library calls in the hosted server
 *
 * The server module's functions and the lost-connection event handler.  They
 * run in PMIx's progress thread: each records what happened under the
 * server's mutex, queues an event for the caller's loop and returns at once;
 * fences, direct modex requests and client events go through the transport
 * (pmix_transport.h).  None makes a blocking PMIx call.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>
#include <pmix_server.h>

#include "pmix_host.h"
#include "pmix_host_impl.h"
#include "pmix_transport.h"

/* Set a rank's connected, finalized or lost flag once, with its event. */
static void rank_mark (const pmix_proc_t *proc, int event)
{
    struct pmixhost *h = pmixhost_get ();
    struct pmixhost_job *job;
    struct rank_state *r;
    int *flag;

    if (!h)
        return;
    pthread_mutex_lock (&h->lock);
    if ((r = pmixhost_find_rank (h, proc, &job))) {
        flag = event == PMIXHOST_EV_CONNECTED   ? &r->connected
               : event == PMIXHOST_EV_FINALIZED ? &r->finalized
                                                : &r->lost;
        if (!*flag) {
            *flag = 1;
            pmixhost_push_event (h, job, event, (int)proc->rank, 0, NULL);
        }
    }
    pthread_mutex_unlock (&h->lock);
    pmixhost_put (h);
}

static pmix_status_t up_client_connected (const pmix_proc_t *proc,
                                          void *server_object,
                                          pmix_op_cbfunc_t cbfunc,
                                          void *cbdata)
{
    rank_mark (proc, PMIXHOST_EV_CONNECTED);
    return cbfunc ? PMIX_OPERATION_SUCCEEDED : PMIX_SUCCESS;
}

static pmix_status_t up_client_finalized (const pmix_proc_t *proc,
                                          void *server_object,
                                          pmix_op_cbfunc_t cbfunc,
                                          void *cbdata)
{
    rank_mark (proc, PMIXHOST_EV_FINALIZED);
    return PMIX_OPERATION_SUCCEEDED;
}

/* MPI_Abort: mark the job aborting before the rank is released (it _exits
 * right after), so its exit and the kills that follow send no fault event;
 * the caller kills every rank when it reads the event. */
static pmix_status_t up_abort (const pmix_proc_t *proc,
                               void *server_object,
                               int status,
                               const char msg[],
                               pmix_proc_t procs[],
                               size_t nprocs,
                               pmix_op_cbfunc_t cbfunc,
                               void *cbdata)
{
    struct pmixhost *h = pmixhost_get ();
    struct pmixhost_job *job;
    struct rank_state *r;

    if (h) {
        pthread_mutex_lock (&h->lock);
        if ((r = pmixhost_find_rank (h, proc, &job)) && !job->aborting) {
            job->aborting = 1;
            job->abort_rank = (int)proc->rank;
            job->abort_status = status;
            snprintf (job->abort_msg, sizeof (job->abort_msg), "%s", msg ? msg : "");
            pmixhost_push_event (h, job, PMIXHOST_EV_ABORT, (int)proc->rank, status, msg);
        }
        pthread_mutex_unlock (&h->lock);
        pmixhost_put (h);
    }
    if (cbfunc)
        cbfunc (PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

/* A fence in flight: completion is counted before PMIx is called back. */
struct fence_op {
    char nspace[PMIX_MAX_NSLEN + 1];
    int whole;   /* every rank of the namespace takes part */
    int partial; /* PMIx completed it locally without a dead rank */
    pmix_modex_cbfunc_t cbfunc;
    void *cbdata;
};

static void fence_done (pmix_status_t status,
                        const char *data,
                        size_t ndata,
                        void *cbdata,
                        pmix_release_cbfunc_t relfn,
                        void *relcbdata)
{
    struct fence_op *op = cbdata;
    struct pmixhost *h = pmixhost_get ();
    struct pmixhost_job *job;

    if (h && op->whole) {
        pthread_mutex_lock (&h->lock);
        if ((job = pmixhost_find_job (h, op->nspace)) && !job->initialized) {
            if (status != PMIX_SUCCESS || op->partial)
                job->init_broken = 1;
            else if (++job->fences >= job->init_fences && !job->init_broken) {
                job->initialized = 1;
                pmixhost_push_event (h, job, PMIXHOST_EV_INITIALIZED, -1, 0, NULL);
            }
        } else if (job && status == PMIX_SUCCESS)
            job->fences++;
        pthread_mutex_unlock (&h->lock);
    }
    pmixhost_put (h);
    op->cbfunc (status, data, ndata, op->cbdata, relfn, relcbdata);
    free (op);
}

static pmix_status_t up_fence_nb (const pmix_proc_t procs[],
                                  size_t nprocs,
                                  const pmix_info_t info[],
                                  size_t ninfo,
                                  char *data,
                                  size_t ndata,
                                  pmix_modex_cbfunc_t cbfunc,
                                  void *cbdata)
{
    struct pmixhost *h;
    struct fence_op *op;
    pmix_status_t rc;

    if (!cbfunc)
        return PMIX_ERR_BAD_PARAM;
    if (!(h = pmixhost_get ()))
        return PMIX_ERR_BAD_PARAM;
    if (!(op = calloc (1, sizeof (*op)))) {
        pmixhost_put (h);
        return PMIX_ERR_NOMEM;
    }
    if (nprocs > 0) {
        PMIX_LOAD_NSPACE (op->nspace, procs[0].nspace);
        op->whole = nprocs == 1 && procs[0].rank == PMIX_RANK_WILDCARD;
    }
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY (&info[i], PMIX_LOCAL_COLLECTIVE_STATUS) &&
            info[i].value.type == PMIX_STATUS &&
            info[i].value.data.status != PMIX_SUCCESS)
            op->partial = 1;
    op->cbfunc = cbfunc;
    op->cbdata = cbdata;
    rc =
        h->tp->fence (h->tp_ctx, procs, nprocs, info, ninfo, data, ndata, fence_done, op);
    pmixhost_put (h);
    if (rc != PMIX_SUCCESS) {
        free (op);
        if (rc == PMIX_OPERATION_SUCCEEDED)
            rc = PMIX_ERR_NOT_SUPPORTED; /* a fence must hand data back */
    }
    return rc;
}

static pmix_status_t up_direct_modex (const pmix_proc_t *proc,
                                      const pmix_info_t info[],
                                      size_t ninfo,
                                      pmix_modex_cbfunc_t cbfunc,
                                      void *cbdata)
{
    struct pmixhost *h = pmixhost_get ();
    pmix_status_t rc;

    if (!h)
        return PMIX_ERR_NOT_FOUND;
    rc = h->tp->direct_modex (h->tp_ctx, proc, info, ninfo, cbfunc, cbdata);
    pmixhost_put (h);
    return rc;
}

static pmix_status_t up_notify_event (pmix_status_t code,
                                      const pmix_proc_t *source,
                                      pmix_data_range_t range,
                                      pmix_info_t info[],
                                      size_t ninfo,
                                      pmix_op_cbfunc_t cbfunc,
                                      void *cbdata)
{
    struct pmixhost *h = pmixhost_get ();
    pmix_status_t rc;

    if (!h)
        return PMIX_OPERATION_SUCCEEDED;
    rc = h->tp->notify (h->tp_ctx, code, source, range, info, ninfo, cbfunc, cbdata);
    pmixhost_put (h);
    return rc;
}

/* PMIx delivers events to the ranks that registered for them; there are
 * no host-level (environmental) events to subscribe to. */
static pmix_status_t up_register_events (pmix_status_t *codes,
                                         size_t ncodes,
                                         const pmix_info_t info[],
                                         size_t ninfo,
                                         pmix_op_cbfunc_t cbfunc,
                                         void *cbdata)
{
    return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t up_deregister_events (pmix_status_t *codes,
                                           size_t ncodes,
                                           pmix_op_cbfunc_t cbfunc,
                                           void *cbdata)
{
    return PMIX_OPERATION_SUCCEEDED;
}

/* Present so PMIx accepts (and executes itself) the cleanup registrations
 * Open MPI makes for its /dev/shm segments; anything else is refused. */
static pmix_status_t up_job_control (const pmix_proc_t *requestor,
                                     const pmix_proc_t targets[],
                                     size_t ntargets,
                                     const pmix_info_t directives[],
                                     size_t ndirs,
                                     pmix_info_cbfunc_t cbfunc,
                                     void *cbdata)
{
    return PMIX_ERR_NOT_SUPPORTED;
}

/* ---- publish, lookup, spawn, connect (MPI_Comm_spawn) ---------------------- */

static pmix_status_t up_publish (const pmix_proc_t *proc,
                                 const pmix_info_t info[],
                                 size_t ninfo,
                                 pmix_op_cbfunc_t cbfunc,
                                 void *cbdata)
{
    struct pmixhost *h = pmixhost_get ();
    pmix_status_t rc;

    if (!h)
        return PMIX_ERR_NOT_SUPPORTED;
    rc = pmixhost_publish (h, proc, info, ninfo);
    pmixhost_put (h);
    if (rc != PMIX_SUCCESS)
        return rc;
    /* answered here: PMIX_OPERATION_SUCCEEDED would reach the client as
     * an error code in PMIx 4.2's publish path */
    if (cbfunc)
        cbfunc (PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

static pmix_status_t up_lookup (const pmix_proc_t *proc,
                                char **keys,
                                const pmix_info_t info[],
                                size_t ninfo,
                                pmix_lookup_cbfunc_t cbfunc,
                                void *cbdata)
{
    struct pmixhost *h = pmixhost_get ();
    pmix_status_t rc;

    if (!h)
        return PMIX_ERR_NOT_FOUND;
    rc = pmixhost_lookup (h, proc, keys, info, ninfo, cbfunc, cbdata);
    pmixhost_put (h);
    return rc;
}

static pmix_status_t up_unpublish (const pmix_proc_t *proc,
                                   char **keys,
                                   const pmix_info_t info[],
                                   size_t ninfo,
                                   pmix_op_cbfunc_t cbfunc,
                                   void *cbdata)
{
    struct pmixhost *h = pmixhost_get ();

    if (h) {
        pmixhost_unpublish (h, proc, keys);
        pmixhost_put (h);
    }
    if (cbfunc)
        cbfunc (PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

static pmix_status_t up_spawn (const pmix_proc_t *proc,
                               const pmix_info_t job_info[],
                               size_t ninfo,
                               const pmix_app_t apps[],
                               size_t napps,
                               pmix_spawn_cbfunc_t cbfunc,
                               void *cbdata)
{
    struct pmixhost *h = pmixhost_get ();
    pmix_status_t rc;

    if (!h)
        return PMIX_ERR_NOT_SUPPORTED;
    rc = pmixhost_spawn_new (h, proc, job_info, ninfo, apps, napps, cbfunc, cbdata);
    pmixhost_put (h);
    return rc;
}

/* PMIX_ERR_PROC_TERM_WO_SYNC if a participant of a connect or disconnect is
 * known to have exited, else PMIX_SUCCESS (every participant is a client
 * of this server: nothing to exchange with anyone else). */
static pmix_status_t participants_alive (const pmix_proc_t procs[], size_t nprocs)
{
    struct pmixhost *h = pmixhost_get ();
    pmix_status_t rc = PMIX_SUCCESS;
    struct pmixhost_job *job;
    struct rank_state *r;

    if (!h)
        return PMIX_ERR_NOT_SUPPORTED;
    pthread_mutex_lock (&h->lock);
    for (size_t i = 0; i < nprocs && rc == PMIX_SUCCESS; i++) {
        if (procs[i].rank == PMIX_RANK_WILDCARD) {
            if ((job = pmixhost_find_job (h, procs[i].nspace)))
                for (int k = 0; k < job->nranks; k++)
                    if (job->r[k].exited && !job->r[k].finalized)
                        rc = PMIX_ERR_PROC_TERM_WO_SYNC;
        } else if ((r = pmixhost_find_rank (h, &procs[i], &job)) && r->exited &&
                   !r->finalized)
            rc = PMIX_ERR_PROC_TERM_WO_SYNC;
    }
    pthread_mutex_unlock (&h->lock);
    pmixhost_put (h);
    return rc;
}

static pmix_status_t up_connect (const pmix_proc_t procs[],
                                 size_t nprocs,
                                 const pmix_info_t info[],
                                 size_t ninfo,
                                 pmix_op_cbfunc_t cbfunc,
                                 void *cbdata)
{
    pmix_status_t rc = participants_alive (procs, nprocs);

    return rc == PMIX_SUCCESS ? PMIX_OPERATION_SUCCEEDED : rc;
}

static pmix_status_t up_disconnect (const pmix_proc_t procs[],
                                    size_t nprocs,
                                    const pmix_info_t info[],
                                    size_t ninfo,
                                    pmix_op_cbfunc_t cbfunc,
                                    void *cbdata)
{
    /* a disconnect from dead peers still lets the living go */
    return PMIX_OPERATION_SUCCEEDED;
}

pmix_server_module_t pmixhost_module = {
    .client_connected = up_client_connected,
    .client_finalized = up_client_finalized,
    .abort = up_abort,
    .fence_nb = up_fence_nb,
    .direct_modex = up_direct_modex,
    .register_events = up_register_events,
    .deregister_events = up_deregister_events,
    .notify_event = up_notify_event,
    .job_control = up_job_control,
    .publish = up_publish,
    .lookup = up_lookup,
    .unpublish = up_unpublish,
    .spawn = up_spawn,
    .connect = up_connect,
    .disconnect = up_disconnect,
};

/* PMIx's own report that a client vanished without finalizing. */
void pmixhost_lost_connection (size_t id,
                               pmix_status_t status,
                               const pmix_proc_t *source,
                               pmix_info_t info[],
                               size_t ninfo,
                               pmix_info_t *results,
                               size_t nresults,
                               pmix_event_notification_cbfunc_fn_t cbfunc,
                               void *cbdata)
{
    rank_mark (source, PMIXHOST_EV_LOST);
    if (cbfunc)
        cbfunc (PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}
