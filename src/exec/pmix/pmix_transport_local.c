/* pmix_transport_local.c - the single-node transport of the hosted PMIx server */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "pmix_transport.h"

/* Every participant is local and PMIx already collected their data: the
 * node's contribution is the whole result.  PMIx copies it in the callback
 * (its modex callback thread-shifts), so it can be handed back at once. */
static pmix_status_t local_fence (void *ctx,
                                  const pmix_proc_t procs[],
                                  size_t nprocs,
                                  const pmix_info_t info[],
                                  size_t ninfo,
                                  char *data,
                                  size_t ndata,
                                  pmix_modex_cbfunc_t cbfunc,
                                  void *cbdata)
{
    if (cbfunc)
        cbfunc (PMIX_SUCCESS, data, ndata, cbdata, NULL, NULL);
    return PMIX_SUCCESS;
}

/* PMIx answers requests for local ranks itself; anything asked here is a
 * rank no server of this job hosts. */
static pmix_status_t local_direct_modex (void *ctx,
                                         const pmix_proc_t *proc,
                                         const pmix_info_t info[],
                                         size_t ninfo,
                                         pmix_modex_cbfunc_t cbfunc,
                                         void *cbdata)
{
    return PMIX_ERR_NOT_FOUND;
}

static int local_failure (void *ctx, const char *nspace, int rank, pmix_status_t status)
{
    return 0;
}

/* PMIx already delivered the event to the local ranks in its range. */
static pmix_status_t local_notify (void *ctx,
                                   pmix_status_t code,
                                   const pmix_proc_t *source,
                                   pmix_data_range_t range,
                                   pmix_info_t info[],
                                   size_t ninfo,
                                   pmix_op_cbfunc_t cbfunc,
                                   void *cbdata)
{
    return PMIX_OPERATION_SUCCEEDED;
}

const struct pmixhost_transport pmixhost_transport_local = {
    .name = "local",
    .fence = local_fence,
    .direct_modex = local_direct_modex,
    .failure = local_failure,
    .notify = local_notify,
    .destroy = NULL,
};
