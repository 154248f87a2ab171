/* restore.c - move a committed snapshot into a new layout; blob fetches */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#include "ft.h"
#include "layout.h"
#include "log.h"
#include "manager.h"
#include "gpu.h"
#include "restore.h"

struct plan *plan_create (int norig, int na)
{
    struct plan *p = calloc (1, sizeof (*p));
    int nn = norig > 0 ? norig : 1;

    if (!p)
        return NULL;
    if (!(p->slot = calloc (nn, sizeof (int))) ||
        !(p->spare = calloc (nn, sizeof (int))) ||
        !(p->used = calloc (nn, sizeof (int))) ||
        !(p->counts = calloc ((size_t)nn * (na > 0 ? na : 1), sizeof (uint64_t)))) {
        plan_destroy (p);
        return NULL;
    }
    return p;
}

void plan_destroy (struct plan *p)
{
    int saved = errno;
    if (p) {
        free (p->slot);
        free (p->spare);
        free (p->used);
        free (p->counts);
        free (p);
    }
    errno = saved;
}

static int rank_in (const int *v, int n, int r)
{
    for (int i = 0; i < n; i++)
        if (v[i] == r)
            return i;
    return -1;
}

int plan_source (const struct elastic_manager *m, const struct plan *p, int j)
{
    const struct snapmeta *sm = snapstore_meta (m->store);

    if (j < 0 || j >= sm->n)
        return -1;
    if (rank_in (p->slot, p->n, sm->holder[j]) >= 0)
        return sm->holder[j];
    if (sm->buddy[j] >= 0 && rank_in (p->slot, p->n, sm->buddy[j]) >= 0)
        return sm->buddy[j];
    return -1;
}

/* Requests of one exchange, grown on demand. */
struct xfer {
    MPI_Request *r;
    int n, cap;
    int rc;
};

#define CHUNK ((size_t)1 << 30)

static void xfer_post (
    struct xfer *x, int send, void *p, size_t bytes, int peer, int tag, MPI_Comm comm)
{
    for (size_t off = 0; off < bytes && x->rc == MPI_SUCCESS; off += CHUNK) {
        int len = (int)(bytes - off < CHUNK ? bytes - off : CHUNK);
        if (x->n == x->cap) {
            int cap = x->cap ? 2 * x->cap : 64;
            MPI_Request *r = realloc (x->r, cap * sizeof (*r));
            if (!r) {
                x->rc = MPI_ERR_NO_MEM;
                return;
            }
            x->r = r;
            x->cap = cap;
        }
        x->rc =
            send
                ? MPI_Isend ((char *)p + off, len, MPI_BYTE, peer, tag, comm, &x->r[x->n])
                : MPI_Irecv (
                      (char *)p + off, len, MPI_BYTE, peer, tag, comm, &x->r[x->n]);
        if (x->rc == MPI_SUCCESS)
            x->n++;
    }
}

struct array_ctx {
    struct elastic_manager *m;
    const struct plan *p;
    MPI_Comm comm;
    int myrank;
    int a;
    int *src; /* [old n] source working rank (in p) of old rank j */
    struct xfer *x;
};

static void array_piece (int j,
                         int k,
                         uint64_t lo,
                         uint64_t hi,
                         uint64_t old_start,
                         uint64_t new_start,
                         void *arg)
{
    struct array_ctx *c = arg;
    struct registry *reg = c->m->reg;
    const struct snapmeta *sm = snapstore_meta (c->m->store);
    size_t es = reg->a[c->a].elem_size;
    size_t bytes = (hi - lo) * es;
    int src = c->src[j];

    if (c->x->rc != MPI_SUCCESS)
        return;
    if (src == c->myrank) {
        const char *base = snapstore_source (c->m->store, c->m->me, j);
        const char *from;
        if (!base) {
            c->x->rc = MPI_ERR_INTERN;
            return;
        }
        from = base + snapmeta_array_offset (sm, reg, j, c->a) + (lo - old_start) * es;
        if (k == c->myrank)
            memcpy ((char *)reg->a[c->a].rbuf + (lo - new_start) * es, from, bytes);
        else
            xfer_post (c->x, 1, (void *)from, bytes, k, TAG_RESTORE, c->comm);
    } else if (k == c->myrank)
        xfer_post (c->x,
                   0,
                   (char *)reg->a[c->a].rbuf + (lo - new_start) * es,
                   bytes,
                   src,
                   TAG_RESTORE,
                   c->comm);
}

/* The new layout is the snapshot's: same size, same counts. */
static int same_layout (const struct snapmeta *sm, const struct plan *p, int na)
{
    if (p->n != sm->n)
        return 0;
    for (size_t i = 0; i < (size_t)p->n * na; i++)
        if (p->counts[i] != sm->counts[i])
            return 0;
    return 1;
}

/* Copy old rank j's array blocks out of its serialized snapshot at base
 * into the restored blocks (the layout is the snapshot's). */
static void copy_blocks (struct elastic_manager *m, int j, const char *base)
{
    struct registry *reg = m->reg;
    const struct snapmeta *sm = snapstore_meta (m->store);

    for (int a = 0; a < reg->na; a++) {
        size_t n = reg->a[a].rcount * reg->a[a].elem_size;
        if (n > 0)
            memcpy (reg->a[a].rbuf, base + snapmeta_array_offset (sm, reg, j, a), n);
    }
}

int restore_exchange (struct elastic_manager *m,
                      const struct plan *p,
                      MPI_Comm newwork,
                      int myrank,
                      void *values)
{
    struct registry *reg = m->reg;
    const struct snapmeta *sm = snapstore_meta (m->store);
    struct xfer x = {0};
    int *src = NULL, na = reg->na, rc, same = 0;
    char *staged = NULL;

    registry_clear_restore (reg);
    if (!(src = malloc ((sm->n > 0 ? sm->n : 1) * sizeof (int)))) {
        x.rc = MPI_ERR_NO_MEM;
        goto done;
    }
    for (int j = 0; j < sm->n; j++) {
        int o = plan_source (m, p, j);
        src[j] = o >= 0 ? rank_in (p->slot, p->n, o) : -1;
        if (src[j] < 0) {
            el_log (EL_ERROR, "restore: no source for old rank %d", j);
            x.rc = MPI_ERR_INTERN;
            goto done;
        }
    }
    for (int a = 0; a < na; a++) {
        struct reg_array *ra = &reg->a[a];
        uint64_t c = p->counts[(size_t)myrank * na + a];
        ra->rcount = c;
        if (ra->is_dev) {
            /* into the pinned mirror; the device buffer gets it before the
             * handler (gpu_place_arrays) or in elastic_array_restore */
            if (gpu_mirror_reserve (ra, c) < 0) {
                x.rc = MPI_ERR_NO_MEM;
                goto done;
            }
            ra->rbuf = ra->data;
            ra->rbuf_app = 1;
        } else if (ra->place) {
            /* straight into the application's buffer (see
             * elastic_array_set_realloc): it is the array's storage now */
            void *q = ra->place (ra->data, ra->count, c, ra->place_arg);
            if (!q && c > 0) {
                x.rc = MPI_ERR_NO_MEM;
                goto done;
            }
            ra->data = q;
            ra->count = c;
            ra->rbuf = q;
            ra->rbuf_app = 1;
        } else if (!(ra->rbuf = malloc (c > 0 ? c * ra->elem_size : 1))) {
            x.rc = MPI_ERR_NO_MEM;
            goto done;
        }
    }
    same = same_layout (sm, p, na);
    if (same) {
        /* The snapshot's layout (spares took the dead ranks' places): new
         * rank k's block is old rank k's.  A rank whose source is another
         * rank receives old rank k's whole serialized snapshot into its next
         * L1 slot, so that it can be adopted as this step's snapshot
         * (snapshot_adopt); the others copy from their own L1. */
        for (int k = 0; k < p->n && x.rc == MPI_SUCCESS; k++) {
            if (src[k] == myrank && k != myrank) {
                const char *base = snapstore_source (m->store, m->me, k);
                if (!base)
                    x.rc = MPI_ERR_INTERN;
                else
                    xfer_post (
                        &x, 1, (void *)base, sm->bytes[k], k, TAG_RESTORE, newwork);
            } else if (k == myrank && src[k] != myrank) {
                if (!(staged = snapstore_stage (m->store, k, sm->bytes[k])))
                    x.rc = MPI_ERR_NO_MEM;
                else
                    xfer_post (&x, 0, staged, sm->bytes[k], src[k], TAG_RESTORE, newwork);
            } else if (k == myrank) {
                const char *base = snapstore_source (m->store, m->me, k);
                if (!base)
                    x.rc = MPI_ERR_INTERN;
                else
                    copy_blocks (m, k, base);
            }
        }
    }
    /* arrays, in a fixed order on every rank so that messages between two
     * ranks match in posting order */
    for (int a = 0; a < na && !same && x.rc == MPI_SUCCESS; a++) {
        struct array_ctx c = {m, p, newwork, myrank, a, src, &x};
        layout_overlaps (sm->counts + a, sm->n, p->counts + a, p->n, na, array_piece, &c);
    }
    /* values, from old rank 0's source to everyone */
    if (x.rc == MPI_SUCCESS && reg->vbytes > 0) {
        if (src[0] == myrank) {
            const char *base = snapstore_source (m->store, m->me, 0);
            if (!base)
                x.rc = MPI_ERR_INTERN;
            for (int k = 0; k < p->n && x.rc == MPI_SUCCESS; k++) {
                if (k == myrank)
                    memcpy (values, base, reg->vbytes);
                else
                    xfer_post (&x, 1, (void *)base, reg->vbytes, k, TAG_RESTORE, newwork);
            }
        } else
            xfer_post (&x, 0, values, reg->vbytes, src[0], TAG_RESTORE, newwork);
    }
done:
    if (x.rc != MPI_SUCCESS)
        ft_revoke (newwork);
    rc = ft_waitall (x.n, x.r, newwork);
    if (x.rc == MPI_SUCCESS)
        x.rc = rc;
    if (x.rc == MPI_SUCCESS && staged)
        copy_blocks (m, myrank, staged);
    free (x.r);
    free (src);
    return x.rc;
}

int blob_fetch_refused (
    const char *name, int b, int n, const int *old_ranks, int nold, elastic_error_t *err)
{
    if (b < 0)
        return errcodef (err,
                         ELASTIC_ERR_NOT_FOUND,
                         "elastic_blob_fetch: no blob '%s'",
                         name ? name : "");
    for (int i = 0; i < n; i++)
        if (old_ranks[i] < 0 || old_ranks[i] >= nold)
            return errcodef (
                err,
                ELASTIC_ERR_NOT_FOUND,
                "elastic_blob_fetch: old rank %d is invalid (expected 0 to %d)",
                old_ranks[i],
                nold - 1);
    return errcodef (
        err, ELASTIC_ERR_NOT_FOUND, "elastic_blob_fetch: a bad request on another rank");
}

/* elastic_blob_fetch: collective over the working communicator inside a
 * handler.  Every rank says which old ranks it wants; each source sends. */
int elastic_blob_fetch (elastic_manager_t *m,
                        const char *name,
                        int n,
                        const int *old_ranks,
                        void **bufs,
                        size_t *sizes,
                        elastic_error_t *err)
{
    const struct snapmeta *sm;
    struct xfer x = {0};
    int b, nw, me, rc, total = 0, ok = 1, allok;
    int *counts = NULL, *displs = NULL, *all = NULL, *srcrank = NULL;
    char ebuf[200];

    if (!m || n < 0 || (n > 0 && (!old_ranks || !bufs || !sizes)))
        return errcodef (err, ELASTIC_ERR_INVAL, "elastic_blob_fetch: invalid arguments");
    if (!m->in_handler || m->work == MPI_COMM_NULL)
        return errcodef (
            err, ELASTIC_ERR_STATE, "elastic_blob_fetch: only inside a handler");
    if (m->l3_src)
        return resume_blob_fetch (m, name, n, old_ranks, bufs, sizes, err);
    sm = snapstore_meta (m->store);
    b = registry_find_blob (m->reg, name);
    for (int i = 0; i < n; i++) {
        bufs[i] = NULL;
        sizes[i] = 0;
        if (b < 0 || old_ranks[i] < 0 || old_ranks[i] >= sm->n)
            ok = 0;
    }
    /* agree on the arguments first, so that a bad call fails everywhere */
    rc = MPI_Allreduce (&ok, &allok, 1, MPI_INT, MPI_LAND, m->work);
    if (rc != MPI_SUCCESS)
        ft_revoke (m->work);
    if (rc != MPI_SUCCESS)
        return errcodef (err,
                         ELASTIC_ERR_PROC_FAILED,
                         "elastic_blob_fetch: %s",
                         ft_strerror (rc, ebuf, sizeof (ebuf)));
    if (!allok)
        return blob_fetch_refused (name, b, n, old_ranks, sm->n, err);
    MPI_Comm_size (m->work, &nw);
    me = m->myslot;
    if (!(counts = calloc (nw, sizeof (int))) || !(displs = calloc (nw, sizeof (int))) ||
        !(srcrank = malloc ((sm->n > 0 ? sm->n : 1) * sizeof (int)))) {
        rc = errcodef (err, ELASTIC_ERR_NOMEM, "elastic_blob_fetch: out of memory");
        goto out;
    }
    if ((rc = MPI_Allgather (&n, 1, MPI_INT, counts, 1, MPI_INT, m->work)) != MPI_SUCCESS)
        goto mpi_error;
    for (int r = 0; r < nw; r++) {
        displs[r] = total;
        total += counts[r];
    }
    if (!(all = malloc ((total > 0 ? total : 1) * sizeof (int)))) {
        rc = errcodef (err, ELASTIC_ERR_NOMEM, "elastic_blob_fetch: out of memory");
        goto out;
    }
    if ((rc = MPI_Allgatherv (
             old_ranks, n, MPI_INT, all, counts, displs, MPI_INT, m->work)) !=
        MPI_SUCCESS)
        goto mpi_error;
    for (int j = 0; j < sm->n; j++) {
        int o = sm->holder[j];
        srcrank[j] = mgr_slot_of (m, o);
        if (srcrank[j] < 0 && sm->buddy[j] >= 0)
            srcrank[j] = mgr_slot_of (m, sm->buddy[j]);
    }
    for (int i = 0; i < n; i++) {
        size_t sz = sm->blobsz[(size_t)old_ranks[i] * sm->nb + b];
        if (!(bufs[i] = malloc (sz > 0 ? sz : 1))) {
            rc = errcodef (err, ELASTIC_ERR_NOMEM, "elastic_blob_fetch: out of memory");
            ft_revoke (m->work);
            goto out;
        }
        sizes[i] = sz;
    }
    for (int r = 0; r < nw && x.rc == MPI_SUCCESS; r++) {
        for (int i = 0; i < counts[r] && x.rc == MPI_SUCCESS; i++) {
            int j = all[displs[r] + i];
            size_t sz = sm->blobsz[(size_t)j * sm->nb + b];
            int src = srcrank[j];
            if (src == me) {
                const char *base = snapstore_source (m->store, m->me, j);
                const char *from =
                    base ? base + snapmeta_blob_offset (sm, m->reg, j, b) : NULL;
                if (!from) {
                    x.rc = MPI_ERR_INTERN;
                    break;
                }
                if (r == me)
                    memcpy (bufs[i], from, sz);
                else
                    xfer_post (&x, 1, (void *)from, sz, r, TAG_BLOB, m->work);
            } else if (r == me)
                xfer_post (&x, 0, bufs[i], sz, src, TAG_BLOB, m->work);
        }
    }
    if (x.rc != MPI_SUCCESS)
        ft_revoke (m->work);
    rc = ft_waitall (x.n, x.r, m->work);
    if (x.rc == MPI_SUCCESS)
        x.rc = rc;
    if ((rc = x.rc) != MPI_SUCCESS)
        goto mpi_error;
    rc = ELASTIC_OK;
    goto out;
mpi_error:
    ft_revoke (m->work);
    rc = errcodef (err,
                   ELASTIC_ERR_PROC_FAILED,
                   "elastic_blob_fetch: %s",
                   ft_strerror (rc, ebuf, sizeof (ebuf)));
out:
    if (rc != ELASTIC_OK) {
        for (int i = 0; i < n; i++) {
            free (bufs[i]);
            bufs[i] = NULL;
            sizes[i] = 0;
        }
    }
    free (x.r);
    free (counts);
    free (displs);
    free (all);
    free (srcrank);
    return rc;
}
