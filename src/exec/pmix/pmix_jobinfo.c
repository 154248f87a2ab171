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
#include "exec/jobmap.h"
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

/* Every rank on one node: this one (today's one-node array), or another
 * one (p->remote: a spawned namespace of a mesh, seen from elsewhere). */
static int build_one_node (const struct jobinfo_params *p,
                           pmix_info_t **info,
                           size_t *ninfo,
                           elastic_error_t *err)
{
    struct builder b = {0};
    uint32_t n = (uint32_t)p->nranks, zero32 = 0, one32 = 1;
    uint32_t nid = (uint32_t)(p->node_id > 0 ? p->node_id : 0);
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
    if (!p->remote) {
        add (&b, b.list, PMIX_LOCAL_PEERS, peers, PMIX_STRING);
        add (&b, b.list, PMIX_LOCAL_SIZE, &n, PMIX_UINT32);
        add (&b, b.list, PMIX_NODE_OVERSUBSCRIBED, &osub, PMIX_BOOL);
    }
    if (p->parent) {
        bool yes = true;
        add (&b, b.list, PMIX_SPAWNED, &yes, PMIX_BOOL);
        add (&b, b.list, PMIX_PARENT_ID, p->parent, PMIX_PROC);
    }

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
        add (&b, sub, PMIX_NODEID, &nid, PMIX_UINT32);
        add (&b, sub, PMIX_HOSTNAME, p->hostname, PMIX_STRING);
        add (&b, sub, PMIX_LOCAL_PEERS, peers, PMIX_STRING);
        add (&b, sub, PMIX_LOCAL_SIZE, &n, PMIX_UINT32);
        add (&b, sub, PMIX_NODE_SIZE, &n, PMIX_UINT32);
        add (&b, sub, PMIX_LOCALLDR, &rank0, PMIX_PROC_RANK);
        if (!p->remote) {
            add (&b, sub, PMIX_NODE_OVERSUBSCRIBED, &osub, PMIX_BOOL);
            add (&b, sub, PMIX_TMPDIR, p->tmpdir, PMIX_STRING);
        }
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
        add (&b, sub, PMIX_NODEID, &nid, PMIX_UINT32);
        add (&b, sub, PMIX_GLOBAL_RANK, &pr, PMIX_PROC_RANK);
        add (&b, sub, PMIX_APP_RANK, &pr, PMIX_PROC_RANK);
        add (&b, sub, PMIX_HOSTNAME, p->hostname, PMIX_STRING);
        if (!p->remote)
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

/* ---- several nodes ---------------------------------------------------------- */

/* The ranks of node n joined with sep ("2,3"), appended to a malloc'ed
 * string *s of length *len (NULL at first).  Returns 0 or -1. */
static int append_ranks (char **s, size_t *len, const struct jobmap_node *n, int lead)
{
    size_t need = *len + (size_t)n->nranks * 8 + 2;
    char *p = realloc (*s, need);

    if (!p)
        return -1;
    *s = p;
    if (lead)
        p[(*len)++] = ';';
    p[*len] = '\0';
    for (int k = 0; k < n->nranks; k++)
        *len += (size_t)snprintf (p + *len, need - *len, k ? ",%d" : "%d", n->ranks[k]);
    return 0;
}

/* PMIx's node and process map strings of m (*nodes "n1,n2", *ppn "0,1;2,3",
 * then their regexes).  Returns 0, or -1 with err. */
static int
multi_maps (const struct jobmap *m, char **nodemap, char **procmap, elastic_error_t *err)
{
    char *names = NULL, *ppn = NULL;
    size_t nlen = 0, plen = 0;
    pmix_status_t rc;
    int ret = -1;

    for (int i = 0; i < m->nnodes; i++) {
        const char *h = m->node[i].name;
        char *q;
        if (!h) {
            errprintf (err,
                       "job map: node %d has no host name yet (names come from the "
                       "rendezvous)",
                       i);
            goto out;
        }
        if (!(q = realloc (names, nlen + strlen (h) + 2)))
            goto nomem;
        names = q;
        nlen += (size_t)sprintf (names + nlen, i ? ",%s" : "%s", h);
        if (append_ranks (&ppn, &plen, &m->node[i], i > 0) < 0)
            goto nomem;
    }
    if ((rc = PMIx_generate_regex (names, nodemap)) != PMIX_SUCCESS ||
        (rc = PMIx_generate_ppn (ppn, procmap)) != PMIX_SUCCESS) {
        errprintf (err,
                   "PMIx cannot encode the node or process map (%s)",
                   PMIx_Error_string (rc));
        goto out;
    }
    ret = 0;
    goto out;
nomem:
    errprintf (err, "out of memory building the job data");
out:
    free (names);
    free (ppn);
    return ret;
}

/* Job-level data and the app of a multi-node job. */
static void multi_job (struct builder *b,
                       const struct jobinfo_params *p,
                       const char *nodemap,
                       const char *procmap,
                       const char *mypeers)
{
    const struct jobmap *m = p->map;
    uint32_t n = (uint32_t)m->world_size, nn = (uint32_t)m->nnodes, zero32 = 0, one32 = 1;
    uint32_t nlocal = m->node_id >= 0 ? (uint32_t)m->node[m->node_id].nranks : 0;
    pmix_rank_t rank0 = 0;
    bool osub = p->oversubscribed ? true : false;
    void *sub;

    add (b, b->list, PMIX_JOBID, p->nspace, PMIX_STRING);
    add (b, b->list, PMIX_UNIV_SIZE, &n, PMIX_UINT32);
    add (b, b->list, PMIX_JOB_SIZE, &n, PMIX_UINT32);
    add (b, b->list, PMIX_MAX_PROCS, &n, PMIX_UINT32);
    add (b, b->list, PMIX_JOB_NUM_APPS, &one32, PMIX_UINT32);
    add (b, b->list, PMIX_NUM_NODES, &nn, PMIX_UINT32);
    add (b, b->list, PMIX_NODE_MAP, nodemap, PMIX_REGEX);
    add (b, b->list, PMIX_PROC_MAP, procmap, PMIX_REGEX);
    add (b, b->list, PMIX_TMPDIR, p->tmpdir, PMIX_STRING);
    add (b, b->list, PMIX_NSDIR, p->nsdir, PMIX_STRING);
    /* this node's, for clients that ask without naming a node */
    add (b, b->list, PMIX_LOCAL_PEERS, mypeers, PMIX_STRING);
    add (b, b->list, PMIX_LOCAL_SIZE, &nlocal, PMIX_UINT32);
    add (b, b->list, PMIX_NODE_OVERSUBSCRIBED, &osub, PMIX_BOOL);
    if ((sub = PMIx_Info_list_start ())) {
        add (b, sub, PMIX_APPNUM, &zero32, PMIX_UINT32);
        add (b, sub, PMIX_APP_SIZE, &n, PMIX_UINT32);
        add (b, sub, PMIX_APPLDR, &rank0, PMIX_PROC_RANK);
        if (p->wdir)
            add (b, sub, PMIX_WDIR, p->wdir, PMIX_STRING);
        add_array (b, b->list, PMIX_APP_INFO_ARRAY, sub);
    } else
        b->bad_key = PMIX_APP_INFO_ARRAY;
}

/* One node array per node. */
static void multi_nodes (struct builder *b, const struct jobinfo_params *p)
{
    const struct jobmap *m = p->map;
    bool osub = p->oversubscribed ? true : false;

    for (int i = 0; i < m->nnodes && !b->bad_key; i++) {
        const struct jobmap_node *nd = &m->node[i];
        uint32_t id = (uint32_t)i, size = (uint32_t)nd->nranks;
        pmix_rank_t ldr = nd->nranks > 0 ? (pmix_rank_t)nd->ranks[0] : PMIX_RANK_INVALID;
        char *peers = NULL;
        size_t plen = 0;
        void *sub;

        if (append_ranks (&peers, &plen, nd, 0) < 0 || !(sub = PMIx_Info_list_start ())) {
            free (peers);
            b->bad_key = PMIX_NODE_INFO_ARRAY;
            b->rc = PMIX_ERR_NOMEM;
            return;
        }
        add (b, sub, PMIX_NODEID, &id, PMIX_UINT32);
        add (b, sub, PMIX_HOSTNAME, nd->name, PMIX_STRING);
        add (b, sub, PMIX_LOCAL_PEERS, peers, PMIX_STRING);
        add (b, sub, PMIX_LOCAL_SIZE, &size, PMIX_UINT32);
        add (b, sub, PMIX_NODE_SIZE, &size, PMIX_UINT32);
        add (b, sub, PMIX_LOCALLDR, &ldr, PMIX_PROC_RANK);
        if (i == m->node_id) {
            add (b, sub, PMIX_NODE_OVERSUBSCRIBED, &osub, PMIX_BOOL);
            add (b, sub, PMIX_TMPDIR, p->tmpdir, PMIX_STRING);
        }
        add_array (b, b->list, PMIX_NODE_INFO_ARRAY, sub);
        free (peers);
    }
}

/* One proc array per rank of the job; PMIX_RANK first. */
static void multi_procs (struct builder *b, const struct jobinfo_params *p)
{
    const struct jobmap *m = p->map;
    uint32_t zero32 = 0;

    for (int r = 0; r < m->world_size && !b->bad_key; r++) {
        int node = m->rank_node[r];
        pmix_rank_t pr = (pmix_rank_t)r;
        uint16_t lr = (uint16_t)m->rank_local[r];
        uint32_t nid = (uint32_t)node;
        char procdir[4200];
        void *sub;

        if (!(sub = PMIx_Info_list_start ())) {
            b->bad_key = PMIX_PROC_INFO_ARRAY;
            b->rc = PMIX_ERR_NOMEM;
            return;
        }
        add (b, sub, PMIX_RANK, &pr, PMIX_PROC_RANK);
        add (b, sub, PMIX_APPNUM, &zero32, PMIX_UINT32);
        add (b, sub, PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
        add (b, sub, PMIX_NODE_RANK, &lr, PMIX_UINT16);
        add (b, sub, PMIX_NODEID, &nid, PMIX_UINT32);
        add (b, sub, PMIX_GLOBAL_RANK, &pr, PMIX_PROC_RANK);
        add (b, sub, PMIX_APP_RANK, &pr, PMIX_PROC_RANK);
        add (b, sub, PMIX_HOSTNAME, m->node[node].name, PMIX_STRING);
        if (node == m->node_id) {
            snprintf (procdir, sizeof (procdir), "%s/%d", p->nsdir, r);
            add (b, sub, PMIX_PROCDIR, procdir, PMIX_STRING);
        }
        add_array (b, b->list, PMIX_PROC_INFO_ARRAY, sub);
    }
}

static int build_multi_node (const struct jobinfo_params *p,
                             pmix_info_t **info,
                             size_t *ninfo,
                             elastic_error_t *err)
{
    const struct jobmap *m = p->map;
    struct builder b = {0};
    char *nodemap = NULL, *procmap = NULL, *mypeers = NULL;
    size_t plen = 0;
    pmix_data_array_t darr;
    pmix_status_t rc;
    int ret = -1;

    /* node_id -1: a member that joined the running job (none of its ranks) */
    if (m->node_id < -1 || m->node_id >= m->nnodes || m->world_size != p->nranks) {
        errprintf (err,
                   "job map: node %d of %d, %d ranks, does not fit a job of %d ranks",
                   m->node_id,
                   m->nnodes,
                   m->world_size,
                   p->nranks);
        return -1;
    }
    if (multi_maps (m, &nodemap, &procmap, err) < 0)
        goto out;
    if ((m->node_id >= 0 ? append_ranks (&mypeers, &plen, &m->node[m->node_id], 0) < 0
                         : !(mypeers = strdup (""))) ||
        !(b.list = PMIx_Info_list_start ())) {
        errprintf (err, "out of memory building the job data");
        goto out;
    }
    multi_job (&b, p, nodemap, procmap, mypeers);
    multi_nodes (&b, p);
    multi_procs (&b, p);
    if (b.bad_key) {
        errprintf (
            err, "PMIx refused job data %s (%s)", b.bad_key, PMIx_Error_string (b.rc));
        goto out;
    }
    memset (&darr, 0, sizeof (darr));
    if ((rc = PMIx_Info_list_convert (b.list, &darr)) != PMIX_SUCCESS) {
        errprintf (err, "PMIx cannot assemble the job data (%s)", PMIx_Error_string (rc));
        goto out;
    }
    *info = darr.array;
    *ninfo = darr.size;
    ret = 0;
out:
    if (b.list)
        PMIx_Info_list_release (b.list);
    free (nodemap);
    free (procmap);
    free (mypeers);
    return ret;
}

int jobinfo_build (const struct jobinfo_params *p,
                   pmix_info_t **info,
                   size_t *ninfo,
                   elastic_error_t *err)
{
    *info = NULL;
    *ninfo = 0;
    if (p->map && p->map->nnodes > 1)
        return build_multi_node (p, info, ninfo, err);
    return build_one_node (p, info, ninfo, err);
}

void jobinfo_free (pmix_info_t *info, size_t ninfo)
{
    if (info)
        PMIX_INFO_FREE (info, ninfo);
}
