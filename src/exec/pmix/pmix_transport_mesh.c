/* pmix_transport_mesh.c - the hosted PMIx server's transport over the mesh
 *
 * See pmix_transport_mesh.h.  Wire formats (inside the mesh's sealed
 * messages, between members of one job built from the same tree):
 *   dmodex request   u32 rank (big endian), then the nspace (no NUL)
 *   dmodex answer    i32 PMIx status (big endian), then PMIx's data
 * so a PMIx status never mixes with the mesh's own (negative errno).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pmix.h>
#include <pmix_server.h>

#include "common/bytes.h"
#include "common/log.h"
#include "exec/jobmap.h"
#include "exec/mesh/proto.h"
#include "exec/pmix/pmix_host.h"
#include "pmix_transport.h"
#include "pmix_transport_mesh.h"

struct pmixhost_mesh {
    struct mesh *mesh;
    const struct jobmap *map;
    uint32_t self;
    uint32_t nmembers;    /* mesh slots: map->nnodes, or opts.nslots (joins) */
    pthread_mutex_t lock; /* job, reported, pmix_gone */
    struct pmixhost_job *job;
    char nspace[PMIX_MAX_NSLEN + 1];
    uint8_t *reported; /* [world_size] failure already told to the job */
    int pmix_gone;     /* PMIx finalized: pending callbacks are dropped */
    struct pmixhost_mesh_counts n;
    struct pmixhost_mesh_opts opts;
    /* the end of the job (pmixhost_mesh_finish), under lock */
    pthread_cond_t cond;
    uint8_t *done;    /* [nmembers] the member said its ranks are gone */
    char **done_blob; /* [nmembers] what it said */
    size_t *done_len; /* [nmembers] */
    uint8_t *heard;   /* [nmembers] a broadcast came from it (retell_done) */
    int idle_fence;   /* an empty fence of ours is pending */
    int hosting;      /* joined by --join: no ranks of the job here, an
                         empty fence always pending (idle_arm) */
    int fenced;       /* the mesh stopped this member */
    /* the launch barrier (pmixhost_mesh_launch_barrier), under lock: 0
     * pending, 1 made, -1 failed; how many members were in it */
    int launch;
    uint32_t launch_members;
    /* namespaces spawned into the mesh (pmixhost_mesh_add_spawn), under lock */
    struct spawned *spawned;
};

/* A spawned namespace: every rank on one node. */
struct spawned {
    struct spawned *next;
    char nspace[PMIX_MAX_NSLEN + 1];
    struct pmixhost_job *job;
    int node;
    int nranks;
    uint8_t *reported; /* [nranks] */
};

struct pending {
    struct pmixhost_mesh *t;
    pmix_modex_cbfunc_t cbfunc;
    void *cbdata;
};

static void count (struct pmixhost_mesh *t, unsigned *what)
{
    pthread_mutex_lock (&t->lock);
    (*what)++;
    pthread_mutex_unlock (&t->lock);
}

static void release_free (void *cbdata)
{
    free (cbdata);
}

/* Hand (status, data) to PMIx unless PMIx is gone; data is copied. */
static void
complete (struct pending *op, pmix_status_t status, const void *data, size_t n)
{
    char *copy = NULL;
    int gone;

    pthread_mutex_lock (&op->t->lock);
    gone = op->t->pmix_gone;
    pthread_mutex_unlock (&op->t->lock);
    if (!gone) {
        if (status == PMIX_SUCCESS && n > 0) {
            if (!(copy = malloc (n)))
                status = PMIX_ERR_NOMEM, n = 0;
            else
                memcpy (copy, data, n);
        }
        if (status != PMIX_SUCCESS)
            n = 0;
        op->cbfunc (status, copy, n, op->cbdata, copy ? release_free : NULL, copy);
    }
    free (op);
}

static pmix_status_t mesh_status (int status)
{
    return status == MESH_ELOST ? PMIX_ERR_UNREACH : PMIX_ERR_COMM_FAILURE;
}

/* ---- namespaces ------------------------------------------------------------ */

/* The spawned namespace called nspace (caller holds t->lock), or NULL. */
static struct spawned *find_spawned (struct pmixhost_mesh *t, const char *nspace)
{
    for (struct spawned *sp = t->spawned; sp; sp = sp->next)
        if (!strncmp (sp->nspace, nspace, PMIX_MAX_NSLEN))
            return sp;
    return NULL;
}

/* The node of a rank: of a spawned namespace, else of the job's map. */
static int rank_node (struct pmixhost_mesh *t, const char *nspace, int rank)
{
    struct spawned *sp;
    int node = -2;

    pthread_mutex_lock (&t->lock);
    if ((sp = find_spawned (t, nspace)))
        node = rank >= 0 && rank < sp->nranks ? sp->node : -1;
    pthread_mutex_unlock (&t->lock);
    return node != -2 ? node : jobmap_rank_node (t->map, rank);
}

/* ---- failures reported to the job ---------------------------------------- */

/* Tell the job that rank failed (once).  Caller holds t->lock. */
static void report_locked (struct pmixhost_mesh *t, int rank, int signaled)
{
    if (!t->job || rank < 0 || rank >= t->map->world_size || t->reported[rank])
        return;
    if (t->map->rank_node[rank] == (int)t->self)
        return; /* our own ranks are reported by their exit */
    t->reported[rank] = 1;
    t->n.reported++;
    if (pmixhost_job_remote_failure (t->job, rank, signaled) == 0 && t->opts.reported)
        t->opts.reported (t->opts.arg, NULL, rank, signaled);
}

/* The same for a rank of a spawned namespace.  Caller holds t->lock. */
static void report_spawned_locked (struct pmixhost_mesh *t,
                                   struct spawned *sp,
                                   int rank,
                                   int signaled)
{
    if (rank < 0 || rank >= sp->nranks || sp->reported[rank] || sp->node == (int)t->self)
        return;
    sp->reported[rank] = 1;
    t->n.reported++;
    if (pmixhost_job_remote_failure (sp->job, rank, signaled) == 0 && t->opts.reported)
        t->opts.reported (t->opts.arg, sp->nspace, rank, signaled);
}

static void
on_lost (void *arg, const uint32_t *members, size_t count, uint32_t epoch, uint32_t nlive)
{
    struct pmixhost_mesh *t = arg;

    pthread_mutex_lock (&t->lock);
    for (size_t i = 0; i < count; i++) {
        if (members[i] >= t->nmembers || t->done[members[i]])
            continue; /* a member that said its ranks were gone left */
        if (members[i] < (uint32_t)t->map->nnodes) {
            const struct jobmap_node *n = &t->map->node[members[i]];
            for (int k = 0; k < n->nranks; k++)
                report_locked (t, n->ranks[k], 0);
        }
        /* (and the ranks spawned onto it: a joined member has only those) */
        for (struct spawned *sp = t->spawned; sp; sp = sp->next)
            for (int r = 0; sp->node == (int)members[i] && r < sp->nranks; r++)
                report_spawned_locked (t, sp, r, 0);
    }
    pthread_cond_broadcast (&t->cond);
    pthread_mutex_unlock (&t->lock);
    if (t->opts.lost)
        t->opts.lost (t->opts.arg, members, count, nlive);
}

/* ---- published data ---------------------------------------------------------
 * Wire format: PMIx_Data_pack of the publisher (PMIX_PROC), the count
 * (PMIX_SIZE) and the info array (PMIX_INFO), directives included. */

static void mesh_tp_publish (void *ctx,
                             const pmix_proc_t *proc,
                             const pmix_info_t info[],
                             size_t ninfo)
{
    struct pmixhost_mesh *t = ctx;
    pmix_data_buffer_t buf;
    pmix_byte_object_t bo;
    size_t n = ninfo;

    if (!t->mesh)
        return;
    PMIX_DATA_BUFFER_CONSTRUCT (&buf);
    if (PMIx_Data_pack (NULL, &buf, (void *)proc, 1, PMIX_PROC) != PMIX_SUCCESS ||
        PMIx_Data_pack (NULL, &buf, &n, 1, PMIX_SIZE) != PMIX_SUCCESS ||
        (n > 0 && PMIx_Data_pack (NULL, &buf, (void *)info, (int32_t)n, PMIX_INFO) !=
                      PMIX_SUCCESS) ||
        PMIx_Data_unload (&buf, &bo) != PMIX_SUCCESS) {
        PMIX_DATA_BUFFER_DESTRUCT (&buf);
        return;
    }
    if (mesh_broadcast (t->mesh, MESH_BCAST_PUBLISH, bo.bytes, bo.size) == 0)
        count (t, &t->n.published);
    PMIX_BYTE_OBJECT_DESTRUCT (&bo);
    PMIX_DATA_BUFFER_DESTRUCT (&buf);
}

static void on_publish (struct pmixhost_mesh *t, const void *data, size_t len)
{
    pmix_data_buffer_t buf;
    pmix_proc_t proc;
    pmix_info_t *info = NULL;
    size_t n = 0;
    int32_t one = 1, cnt;
    char *copy;
    int gone;

    pthread_mutex_lock (&t->lock);
    gone = t->pmix_gone;
    pthread_mutex_unlock (&t->lock);
    if (gone || len == 0 || !(copy = malloc (len)))
        return;
    memcpy (copy, data, len);
    PMIX_DATA_BUFFER_CONSTRUCT (&buf);
    PMIx_Data_load (&buf, &(pmix_byte_object_t){.bytes = copy, .size = len});
    if (PMIx_Data_unpack (NULL, &buf, &proc, &one, PMIX_PROC) == PMIX_SUCCESS &&
        (one = 1, PMIx_Data_unpack (NULL, &buf, &n, &one, PMIX_SIZE)) == PMIX_SUCCESS &&
        n > 0 && n <= 64) {
        PMIX_INFO_CREATE (info, n);
    }
    if (info) {
        cnt = (int32_t)n;
        if (PMIx_Data_unpack (NULL, &buf, info, &cnt, PMIX_INFO) == PMIX_SUCCESS &&
            cnt == (int32_t)n) {
            pmixhost_publish_peer (&proc, info, n);
            count (t, &t->n.published_peer);
        }
        PMIX_INFO_FREE (info, n);
    }
    PMIX_DATA_BUFFER_DESTRUCT (&buf); /* frees copy */
}

/* The first broadcast from a member that joined the running job (its
 * room, said as it starts) shows it linked into the tree: if this member
 * is done already, say so again.  Its first saying may have gone round
 * before the newcomer linked, and a newcomer that never hears it counts
 * this member lost when it leaves (a summary unlike the others'). */
static void retell_done (struct pmixhost_mesh *t, uint32_t origin)
{
    char *again = NULL;
    size_t len = 0;

    if (origin >= t->nmembers || origin < (uint32_t)t->map->nnodes || origin == t->self)
        return;
    pthread_mutex_lock (&t->lock);
    if (!t->heard[origin]) {
        t->heard[origin] = 1;
        if (t->done[t->self] && (again = malloc (t->done_len[t->self] + 1))) {
            len = t->done_len[t->self];
            memcpy (again, t->done_blob[t->self], len + 1);
        }
    }
    pthread_mutex_unlock (&t->lock);
    if (again && t->mesh && mesh_broadcast (t->mesh, MESH_BCAST_DONE, again, len) == 0)
        log_info ("mesh %u: member %u joined after this member was done: told it again",
                  t->self,
                  origin);
    free (again);
}

static void
on_broadcast (void *arg, uint32_t origin, int kind, const void *data, size_t len)
{
    struct pmixhost_mesh *t = arg;
    char ns[PMIX_MAX_NSLEN + 1];
    uint32_t rank;
    int32_t status;

    retell_done (t, origin);
    if (kind == MESH_BCAST_DONE) {
        char *copy = malloc (len + 1);
        int first = 0;
        pthread_mutex_lock (&t->lock);
        if (copy && origin < t->nmembers && !t->done[origin]) {
            memcpy (copy, data, len);
            copy[len] = '\0';
            t->done[origin] = 1;
            t->done_blob[origin] = copy;
            t->done_len[origin] = len;
            copy = NULL;
            first = 1;
            pthread_cond_broadcast (&t->cond);
        }
        pthread_mutex_unlock (&t->lock);
        free (copy);
        if (first)
            log_debug (
                "mesh %u: member %u is done (its ranks are gone)", t->self, origin);
        return;
    }
    if (kind == MESH_BCAST_PUBLISH) {
        on_publish (t, data, len);
        return;
    }
    if (kind == MESH_BCAST_ROOM || kind == MESH_BCAST_SPAWN ||
        kind == MESH_BCAST_SPAWN_END) {
        if (t->opts.broadcast)
            t->opts.broadcast (t->opts.arg, origin, kind, data, len);
        return;
    }
    if (kind != MESH_BCAST_RANK_FAILED ||
        mesh_rank_failed_decode (data, len, &rank, &status, ns, sizeof (ns), NULL) < 0)
        return;
    pthread_mutex_lock (&t->lock);
    if (t->job && !strcmp (ns, t->nspace) && rank <= (uint32_t)INT32_MAX)
        report_locked (t, (int)rank, status == PMIX_ERR_PROC_ABORTED_BY_SIG);
    else {
        struct spawned *sp = find_spawned (t, ns);
        if (sp && rank <= (uint32_t)INT32_MAX)
            report_spawned_locked (
                t, sp, (int)rank, status == PMIX_ERR_PROC_ABORTED_BY_SIG);
    }
    pthread_mutex_unlock (&t->lock);
}

static int mesh_tp_failure (void *ctx, const char *nspace, int rank, pmix_status_t status)
{
    struct pmixhost_mesh *t = ctx;

    if (!t->mesh)
        return -1;
    count (t, &t->n.failures_sent);
    return mesh_broadcast_failure (t->mesh, (uint32_t)rank, status, nspace);
}

/* ---- fences --------------------------------------------------------------- */

static void fence_done (void *arg, int status, const struct mesh_fence_result *res)
{
    struct pending *op = arg;
    size_t total = 0, off = 0;
    char *all;

    if (status != MESH_OK) {
        complete (op, mesh_status (status), NULL, 0);
        return;
    }
    count (op->t, &op->t->n.fences_mesh);
    for (uint32_t i = 0; i < res->count; i++)
        total += res->len[i];
    if (!(all = malloc (total ? total : 1))) {
        complete (op, PMIX_ERR_NOMEM, NULL, 0);
        return;
    }
    for (uint32_t i = 0; i < res->count; i++) {
        if (res->len[i])
            memcpy (all + off, res->data[i], res->len[i]);
        off += res->len[i];
    }
    complete (op, PMIX_SUCCESS, all, total);
    free (all);
}

/* The node of a fence participant: a spawned namespace's (every rank of
 * it, the wildcard too), else the map's; -1 with *wild for the job's
 * wildcard. */
static int proc_node (struct pmixhost_mesh *t, const pmix_proc_t *p, int *wild)
{
    struct spawned *sp;
    int node;

    pthread_mutex_lock (&t->lock);
    sp = find_spawned (t, p->nspace);
    node = sp ? sp->node : -2;
    pthread_mutex_unlock (&t->lock);
    if (node != -2)
        return node;
    if (p->rank == PMIX_RANK_WILDCARD) {
        *wild = 1;
        return -1;
    }
    return jobmap_rank_node (t->map, (int)p->rank);
}

/* Which nodes a fence's participants are on: 1 = this node only, 2 =
 * every live node, 0 = some other set. */
static int fence_scope (struct pmixhost_mesh *t, const pmix_proc_t procs[], size_t nprocs)
{
    const struct jobmap *m = t->map;
    uint8_t *in, *live;
    int scope = 1, all = 1, wild = 0;

    if (!(in = calloc ((size_t)m->nnodes * 2, 1)))
        return 0;
    live = in + m->nnodes;
    for (size_t i = 0; i < nprocs && !wild; i++) {
        int node = proc_node (t, &procs[i], &wild);
        if (node >= 0 && node < m->nnodes)
            in[node] = 1;
        if (node != (int)t->self)
            scope = 0;
    }
    if (wild) {
        free (in);
        return 2;
    }
    if (scope == 0) {
        mesh_get_live (t->mesh, live, (uint32_t)m->nnodes);
        for (int n = 0; n < m->nnodes; n++)
            if (live[n] && !in[n])
                all = 0;
        scope = all ? 2 : 0;
    }
    free (in);
    return scope;
}

static pmix_status_t mesh_tp_fence (void *ctx,
                                    const pmix_proc_t procs[],
                                    size_t nprocs,
                                    const pmix_info_t info[],
                                    size_t ninfo,
                                    char *data,
                                    size_t ndata,
                                    pmix_modex_cbfunc_t cbfunc,
                                    void *cbdata)
{
    struct pmixhost_mesh *t = ctx;
    struct pending *op;

    if (!t->mesh)
        return PMIX_ERR_COMM_FAILURE;
    switch (fence_scope (t, procs, nprocs)) {
        case 1:
            count (t, &t->n.fences_local);
            cbfunc (PMIX_SUCCESS, data, ndata, cbdata, NULL, NULL);
            return PMIX_SUCCESS;
        case 2:
            break;
        default:
            return PMIX_ERR_NOT_SUPPORTED;
    }
    if (!(op = calloc (1, sizeof (*op))))
        return PMIX_ERR_NOMEM;
    op->t = t;
    op->cbfunc = cbfunc;
    op->cbdata = cbdata;
    if (mesh_fence (t->mesh, data, ndata, fence_done, op) < 0) {
        pmix_status_t rc =
            errno == EBUSY ? PMIX_ERR_NOT_SUPPORTED : PMIX_ERR_COMM_FAILURE;
        free (op);
        return rc;
    }
    return PMIX_SUCCESS;
}

/* ---- direct modex --------------------------------------------------------- */

static void dmodex_done (void *arg, int status, const void *data, size_t len)
{
    struct pending *op = arg;
    const uint8_t *p = data;

    if (status != MESH_OK)
        complete (op, mesh_status (status), NULL, 0);
    else if (len < 4)
        complete (op, PMIX_ERR_BAD_PARAM, NULL, 0);
    else
        complete (op, (pmix_status_t)(int32_t)be_get32 (p), p + 4, len - 4);
}

static pmix_status_t mesh_tp_direct_modex (void *ctx,
                                           const pmix_proc_t *proc,
                                           const pmix_info_t info[],
                                           size_t ninfo,
                                           pmix_modex_cbfunc_t cbfunc,
                                           void *cbdata)
{
    struct pmixhost_mesh *t = ctx;
    size_t nslen = strnlen (proc->nspace, PMIX_MAX_NSLEN);
    uint8_t req[4 + PMIX_MAX_NSLEN], live = 0;
    struct pending *op;
    int node;

    if (!t->mesh)
        return PMIX_ERR_COMM_FAILURE;
    node = rank_node (t, proc->nspace, (int)proc->rank);
    if (node < 0 || node == (int)t->self)
        return PMIX_ERR_NOT_FOUND;
    if ((uint32_t)node < t->nmembers) {
        uint8_t *all = calloc (t->nmembers, 1);
        if (!all)
            return PMIX_ERR_NOMEM;
        mesh_get_live (t->mesh, all, t->nmembers);
        live = all[node];
        free (all);
    }
    if (!live)
        return PMIX_ERR_UNREACH;
    if (!(op = calloc (1, sizeof (*op))))
        return PMIX_ERR_NOMEM;
    op->t = t;
    op->cbfunc = cbfunc;
    op->cbdata = cbdata;
    count (t, &t->n.dmodex_asked);
    be_put32 (req, proc->rank);
    memcpy (req + 4, proc->nspace, nslen);
    if (mesh_dmodex (t->mesh, (uint32_t)node, req, 4 + nslen, dmodex_done, op) < 0) {
        free (op);
        return PMIX_ERR_UNREACH;
    }
    return PMIX_SUCCESS;
}

static void
answer (struct mesh_request *req, pmix_status_t status, const char *data, size_t n)
{
    uint8_t *buf = malloc (4 + n);

    if (!buf) {
        mesh_dmodex_respond (req, -ENOMEM, NULL, 0);
        return;
    }
    be_put32 (buf, (uint32_t)(int32_t)status);
    if (n)
        memcpy (buf + 4, data, n);
    mesh_dmodex_respond (req, MESH_OK, buf, 4 + n);
    free (buf);
}

/* PMIx's answer for a rank of this node (PMIx's progress thread). */
static void server_dmodex_done (pmix_status_t status, char *data, size_t sz, void *cbdata)
{
    answer (cbdata, status, data, status == PMIX_SUCCESS ? sz : 0);
}

static void on_dmodex_request (
    void *arg, struct mesh_request *req, uint32_t origin, const void *data, size_t len)
{
    struct pmixhost_mesh *t = arg;
    const uint8_t *p = data;
    pmix_status_t rc;
    pmix_proc_t proc;
    int gone;

    pthread_mutex_lock (&t->lock);
    gone = t->pmix_gone;
    pthread_mutex_unlock (&t->lock);
    if (gone || len < 4 || len - 4 > PMIX_MAX_NSLEN) {
        answer (req, gone ? PMIX_ERR_COMM_FAILURE : PMIX_ERR_BAD_PARAM, NULL, 0);
        return;
    }
    memset (&proc, 0, sizeof (proc));
    memcpy (proc.nspace, p + 4, len - 4);
    proc.rank = be_get32 (p);
    if (rank_node (t, proc.nspace, (int)proc.rank) != (int)t->self) {
        answer (req, PMIX_ERR_NOT_FOUND, NULL, 0);
        return;
    }
    count (t, &t->n.dmodex_served);
    rc = PMIx_server_dmodex_request (&proc, server_dmodex_done, req);
    if (rc != PMIX_SUCCESS)
        answer (req, rc, NULL, 0);
}

/* Events beyond the node are not forwarded yet: PMIx delivered it here. */
static pmix_status_t mesh_tp_notify (void *ctx,
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

/* ---- lifecycle ------------------------------------------------------------ */

static void on_self_fence (void *arg, const char *reason)
{
    struct pmixhost_mesh *t = arg;

    pthread_mutex_lock (&t->lock);
    t->fenced = 1;
    pthread_cond_broadcast (&t->cond);
    pthread_mutex_unlock (&t->lock);
    if (t->opts.self_fence)
        t->opts.self_fence (t->opts.arg, reason);
}

static void on_joined (void *arg)
{
    struct pmixhost_mesh *t = arg;

    if (t->opts.joined)
        t->opts.joined (t->opts.arg);
}

/* members admitted by elastic-exec --join (no ranks: nothing for PMIx) */
static void on_admitted (void *arg,
                         const uint32_t *members,
                         const char *const *addrs,
                         size_t count,
                         uint32_t epoch,
                         uint32_t nlive)
{
    struct pmixhost_mesh *t = arg;

    (void)epoch;
    for (size_t i = 0; t->opts.admitted && i < count; i++)
        t->opts.admitted (t->opts.arg, members[i], addrs ? addrs[i] : NULL, nlive);
    pthread_mutex_lock (&t->lock);
    pthread_cond_broadcast (&t->cond); /* pmixhost_mesh_finish waits for it too */
    pthread_mutex_unlock (&t->lock);
}

struct pmixhost_mesh *pmixhost_mesh_create (const struct pmixhost_mesh_opts *opts,
                                            elastic_error_t *err)
{
    struct pmixhost_mesh *t;
    struct mesh_config cfg = {0};
    uint8_t *slots = NULL;
    uint32_t nmembers;

    const struct mesh_admission *a = opts ? opts->admission : NULL;

    if (!opts || !opts->map || !(opts->addrs || a) || !opts->key ||
        opts->map->nnodes < 1 ||
        (a ? opts->map->node_id != -1 || a->n <= (uint32_t)opts->map->nnodes ||
                 a->slot < (uint32_t)opts->map->nnodes || a->slot >= a->n || !a->slots ||
                 !a->addrs || !opts->ports || opts->nports < 1
           : opts->map->node_id < 0 || opts->map->node_id >= opts->map->nnodes)) {
        errprintf (err,
                   "PMIx mesh transport: a job map (with this node in it, or the "
                   "admission of a member joining the job), the members' addresses "
                   "and a key are required");
        return NULL;
    }
    nmembers = a                                            ? a->n
               : opts->nslots > (uint32_t)opts->map->nnodes ? opts->nslots
                                                            : (uint32_t)opts->map->nnodes;
    if (!(t = calloc (1, sizeof (*t))) ||
        !(t->reported = calloc ((size_t)opts->map->world_size + 1, 1)) ||
        !(t->done = calloc (nmembers, 1)) ||
        !(t->done_blob = calloc (nmembers, sizeof (*t->done_blob))) ||
        !(t->done_len = calloc (nmembers, sizeof (*t->done_len))) ||
        !(t->heard = calloc (nmembers, 1))) {
        if (t) {
            free (t->reported);
            free (t->done);
            free (t->done_blob);
            free (t->done_len);
        }
        free (t);
        errprintf (err, "PMIx mesh transport: out of memory");
        return NULL;
    }
    pthread_mutex_init (&t->lock, NULL);
    pthread_cond_init (&t->cond, NULL);
    t->opts = *opts;
    t->map = opts->map;
    t->self = a ? a->slot : (uint32_t)opts->map->node_id;
    t->nmembers = nmembers;
    t->hosting = a != NULL;
    cfg.nmembers = nmembers;
    if (a) { /* joined: the admitter's view */
        cfg.slots = a->slots;
        cfg.base = a->base;
        cfg.joining = 1;
        cfg.admit_info = opts->admit_info; /* it admits newcomers too */
        cfg.admit_info_len = opts->admit_info ? strlen (opts->admit_info) : 0;
    } else if (nmembers > (uint32_t)opts->map->nnodes) { /* joins: absent slots */
        if (!(slots = malloc (nmembers))) {
            errprintf (err, "PMIx mesh transport: out of memory");
            pmixhost_mesh_destroy (t);
            return NULL;
        }
        for (uint32_t i = 0; i < nmembers; i++)
            slots[i] =
                i < (uint32_t)opts->map->nnodes ? MESH_SLOT_LIVE : MESH_SLOT_ABSENT;
        cfg.slots = slots;
        cfg.base = (uint32_t)opts->map->nnodes;
        cfg.admit_info = opts->admit_info;
        cfg.admit_info_len = opts->admit_info ? strlen (opts->admit_info) : 0;
    }
    cfg.self = t->self;
    cfg.addrs = a ? (const char *const *)a->addrs : opts->addrs;
    cfg.listen_fd = opts->listen_fd;
    if (a) {
        cfg.ports = opts->ports;
        cfg.nports = opts->nports;
    } else if (opts->listen_fd < 0) { /* the job map's candidate ports (jobmap.h) */
        cfg.ports = opts->map->port;
        cfg.nports = (uint32_t)opts->map->nports;
    }
    cfg.radix = opts->radix;
    cfg.node_timeout = opts->node_timeout;
    cfg.join_timeout = opts->join_timeout;
    cfg.key = opts->key;
    cfg.auth = opts->auth;
    cfg.job = opts->job;
    cfg.munge_socket = opts->munge_socket;
    cfg.ops.lost = on_lost;
    cfg.ops.broadcast = on_broadcast;
    cfg.ops.dmodex_request = on_dmodex_request;
    cfg.ops.self_fence = on_self_fence;
    cfg.ops.joined = on_joined;
    cfg.ops.admitted = on_admitted;
    cfg.arg = t;
    t->mesh = mesh_create (&cfg, err);
    free (slots);
    if (!t->mesh) {
        pmixhost_mesh_destroy (t);
        return NULL;
    }
    return t;
}

static void idle_arm (struct pmixhost_mesh *t);

int pmixhost_mesh_start (struct pmixhost_mesh *t, elastic_error_t *err)
{
    if (!t || !t->mesh)
        return errprintf (err, "PMIx mesh transport: no mesh to start");
    if (mesh_start (t->mesh, err) < 0)
        return -1;
    idle_arm (t);
    return 0;
}

uint32_t pmixhost_mesh_self (const struct pmixhost_mesh *t)
{
    return t ? t->self : 0;
}

uint32_t pmixhost_mesh_nmembers (const struct pmixhost_mesh *t)
{
    return t ? t->nmembers : 0;
}

uint32_t pmixhost_mesh_nlive (struct pmixhost_mesh *t)
{
    struct mesh_stats st = {0};

    if (!t || !t->mesh)
        return 0;
    mesh_get_stats (t->mesh, &st);
    return st.nlive;
}

int pmixhost_mesh_job_ending (struct pmixhost_mesh *t)
{
    uint8_t *live;
    int ending = 1;

    if (!t || !t->mesh || !(live = calloc (t->nmembers, 1)))
        return 0;
    mesh_get_live (t->mesh, live, t->nmembers);
    pthread_mutex_lock (&t->lock);
    for (int i = 0; i < t->map->nnodes; i++)
        if (live[i] && !t->done[i])
            ending = 0;
    pthread_mutex_unlock (&t->lock);
    free (live);
    return ending;
}

void pmixhost_mesh_set_job (struct pmixhost_mesh *t, struct pmixhost_job *job)
{
    if (!t)
        return;
    pthread_mutex_lock (&t->lock);
    t->job = job;
    snprintf (t->nspace, sizeof (t->nspace), "%s", job ? pmixhost_job_nspace (job) : "");
    memset (t->reported, 0, (size_t)t->map->world_size);
    pthread_mutex_unlock (&t->lock);
}

int pmixhost_mesh_add_spawn (struct pmixhost_mesh *t,
                             struct pmixhost_job *job,
                             int node,
                             int nranks)
{
    struct spawned *sp = calloc (1, sizeof (*sp));

    if (!sp || nranks < 1 || !(sp->reported = calloc ((size_t)nranks, 1))) {
        free (sp);
        errno = sp ? EINVAL : ENOMEM;
        return -1;
    }
    snprintf (sp->nspace, sizeof (sp->nspace), "%s", pmixhost_job_nspace (job));
    sp->job = job;
    sp->node = node;
    sp->nranks = nranks;
    pthread_mutex_lock (&t->lock);
    sp->next = t->spawned;
    t->spawned = sp;
    pthread_mutex_unlock (&t->lock);
    return 0;
}

static void drop_spawned_locked (struct pmixhost_mesh *t)
{
    while (t->spawned) {
        struct spawned *sp = t->spawned;
        t->spawned = sp->next;
        free (sp->reported);
        free (sp);
    }
}

void pmixhost_mesh_clear_spawns (struct pmixhost_mesh *t)
{
    if (!t)
        return;
    pthread_mutex_lock (&t->lock);
    drop_spawned_locked (t);
    pthread_mutex_unlock (&t->lock);
}

int pmixhost_mesh_broadcast (struct pmixhost_mesh *t,
                             int kind,
                             const void *data,
                             size_t len)
{
    if (!t || !t->mesh) {
        errno = ECANCELED;
        return -1;
    }
    return mesh_broadcast (t->mesh, kind, data, len);
}

void pmixhost_mesh_stop (struct pmixhost_mesh *t)
{
    if (t && t->mesh) {
        mesh_destroy (t->mesh);
        t->mesh = NULL;
    }
}

void pmixhost_mesh_counts (struct pmixhost_mesh *t, struct pmixhost_mesh_counts *c)
{
    pthread_mutex_lock (&t->lock);
    *c = t->n;
    pthread_mutex_unlock (&t->lock);
}

struct mesh *pmixhost_mesh_get (struct pmixhost_mesh *t)
{
    return t ? t->mesh : NULL;
}

void pmixhost_mesh_destroy (struct pmixhost_mesh *t)
{
    int saved_errno = errno;

    if (!t)
        return;
    pmixhost_mesh_stop (t);
    drop_spawned_locked (t);
    pthread_mutex_destroy (&t->lock);
    pthread_cond_destroy (&t->cond);
    for (uint32_t i = 0; t->done_blob && i < t->nmembers; i++)
        free (t->done_blob[i]);
    free (t->done_blob);
    free (t->done_len);
    free (t->done);
    free (t->heard);
    free (t->reported);
    free (t);
    errno = saved_errno;
}

/* ---- the launch barrier --------------------------------------------------- */

static void launch_done (void *arg, int status, const struct mesh_fence_result *res)
{
    struct pmixhost_mesh *t = arg;

    pthread_mutex_lock (&t->lock);
    t->launch = status == MESH_OK ? 1 : -1;
    t->launch_members = status == MESH_OK ? res->count : 0;
    pthread_cond_broadcast (&t->cond);
    pthread_mutex_unlock (&t->lock);
}

int pmixhost_mesh_launch_barrier (struct pmixhost_mesh *t,
                                  int (*stop) (void *),
                                  void *arg,
                                  uint32_t *members)
{
    int state;

    *members = 0;
    if (!t || !t->mesh)
        return -1;
    pthread_mutex_lock (&t->lock);
    t->launch = 0;
    pthread_mutex_unlock (&t->lock);
    if (mesh_fence (t->mesh, "", 0, launch_done, t) < 0)
        return -1;
    pthread_mutex_lock (&t->lock);
    while (t->launch == 0 && !(stop && stop (arg))) {
        struct timespec ts;
        clock_gettime (CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000; /* look at stop() every 50 ms */
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait (&t->cond, &t->lock, &ts);
    }
    state = t->launch;
    *members = t->launch_members;
    pthread_mutex_unlock (&t->lock);
    return state;
}

/* ---- the end of the job --------------------------------------------------- */

static void idle_fence_done (void *arg, int status, const struct mesh_fence_result *res)
{
    struct pmixhost_mesh *t = arg;

    (void)res;
    pthread_mutex_lock (&t->lock);
    t->idle_fence = 0;
    pthread_cond_broadcast (&t->cond);
    pthread_mutex_unlock (&t->lock);
    if (status != MESH_ECANCEL)
        idle_arm (t); /* (mesh thread: mesh_fence only queues) */
}

/* Put an empty contribution into the mesh's next fence (t->idle_fence
 * while it is pending).  Returns 0, or -1 with errno (mesh_fence's). */
static int idle_submit (struct pmixhost_mesh *t)
{
    pthread_mutex_lock (&t->lock);
    t->idle_fence = 1;
    pthread_mutex_unlock (&t->lock);
    if (mesh_fence (t->mesh, "", 0, idle_fence_done, t) == 0)
        return 0;
    pthread_mutex_lock (&t->lock);
    t->idle_fence = 0;
    pthread_mutex_unlock (&t->lock);
    return -1;
}

/* A member with no ranks of the job (joined by --join): an empty
 * contribution pending in the mesh's next fence at all times, so that the
 * job's fences (MPI_Finalize's) never wait for it.  Its own ranks are
 * spawned ones, whose fences are this member's alone (fence_scope). */
static void idle_arm (struct pmixhost_mesh *t)
{
    pthread_mutex_lock (&t->lock);
    if (!t->hosting || t->idle_fence || t->fenced || !t->mesh) {
        pthread_mutex_unlock (&t->lock);
        return;
    }
    pthread_mutex_unlock (&t->lock);
    idle_submit (t);
}

/* 1 when every live member has said it is done (caller holds t->lock). */
static int all_done_locked (struct pmixhost_mesh *t, const uint8_t *live)
{
    for (uint32_t i = 0; i < t->nmembers; i++)
        if (live[i] && !t->done[i])
            return 0;
    return 1;
}

static double mono (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int pmixhost_mesh_finish (struct pmixhost_mesh *t,
                          const void *blob,
                          size_t len,
                          double timeout,
                          struct pmixhost_mesh_outcomes *out,
                          elastic_error_t *err)
{
    int n = (int)t->nmembers, rc = 0;
    uint8_t *live = calloc ((size_t)n, 1), *cause = calloc ((size_t)n, 1);
    double deadline = mono () + timeout;
    char *copy = malloc (len + 1);

    if (!live || !cause || !copy ||
        !(out->blob = calloc ((size_t)n, sizeof (*out->blob))) ||
        !(out->len = calloc ((size_t)n, sizeof (*out->len))) ||
        !(out->state = calloc ((size_t)n, sizeof (*out->state)))) {
        free (live);
        free (cause);
        free (copy);
        pmixhost_mesh_outcomes_free (out);
        return errprintf (err, "mesh: end of job: out of memory");
    }
    out->n = n;
    if (!t->mesh) {
        free (live);
        free (cause);
        free (copy);
        pmixhost_mesh_outcomes_free (out);
        return errprintf (err, "mesh: end of job: the mesh is stopped");
    }
    memcpy (copy, blob, len);
    copy[len] = '\0';
    pthread_mutex_lock (&t->lock);
    if (!t->done[t->self]) {
        t->done[t->self] = 1;
        t->done_blob[t->self] = copy;
        t->done_len[t->self] = len;
        copy = NULL;
    }
    pthread_mutex_unlock (&t->lock);
    free (copy);
    if (mesh_broadcast (t->mesh, MESH_BCAST_DONE, blob, len) < 0)
        rc = errprintf (err, "mesh: end of job: the mesh is stopped");
    /* Wait until every live member is done.  Meanwhile take part in the
     * others' fences with nothing (their ranks may still be in one: an
     * MPI_Finalize), so that a member whose ranks are gone never holds a
     * fence of the survivors. */
    while (rc == 0) {
        struct timespec ts;
        double now = mono (), until;
        int done, busy;

        mesh_get_live (t->mesh, live, (uint32_t)n);
        pthread_mutex_lock (&t->lock);
        done = all_done_locked (t, live);
        busy = t->idle_fence;
        if (t->fenced) {
            pthread_mutex_unlock (&t->lock);
            rc = errprintf (err,
                            "mesh: end of job: this member was cut off from the mesh");
            break;
        }
        pthread_mutex_unlock (&t->lock);
        if (done)
            break;
        if (now >= deadline) {
            rc = errprintf (err,
                            "mesh: end of job: not every member finished within %.0f s",
                            timeout);
            break;
        }
        if (!busy && idle_submit (t) < 0 && errno == ECANCELED) {
            rc = errprintf (err, "mesh: end of job: the mesh stopped");
            break;
        }
        until = now + 0.05 < deadline ? now + 0.05 : deadline;
        clock_gettime (CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)((until - now) * 1e9);
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_mutex_lock (&t->lock);
        pthread_cond_timedwait (&t->cond, &t->lock, &ts);
        pthread_mutex_unlock (&t->lock);
    }
    mesh_get_live (t->mesh, live, (uint32_t)n);
    mesh_get_causes (t->mesh, cause, (uint32_t)n);
    pthread_mutex_lock (&t->lock);
    for (int i = 0; i < n; i++) {
        /* neither live nor lost for a reason: never taken */
        out->state[i] = t->done[i] ? PMIXHOST_MESH_DONE
                        : live[i]  ? PMIXHOST_MESH_RUNNING
                        : cause[i] ? PMIXHOST_MESH_LOST
                                   : PMIXHOST_MESH_ABSENT;
        if (t->done[i] && (out->blob[i] = malloc (t->done_len[i] + 1))) {
            memcpy (out->blob[i], t->done_blob[i], t->done_len[i] + 1);
            out->len[i] = t->done_len[i];
        }
    }
    pthread_mutex_unlock (&t->lock);
    free (live);
    free (cause);
    return rc;
}

void pmixhost_mesh_outcomes_free (struct pmixhost_mesh_outcomes *out)
{
    if (!out)
        return;
    for (int i = 0; out->blob && i < out->n; i++)
        free (out->blob[i]);
    free (out->blob);
    free (out->len);
    free (out->state);
    memset (out, 0, sizeof (*out));
}

/* pmixhost_destroy calls this after PMIx_server_finalize: what the mesh
 * still completes goes nowhere. */
static void mesh_tp_destroy (void *ctx)
{
    struct pmixhost_mesh *t = ctx;

    pthread_mutex_lock (&t->lock);
    t->pmix_gone = 1;
    t->job = NULL;
    drop_spawned_locked (t);
    pthread_mutex_unlock (&t->lock);
    pmixhost_mesh_destroy (t);
}

const struct pmixhost_transport pmixhost_transport_mesh = {
    .name = "mesh",
    .fence = mesh_tp_fence,
    .direct_modex = mesh_tp_direct_modex,
    .failure = mesh_tp_failure,
    .notify = mesh_tp_notify,
    .publish = mesh_tp_publish,
    .destroy = mesh_tp_destroy,
};
