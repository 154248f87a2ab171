/* snapshot.c - L1 (own memory) and L2 (buddy) in-memory snapshots */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#include "ft.h"
#include "layout.h"
#include "log.h"
#include "manager.h"
#include "registry.h"
#include "snapshot.h"
#include "testhook.h"

struct membuf {
    void *p;
    size_t cap;
    size_t size;
};

struct snapstore {
    int nslots;
    struct membuf *l1; /* ring */
    int l1_committed;  /* index, -1: none */
    struct membuf l2[2];
    int l2_committed; /* index, -1: none */
    int l2_ward;      /* old rank whose copy l2[l2_committed] is, -1: none */
    struct snapmeta *meta;
};

struct snapmeta *snapmeta_create (int n, int na, int nb)
{
    struct snapmeta *sm = calloc (1, sizeof (*sm));
    int nn = n > 0 ? n : 1;

    if (!sm)
        return NULL;
    sm->step = -1;
    sm->n = n;
    sm->na = na;
    sm->nb = nb;
    if (!(sm->holder = calloc (nn, sizeof (int))) ||
        !(sm->buddy = calloc (nn, sizeof (int))) ||
        !(sm->counts = calloc ((size_t)nn * (na > 0 ? na : 1), sizeof (uint64_t))) ||
        !(sm->blobsz = calloc ((size_t)nn * (nb > 0 ? nb : 1), sizeof (uint64_t))) ||
        !(sm->bytes = calloc (nn, sizeof (uint64_t)))) {
        snapmeta_destroy (sm);
        return NULL;
    }
    return sm;
}

void snapmeta_destroy (struct snapmeta *sm)
{
    int saved = errno;
    if (sm) {
        free (sm->holder);
        free (sm->buddy);
        free (sm->counts);
        free (sm->blobsz);
        free (sm->bytes);
        free (sm);
    }
    errno = saved;
}

uint64_t snapmeta_array_offset (const struct snapmeta *sm,
                                const struct registry *reg,
                                int j,
                                int a)
{
    uint64_t off = reg->vbytes;
    for (int i = 0; i < a; i++)
        off += sm->counts[(size_t)j * sm->na + i] * reg->a[i].elem_size;
    return off;
}

uint64_t
snapmeta_blob_offset (const struct snapmeta *sm, const struct registry *reg, int j, int b)
{
    uint64_t off = snapmeta_array_offset (sm, reg, j, sm->na);
    for (int i = 0; i < b; i++)
        off += sm->blobsz[(size_t)j * sm->nb + i];
    return off;
}

struct snapstore *snapstore_create (int nslots)
{
    struct snapstore *s = calloc (1, sizeof (*s));

    if (!s)
        return NULL;
    s->nslots = nslots;
    s->l1_committed = -1;
    s->l2_committed = -1;
    s->l2_ward = -1;
    if (!(s->l1 = calloc (nslots, sizeof (s->l1[0]))) ||
        !(s->meta = snapmeta_create (0, 0, 0))) {
        snapstore_destroy (s);
        return NULL;
    }
    return s;
}

void snapstore_destroy (struct snapstore *s)
{
    int saved = errno;
    if (s) {
        for (int i = 0; s->l1 && i < s->nslots; i++)
            free (s->l1[i].p);
        free (s->l1);
        free (s->l2[0].p);
        free (s->l2[1].p);
        snapmeta_destroy (s->meta);
        free (s);
    }
    errno = saved;
}

struct snapmeta *snapstore_meta (struct snapstore *s)
{
    return s->meta;
}

void snapstore_set_meta (struct snapstore *s, struct snapmeta *sm)
{
    snapmeta_destroy (s->meta);
    s->meta = sm;
}

const void *snapstore_source (struct snapstore *s, int me, int j)
{
    struct snapmeta *sm = s->meta;

    if (sm->step < 0 || j < 0 || j >= sm->n)
        return NULL;
    if (sm->holder[j] == me && s->l1_committed >= 0)
        return s->l1[s->l1_committed].p;
    if (sm->buddy[j] == me && s->l2_committed >= 0 && s->l2_ward == j)
        return s->l2[s->l2_committed].p;
    return NULL;
}

static int membuf_reserve (struct membuf *b, size_t size)
{
    void *p;

    if (size <= b->cap)
        return 0;
    if (!(p = realloc (b->p, size)))
        return -1;
    b->p = p;
    b->cap = size;
    return 0;
}

/* Serialize the registered state into b; -1 if memory runs out. */
static int serialize (const struct registry *reg, struct membuf *b)
{
    size_t size = reg->vbytes;
    char *p;

    for (int i = 0; i < reg->na; i++)
        size += reg->a[i].count * reg->a[i].elem_size;
    for (int i = 0; i < reg->nb; i++)
        size += reg->b[i].size;
    if (membuf_reserve (b, size > 0 ? size : 1) < 0)
        return -1;
    p = b->p;
    for (int i = 0; i < reg->nv; i++) {
        memcpy (p, reg->v[i].data, reg->v[i].size);
        p += reg->v[i].size;
    }
    for (int i = 0; i < reg->na; i++) {
        size_t n = reg->a[i].count * reg->a[i].elem_size;
        if (n > 0)
            memcpy (p, reg->a[i].data, n);
        p += n;
    }
    for (int i = 0; i < reg->nb; i++) {
        if (reg->b[i].size > 0)
            memcpy (p, reg->b[i].data, reg->b[i].size);
        p += reg->b[i].size;
    }
    b->size = size;
    return 0;
}

/* The node of every working rank: ELASTIC_TEST_RANKS_PER_NODE=R pretends
 * that original ranks [kR, (k+1)R) share a node; otherwise
 * MPI_COMM_TYPE_SHARED says.  Returns an MPI error code. */
static int node_ids (struct elastic_manager *m, int *node)
{
    const char *s = getenv ("ELASTIC_TEST_RANKS_PER_NODE");
    MPI_Comm nc = MPI_COMM_NULL;
    int rc, id;

    if (s && atoi (s) > 0) {
        for (int j = 0; j < m->nwork; j++)
            node[j] = m->slot[j] / atoi (s);
        return MPI_SUCCESS;
    }
    if ((rc = MPI_Comm_split_type (
             m->work, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &nc)) != MPI_SUCCESS)
        return rc; /* nc is undefined: not freed */
    MPI_Comm_set_errhandler (nc, MPI_ERRORS_RETURN);
    rc = MPI_Allreduce (&m->me, &id, 1, MPI_INT, MPI_MIN, nc);
    ft_free (&nc);
    if (rc != MPI_SUCCESS)
        return rc;
    return MPI_Allgather (&id, 1, MPI_INT, node, 1, MPI_INT, m->work);
}

static int compute_buddies (struct elastic_manager *m)
{
    int *node, rc;

    if (m->buddy_valid)
        return MPI_SUCCESS;
    if (!(node = malloc (m->nwork * sizeof (int))))
        return MPI_ERR_NO_MEM;
    if ((rc = node_ids (m, node)) == MPI_SUCCESS) {
        if (layout_buddies (m->nwork, node, m->buddy) < 0)
            rc = MPI_ERR_NO_MEM;
        else
            m->buddy_valid = 1;
    }
    free (node);
    return rc;
}

/* Post the L2 exchange: my serialized buffer to my buddy, my ward's into
 * the pending L2 buffer.  Messages are cut at 1 GiB. */
#define CHUNK ((size_t)1 << 30)

static int count_chunks (size_t n)
{
    return n == 0 ? 0 : (int)((n + CHUNK - 1) / CHUNK);
}

static int post_bytes (int send,
                       void *p,
                       size_t n,
                       int peer,
                       int tag,
                       MPI_Comm comm,
                       MPI_Request *r,
                       int *nr)
{
    for (size_t off = 0; off < n; off += CHUNK) {
        int len = (int)(n - off < CHUNK ? n - off : CHUNK);
        int rc =
            send ? MPI_Isend ((char *)p + off, len, MPI_BYTE, peer, tag, comm, &r[*nr])
                 : MPI_Irecv ((char *)p + off, len, MPI_BYTE, peer, tag, comm, &r[*nr]);
        if (rc != MPI_SUCCESS)
            return rc;
        (*nr)++;
    }
    return MPI_SUCCESS;
}

int snapshot_take (struct elastic_manager *m, int64_t step, elastic_error_t *err)
{
    struct snapstore *s = m->store;
    struct registry *reg = m->reg;
    int n = m->nwork, me = m->myslot, na = reg->na, nb = reg->nb;
    int L = na + nb + 1;
    int k = (s->l1_committed + 1) % s->nslots;
    int pend = s->l2_committed == 0 ? 1 : 0;
    int failure = 0, any_bad = 0, bad_rank = -1, flag, rc, ward = -1;
    uint64_t *row = NULL, *rows = NULL;
    MPI_Request *reqs = NULL;
    struct snapmeta *sm = NULL;
    char ebuf[200];
    int nr = 0;

    if (me < 0)
        return mgr_err (
            err, ELASTIC_ERR_STATE, "snapshot: an idle spare takes no snapshot");
    if (!(row = calloc (L, sizeof (uint64_t))) ||
        !(rows = calloc ((size_t)n * L, sizeof (uint64_t))))
        return mgr_err (err,
                        ELASTIC_ERR_NOMEM,
                        "snapshot of step %lld: out of memory",
                        (long long)step);
    if (serialize (reg, &s->l1[k]) < 0)
        row[L - 1] = UINT64_MAX;
    else {
        for (int a = 0; a < na; a++)
            row[a] = reg->a[a].count;
        for (int b = 0; b < nb; b++)
            row[na + b] = reg->b[b].size;
        row[L - 1] = s->l1[k].size;
    }
    s->l1[k].size = row[L - 1] == UINT64_MAX ? 0 : s->l1[k].size;
    if ((rc = MPI_Allgather (row, L, MPI_UINT64_T, rows, L, MPI_UINT64_T, m->work)) !=
        MPI_SUCCESS) {
        el_log (EL_DEBUG,
                "snapshot %lld: allgather: %s",
                (long long)step,
                ft_strerror (rc, ebuf, sizeof (ebuf)));
        failure = 1;
        ft_revoke (m->work);
        goto agree;
    }
    for (int j = 0; j < n; j++) {
        if (rows[(size_t)j * L + L - 1] == UINT64_MAX) {
            any_bad = 1;
            bad_rank = j;
        }
    }
    if (any_bad)
        goto agree;
    if ((rc = compute_buddies (m)) != MPI_SUCCESS) {
        failure = 1;
        ft_revoke (m->work);
        goto agree;
    }
    for (int j = 0; j < n; j++)
        if (m->buddy[j] == me)
            ward = j;
    if (ward >= 0) {
        size_t want = rows[(size_t)ward * L + L - 1];
        if (membuf_reserve (&s->l2[pend], want > 0 ? want : 1) < 0) {
            /* cannot receive: make everyone give up this snapshot */
            failure = 1;
            ft_revoke (m->work);
            goto agree;
        }
        s->l2[pend].size = want;
    }
    {
        size_t mine = s->l1[k].size;
        size_t theirs = ward >= 0 ? s->l2[pend].size : 0;
        int nreq = count_chunks (mine) + count_chunks (theirs);
        if (!(reqs = malloc ((nreq > 0 ? nreq : 1) * sizeof (MPI_Request)))) {
            failure = 1;
            ft_revoke (m->work);
            goto agree;
        }
        rc = MPI_SUCCESS;
        if (ward >= 0)
            rc = post_bytes (0, s->l2[pend].p, theirs, ward, TAG_L2, m->work, reqs, &nr);
        if (rc == MPI_SUCCESS && m->buddy[me] >= 0)
            rc = post_bytes (
                1, s->l1[k].p, mine, m->buddy[me], TAG_L2, m->work, reqs, &nr);
        testhook_check (
            m->hooks, m->me, step, m->in_event ? HOOK_PROTECT : HOOK_SNAPSHOT);
        if (rc != MPI_SUCCESS)
            ft_revoke (m->work);
        if (ft_waitall (nr, reqs, m->work) != MPI_SUCCESS || rc != MPI_SUCCESS) {
            failure = 1;
            goto agree;
        }
    }
agree:
    if (!failure && !any_bad && !(sm = snapmeta_create (n, na, nb))) {
        any_bad = 1;
        bad_rank = me;
    }
    flag = W_IN_SNAPSHOT | W_NOT_DONE | W_GROW | (failure || any_bad ? 0 : W_SNAP_OK) |
           (failure ? 0 : W_NO_FAILURE);
    rc = ft_agree (m->work, &flag);
    if (rc == MPI_SUCCESS && (flag & W_SNAP_OK)) {
        sm->step = step;
        for (int j = 0; j < n; j++) {
            sm->holder[j] = m->slot[j];
            sm->buddy[j] = m->buddy[j] >= 0 ? m->slot[m->buddy[j]] : -1;
            for (int a = 0; a < na; a++)
                sm->counts[(size_t)j * na + a] = rows[(size_t)j * L + a];
            for (int b = 0; b < nb; b++)
                sm->blobsz[(size_t)j * nb + b] = rows[(size_t)j * L + na + b];
            sm->bytes[j] = rows[(size_t)j * L + L - 1];
        }
        s->l1[k].size = sm->bytes[me];
        s->l1_committed = k;
        if (ward >= 0) {
            s->l2_committed = pend;
            s->l2_ward = ward;
        } else {
            s->l2_committed = -1;
            s->l2_ward = -1;
        }
        snapstore_set_meta (s, sm);
        sm = NULL;
        elastic_progress_snapshot (step);
        el_log (EL_DEBUG,
                "snapshot of step %lld committed (%zu bytes, L2 of rank %d)",
                (long long)step,
                s->l1[k].size,
                ward);
        rc = ELASTIC_OK;
        goto out;
    }
    if (rc != MPI_SUCCESS || failure ||
        (flag & (W_NO_FAILURE | W_IN_SNAPSHOT)) != (W_NO_FAILURE | W_IN_SNAPSHOT)) {
        /* a failure, or ranks that entered a world event instead: this was
         * the last agreement on work */
        m->work_final = 1;
        m->work_result = rc == MPI_SUCCESS ? flag : flag & ~W_NO_FAILURE;
        ft_revoke (m->work);
        ft_revoke (m->world);
        rc = mgr_err (err,
                      ELASTIC_ERR_PROC_FAILED,
                      "snapshot of step %lld interrupted by a process failure",
                      (long long)step);
        goto out;
    }
    if (bad_rank >= 0)
        rc = mgr_err (err,
                      ELASTIC_ERR_NOMEM,
                      "snapshot of step %lld not taken: out of memory on working rank %d",
                      (long long)step,
                      bad_rank);
    else
        rc = mgr_err (err,
                      ELASTIC_ERR_NOMEM,
                      "snapshot of step %lld not taken: out of memory on another rank",
                      (long long)step);
out:
    snapmeta_destroy (sm);
    free (row);
    free (rows);
    free (reqs);
    return rc;
}
