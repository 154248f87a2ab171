/* pmix_jobinfo.c - what a namespace tells Open MPI about its job */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "pmix_jobinfo.h"

/* Add key=value to list; on failure remember the first failing key. */
struct builder {
    void *list;
    const char *bad_key;
    pmix_status_t rc;
};

static void
add (struct builder *b, void *list, const char *key, const void *val, pmix_data_type_t t)
{
    pmix_status_t rc;

    if (b->bad_key)
        return;
    if ((rc = PMIx_Info_list_add (list, key, val, t)) != PMIX_SUCCESS) {
        b->bad_key = key;
        b->rc = rc;
    }
}

/* Close sub-list `sub` into an array stored under key in `list`. */
static void add_array (struct builder *b, void *list, const char *key, void *sub)
{
    pmix_data_array_t darr;
    pmix_status_t rc;

    if (!b->bad_key) {
        memset (&darr, 0, sizeof (darr));
        if ((rc = PMIx_Info_list_convert (sub, &darr)) != PMIX_SUCCESS) {
            b->bad_key = key;
            b->rc = rc;
        } else {
            add (b, list, key, &darr, PMIX_DATA_ARRAY);
            PMIx_Data_array_destruct (&darr);
        }
    }
    PMIx_Info_list_release (sub);
}

/* "0,1,...,n-1" (malloc'ed) */
static char *rank_list (int n)
{
    size_t len = (size_t)n * 7 + 1;
    char *s = malloc (len);
    size_t off = 0;

    if (!s)
        return NULL;
    s[0] = '\0';
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf (s + off, len - off, i ? ",%d" : "%d", i);
    return s;
}

int jobinfo_build (const struct jobinfo_params *p,
                   pmix_info_t **info,
                   size_t *ninfo,
                   elastic_error_t *err)
{
    struct builder b = {0};
    uint32_t n = (uint32_t)p->nranks, zero32 = 0, one32 = 1;
    pmix_rank_t rank0 = 0;
    bool osub = p->oversubscribed ? true : false;
    char *peers = NULL, *nodemap = NULL, *procmap = NULL;
    pmix_data_array_t darr;
    pmix_status_t rc;
    void *sub;

    *info = NULL;
    *ninfo = 0;
    if (!(peers = rank_list (p->nranks))) {
        errprintf (err, "out of memory building the job data");
        return -1;
    }
    if ((rc = PMIx_generate_regex (p->hostname, &nodemap)) != PMIX_SUCCESS ||
        (rc = PMIx_generate_ppn (peers, &procmap)) != PMIX_SUCCESS) {
        errprintf (err,
                   "PMIx cannot encode the node or process map (%s)",
                   PMIx_Error_string (rc));
        goto error;
    }
    if (!(b.list = PMIx_Info_list_start ())) {
        errprintf (err, "out of memory building the job data");
        goto error;
    }

    /* job level */
    add (&b, b.list, PMIX_JOBID, p->nspace, PMIX_STRING);
    add (&b, b.list, PMIX_UNIV_SIZE, &n, PMIX_UINT32);
    add (&b, b.list, PMIX_JOB_SIZE, &n, PMIX_UINT32);
    add (&b, b.list, PMIX_MAX_PROCS, &n, PMIX_UINT32);
    add (&b, b.list, PMIX_JOB_NUM_APPS, &one32, PMIX_UINT32);
    add (&b, b.list, PMIX_NUM_NODES, &one32, PMIX_UINT32);
    add (&b, b.list, PMIX_NODE_MAP, nodemap, PMIX_REGEX);
    add (&b, b.list, PMIX_PROC_MAP, procmap, PMIX_REGEX);
    add (&b, b.list, PMIX_TMPDIR, p->tmpdir, PMIX_STRING);
    add (&b, b.list, PMIX_NSDIR, p->nsdir, PMIX_STRING);
    add (&b, b.list, PMIX_LOCAL_PEERS, peers, PMIX_STRING);
    add (&b, b.list, PMIX_LOCAL_SIZE, &n, PMIX_UINT32);
    add (&b, b.list, PMIX_NODE_OVERSUBSCRIBED, &osub, PMIX_BOOL);

    /* the app */
    if ((sub = PMIx_Info_list_start ())) {
        add (&b, sub, PMIX_APPNUM, &zero32, PMIX_UINT32);
        add (&b, sub, PMIX_APP_SIZE, &n, PMIX_UINT32);
        add (&b, sub, PMIX_APPLDR, &rank0, PMIX_PROC_RANK);
        if (p->wdir)
            add (&b, sub, PMIX_WDIR, p->wdir, PMIX_STRING);
        add_array (&b, b.list, PMIX_APP_INFO_ARRAY, sub);
    }

    /* the node */
    if ((sub = PMIx_Info_list_start ())) {
        add (&b, sub, PMIX_NODEID, &zero32, PMIX_UINT32);
        add (&b, sub, PMIX_HOSTNAME, p->hostname, PMIX_STRING);
        add (&b, sub, PMIX_LOCAL_PEERS, peers, PMIX_STRING);
        add (&b, sub, PMIX_LOCAL_SIZE, &n, PMIX_UINT32);
        add (&b, sub, PMIX_NODE_SIZE, &n, PMIX_UINT32);
        add (&b, sub, PMIX_LOCALLDR, &rank0, PMIX_PROC_RANK);
        add (&b, sub, PMIX_NODE_OVERSUBSCRIBED, &osub, PMIX_BOOL);
        add (&b, sub, PMIX_TMPDIR, p->tmpdir, PMIX_STRING);
        add_array (&b, b.list, PMIX_NODE_INFO_ARRAY, sub);
    }

    /* each rank: PMIX_RANK must come first */
    for (int r = 0; r < p->nranks && !b.bad_key; r++) {
        pmix_rank_t pr = (pmix_rank_t)r;
        uint16_t lr = (uint16_t)r;
        char procdir[4200];

        snprintf (procdir, sizeof (procdir), "%s/%d", p->nsdir, r);
        if (!(sub = PMIx_Info_list_start ()))
            break;
        add (&b, sub, PMIX_RANK, &pr, PMIX_PROC_RANK);
        add (&b, sub, PMIX_APPNUM, &zero32, PMIX_UINT32);
        add (&b, sub, PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
        add (&b, sub, PMIX_NODE_RANK, &lr, PMIX_UINT16);
        add (&b, sub, PMIX_NODEID, &zero32, PMIX_UINT32);
        add (&b, sub, PMIX_GLOBAL_RANK, &pr, PMIX_PROC_RANK);
        add (&b, sub, PMIX_APP_RANK, &pr, PMIX_PROC_RANK);
        add (&b, sub, PMIX_HOSTNAME, p->hostname, PMIX_STRING);
        add (&b, sub, PMIX_PROCDIR, procdir, PMIX_STRING);
        add_array (&b, b.list, PMIX_PROC_INFO_ARRAY, sub);
    }

    if (b.bad_key) {
        errprintf (
            err, "PMIx refused job data %s (%s)", b.bad_key, PMIx_Error_string (b.rc));
        goto error;
    }
    memset (&darr, 0, sizeof (darr));
    if ((rc = PMIx_Info_list_convert (b.list, &darr)) != PMIX_SUCCESS) {
        errprintf (err, "PMIx cannot assemble the job data (%s)", PMIx_Error_string (rc));
        goto error;
    }
    *info = darr.array;
    *ninfo = darr.size;
    PMIx_Info_list_release (b.list);
    free (peers);
    free (nodemap);
    free (procmap);
    return 0;
error:
    if (b.list)
        PMIx_Info_list_release (b.list);
    free (peers);
    free (nodemap);
    free (procmap);
    return -1;
}

void jobinfo_free (pmix_info_t *info, size_t ninfo)
{
    if (info)
        PMIX_INFO_FREE (info, ninfo);
}
