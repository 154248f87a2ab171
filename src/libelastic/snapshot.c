/* snapshot.c - L1 (own memory) and L2 (buddy) in-memory snapshots */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mremap */
#endif
#include <sys/mman.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "diff.h"
#include "ft.h"
#include "gpu.h"
#include "layout.h"
#include "log.h"
#include "manager.h"
#include "preempt.h"
#include "registry.h"
#include "retire.h"
#include "snapshot.h"
#include "testhook.h"

struct membuf {
    void *p;
    size_t cap;
    size_t size;
    int pinned; /* page-locked for device copies (gpu_pin) */
};

static void membuf_free (struct membuf *b);

/* A snapshot whose L2 exchange is in flight (snapshot_begin). */
struct inflight {
    int active;
    int64_t step;
    int k, pend, ward, L, X;
    int failure, any_bad, bad_rank;
    int dev_pending;       /* device arrays: L1 bytes and L2 exchange at finish */
    int dev_direct;        /* ... copied straight into the L1 slot (no mirror) */
    int dev_bad;           /* ... and their copy failed here */
    uint64_t *rows;        /* [n * X] sizes of every rank (X = L + 2: then the
                              number of extents it sends, 0: all of it, and the
                              old rank + 1 whose L2 copy it holds, 0: none) */
    int tx_diff, rx_diff;  /* my L2 send / receive is differential */
    struct extents tx, rx; /* ... of these extents of the snapshot */
    MPI_Request *reqs;
    int nr;
    double spent; /* seconds in the library's calls for it so far */
};

struct snapstore {
    int nslots;
    struct membuf *l1; /* ring */
    int l1_committed;  /* index, -1: none */
    struct membuf l2[2];
    int l2_committed; /* index, -1: none */
    int l2_ward;      /* old rank whose copy l2[l2_committed] is, -1: none */
    int staged;       /* old rank whose serialized snapshot the next L1 slot
                         holds (snapstore_stage), -1: none */
    struct snapmeta *meta;
    struct inflight fl;
    struct diffstore *diff;         /* differential snapshots (diff.h) */
    struct membuf txstage, rxstage; /* their changed bytes, packed */
    int pin_failed;                 /* gpu_pin failed once: mirrors only */
    int diff_base;                  /* the committed snapshot can be a base... */
    uint64_t diff_gen;              /* ... in this world generation */
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

void snapmeta_row_get (const struct snapmeta *sm, int j, uint64_t *row)
{
    memcpy (row, sm->counts + (size_t)j * sm->na, sm->na * sizeof (uint64_t));
    memcpy (row + sm->na, sm->blobsz + (size_t)j * sm->nb, sm->nb * sizeof (uint64_t));
    row[sm->na + sm->nb] = sm->bytes[j];
}

void snapmeta_row_set (struct snapmeta *sm, int j, const uint64_t *row)
{
    memcpy (sm->counts + (size_t)j * sm->na, row, sm->na * sizeof (uint64_t));
    memcpy (sm->blobsz + (size_t)j * sm->nb, row + sm->na, sm->nb * sizeof (uint64_t));
    sm->bytes[j] = row[sm->na + sm->nb];
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
    s->staged = -1;
    if (!(s->diff = diff_create (nslots)) ||
        !(s->l1 = calloc (nslots, sizeof (s->l1[0]))) ||
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
            membuf_free (&s->l1[i]);
        free (s->l1);
        membuf_free (&s->l2[0]);
        membuf_free (&s->l2[1]);
        membuf_free (&s->txstage);
        membuf_free (&s->rxstage);
        free (s->fl.rows);
        free (s->fl.reqs);
        ext_free (&s->fl.tx);
        ext_free (&s->fl.rx);
        diff_destroy (s->diff);
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
    s->diff_base = 0; /* a new snapshot: a base once its commit says so */
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

/* Snapshot buffers are anonymous mappings in whole 2 MiB units, marked for
 * transparent huge pages: a fresh buffer (a spare's, one that grows after a
 * shrink) faults in 2 MiB at a time instead of 4 KiB, and the copies into
 * it miss the TLB less.  They grow with mremap (no copy of the pages). */
#define MEMBUF_UNIT ((size_t)2 << 20)

static int membuf_reserve (struct membuf *b, size_t size)
{
    size_t cap;
    void *p;

    if (size <= b->cap)
        return 0;
    cap = (size + MEMBUF_UNIT - 1) / MEMBUF_UNIT * MEMBUF_UNIT;
    if (b->pinned) {
        gpu_unpin (b->p); /* page-locked again at the next device snapshot */
        b->pinned = 0;
    }
    if (b->p)
        p = mremap (b->p, b->cap, cap, MREMAP_MAYMOVE);
    else
        p = mmap (NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
#ifdef MADV_HUGEPAGE
    madvise (p, cap, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    b->p = p;
    b->cap = cap;
    return 0;
}

static void membuf_free (struct membuf *b)
{
    if (b->pinned)
        gpu_unpin (b->p);
    b->pinned = 0;
    if (b->p)
        munmap (b->p, b->cap);
    b->p = NULL;
    b->cap = 0;
}

void *snapstore_stage (struct snapstore *s, int j, size_t size)
{
    int k = (s->l1_committed + 1) % s->nslots;
    struct membuf *b = &s->l1[k];

    s->staged = -1;
    diff_forget_slot (s->diff, k); /* its bytes are replaced */
    diff_uncommitted (s->diff);
    s->diff_base = 0;
    if (membuf_reserve (b, size > 0 ? size : 1) < 0)
        return NULL;
    b->size = size;
    s->staged = j;
    return b->p;
}

/* 1 if array a (bytes on this rank) is snapshotted differentially. */
static int
diff_on (const struct elastic_manager *m, const struct reg_array *ra, size_t bytes)
{
    if (bytes == 0 || !diff_available () || ra->diff == ELASTIC_DIFF_OFF || ra->is_dev)
        return 0;
    return ra->diff == ELASTIC_DIFF_ON ||
           (m->cfg.diff_threshold_kib > 0 &&
            bytes >= (size_t)m->cfg.diff_threshold_kib * 1024);
}

/* Copy n bytes of a registered item into an L1 slot.  A large copy
 * bypasses the caches (non-temporal stores: SSE2, which every x86-64 CPU
 * has), four pages at a time, a cache line from each in turn, so that
 * four streams of stores are open at once: nothing reads the slot before
 * the next snapshot but the buddy's receive.  glibc's memcpy keeps cached
 * stores (rep movsb) up to about three quarters of the last-level cache:
 * two ranks copying 8 MiB each at once took 1.4-1.8 ms with it and
 * 0.9-1.1 ms with this; at 64 MiB, where glibc streams too, the two are
 * within their spread (6.8-9.0 and 7.4-8.7 ms; doc/benchmarks.md,
 * 2026-12-07).  t1017 and t1018 restore a 1 MiB array per rank that
 * follows a grid of an unaligned size in L1 (the head, the pages and the
 * tail) after real kills, and check every word. */
#define L1_STREAM_MIN ((size_t)1 << 20)
#define L1_PAGE       ((size_t)4096)

static void l1_copy (void *dst, const void *src, size_t n)
{
#if defined(__x86_64__) && defined(__SSE2__)
    char *d = dst;
    const char *s = src;
    size_t head, body;

    if (n < L1_STREAM_MIN) {
        memcpy (dst, src, n);
        return;
    }
    head = (64 - ((uintptr_t)d & 63)) & 63; /* to a cache line of d */
    memcpy (d, s, head);
    d += head;
    s += head;
    n -= head;
    body = n - n % (4 * L1_PAGE);
    for (size_t g = 0; g < body; g += 4 * L1_PAGE)
        for (size_t i = 0; i < L1_PAGE; i += 64)
            for (size_t k = 0; k < 4; k++) {
                const char *x = s + g + k * L1_PAGE + i;
                char *y = d + g + k * L1_PAGE + i;
                __m128i a = _mm_loadu_si128 ((const __m128i *)x);
                __m128i b = _mm_loadu_si128 ((const __m128i *)(x + 16));
                __m128i c = _mm_loadu_si128 ((const __m128i *)(x + 32));
                __m128i e = _mm_loadu_si128 ((const __m128i *)(x + 48));
                _mm_stream_si128 ((__m128i *)y, a);
                _mm_stream_si128 ((__m128i *)(y + 16), b);
                _mm_stream_si128 ((__m128i *)(y + 32), c);
                _mm_stream_si128 ((__m128i *)(y + 48), e);
            }
    _mm_sfence (); /* the stores are visible before the slot is sent */
    memcpy (d + body, s + body, n - body);
#else
    memcpy (dst, src, n);
#endif
}

/* Serialize the registered state into L1 slot k (differential arrays: only
 * the blocks the slot does not hold), and list in tx what the L2 buddy
 * must receive; *diffed is 1 if tx leaves anything out.  -1 if memory
 * runs out. */
static int serialize (struct elastic_manager *m, int k, struct extents *tx, int *diffed)
{
    struct snapstore *s = m->store;
    const struct registry *reg = m->reg;
    struct membuf *b = &s->l1[k];
    size_t block = (size_t)m->cfg.diff_block_kib * 1024, size = 0, off = 0;
    struct reg_item it;
    int txbad = 0;

    *diffed = 0;
    tx->n = 0;
    REG_FOREACH (reg, it)
    size += it.bytes;
    if (membuf_reserve (b, size > 0 ? size : 1) < 0)
        return -1;
    REG_FOREACH (reg, it)
    {
        if (it.kind == REG_ARRAY && diff_on (m, &reg->a[it.index], it.bytes)) {
            int d;
            if (diff_copy_array (
                    s->diff, it.index, k, it.data, it.bytes, off, block, b->p, tx, &d) ==
                0) {
                *diffed |= d;
                off += it.bytes;
                continue;
            }
            el_log (EL_DEBUG,
                    "snapshot: array '%s': out of memory for its block hashes: copied "
                    "in full",
                    it.name);
            txbad = 1; /* tx may hold part of it: send everything */
        }
        if (it.kind == REG_ARRAY)
            diff_forget_array (s->diff, it.index);
        /* a device array's bytes are still on their way to its mirror:
         * copied in by land_devices */
        if (it.bytes > 0 && !(it.kind == REG_ARRAY && reg->a[it.index].is_dev))
            l1_copy ((char *)b->p + off, it.data, it.bytes);
        if (ext_add (tx, off, it.bytes) < 0)
            txbad = 1;
        off += it.bytes;
    }
    b->size = size;
    if (txbad || (tx->n == 1 && tx->x[1] == size))
        *diffed = 0; /* send it all */
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
    if (rc == MPI_SUCCESS)
        ft_free (&nc);
    else
        retired_add (m->retired, &nc); /* its messages may still arrive */
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

/* The extents e of p packed into one contiguous buffer b, or unpacked from
 * it: a differential L2 exchange is one message (cut at CHUNK) of the
 * changed bytes, whatever their number of extents, since each message of a
 * rendezvous protocol costs a round trip (one message per extent was
 * several times slower on an oversubscribed node, a derived datatype over
 * the extents slower still).  Returns -1 when memory runs out (pack). */
static int pack_extents (struct membuf *b, const char *p, const struct extents *e)
{
    size_t size = ext_bytes (e), at = 0;

    if (membuf_reserve (b, size > 0 ? size : 1) < 0)
        return -1;
    for (int i = 0; i < e->n; i++) {
        memcpy ((char *)b->p + at, p + e->x[2 * i], e->x[2 * i + 1]);
        at += e->x[2 * i + 1];
    }
    b->size = size;
    return 0;
}

static void unpack_extents (char *p, const struct membuf *b, const struct extents *e)
{
    size_t at = 0;

    for (int i = 0; i < e->n; i++) {
        memcpy (p + e->x[2 * i], (const char *)b->p + at, e->x[2 * i + 1]);
        at += e->x[2 * i + 1];
    }
}

/* Is old rank j's L2 send differential in f (the same answer on j and on
 * its buddy)?  Its buddy holds its committed copy of this world and
 * layout, and it sends a list of extents. */
static int pair_diff (const struct elastic_manager *m, const struct inflight *f, int j)
{
    const struct snapstore *s = m->store;
    const struct snapmeta *sm = s->meta;
    int b = m->buddy[j], na = m->reg->na, L = f->L, X = f->X;
    const uint64_t *rj = f->rows + (size_t)j * X;

    if (b < 0 || rj[L] == 0 || f->rows[(size_t)b * X + L + 1] != (uint64_t)j + 1)
        return 0;
    if (!s->diff_base || s->diff_gen != m->generation || sm->step < 0 ||
        sm->n != m->nwork || sm->na != na || sm->holder[j] != m->slot[j] ||
        sm->buddy[j] != m->slot[b])
        return 0;
    for (int i = 0; i < na; i++)
        if (rj[i] != sm->counts[(size_t)j * na + i])
            return 0; /* the arrays moved inside the buffer */
    return 1;
}

/* An overlapped snapshot's device copies, straight into L1 slot f->k
 * (page-locked once; if it cannot be, through the mirrors).  0, or -1
 * with why. */
static int
stage_direct (struct elastic_manager *m, struct inflight *f, char *why, size_t len)
{
    struct snapstore *s = m->store;
    struct membuf *b = &s->l1[f->k];

    if (!b->pinned && !s->pin_failed) {
        if (gpu_pin (b->p, b->cap) == 0)
            b->pinned = 1;
        else
            s->pin_failed = 1;
    }
    f->dev_direct = b->pinned;
    return gpu_stage_begin (m, b->pinned ? b->p : NULL, why, len);
}

/* Wait for the device arrays' copies (gpu_stage_begin) and, unless they
 * went straight into L1 slot f->k, copy them there from the mirrors.  0,
 * or -1 (logged). */
static int land_devices (struct elastic_manager *m, struct inflight *f)
{
    struct membuf *b = &m->store->l1[f->k];
    struct reg_item it;
    size_t off = 0;
    char why[512];

    if (gpu_stage_wait (m, why, sizeof (why)) < 0) {
        el_log (EL_ERROR, "snapshot: device arrays: %s", why);
        return -1;
    }
    if (f->dev_direct)
        return 0;
    REG_FOREACH (m->reg, it)
    {
        if (it.kind == REG_ARRAY && m->reg->a[it.index].is_dev && it.bytes > 0)
            memcpy ((char *)b->p + off, it.data, it.bytes);
        off += it.bytes;
    }
    return 0;
}

static void snap_post_l2 (struct elastic_manager *m, struct inflight *f);

/* Post a snapshot of step: the L1 copy, the sizes, the L2 exchange posted
 * into f.  Returns ELASTIC_OK (f in flight, or f->done when it stopped
 * early: a failure or out of memory, to be agreed on by snap_finish) or
 * ELASTIC_ERR_NOMEM before anything collective. */
static int snap_post (struct elastic_manager *m,
                      int64_t step,
                      int defer,
                      struct inflight *f,
                      elastic_error_t *err)
{
    struct snapstore *s = m->store;
    struct registry *reg = m->reg;
    int n = m->nwork, me = m->myslot, na = reg->na, nb = reg->nb;
    int L = na + nb + 1, X = L + 2, rc, diffed = 0, direct;
    uint64_t *row = NULL;
    struct extents tx = f->tx, rx = f->rx; /* their storage is reused */
    struct reg_item it;
    char ebuf[200];

    memset (f, 0, sizeof (*f));
    f->tx = tx;
    f->rx = rx;
    f->step = step;
    f->L = L;
    f->X = X;
    f->k = (s->l1_committed + 1) % s->nslots;
    f->pend = s->l2_committed == 0 ? 1 : 0;
    f->ward = -1;
    f->bad_rank = -1;
    s->staged = -1; /* slot k is overwritten */
    if (!s->diff_base || s->diff_gen != m->generation)
        diff_uncommitted (s->diff); /* the world changed: a full snapshot */
    if (!(row = calloc (X, sizeof (uint64_t))) ||
        !(f->rows = calloc ((size_t)n * X, sizeof (uint64_t)))) {
        free (row);
        free (f->rows);
        f->rows = NULL;
        return errcodef (err,
                         ELASTIC_ERR_NOMEM,
                         "snapshot of step %lld: out of memory",
                         (long long)step);
    }
    f->active = 1;
    /* device arrays: a synchronous snapshot starts their copies into the
     * mirrors now (the L3 writer reads the mirrors) and copies them into L1
     * before the L2 exchange; an overlapped one copies them straight into
     * the L1 slot once it is reserved, and waits at the next call */
    direct = defer && gpu_has_arrays (m);
    if (gpu_has_arrays (m) && !direct &&
        gpu_stage_begin (m, NULL, ebuf, sizeof (ebuf)) < 0) {
        el_log (
            EL_ERROR, "snapshot of step %lld: device arrays: %s", (long long)step, ebuf);
        f->dev_bad = 1;
        row[L - 1] = UINT64_MAX;
    } else if (serialize (m, f->k, &f->tx, &diffed) < 0)
        row[L - 1] = UINT64_MAX;
    else if (direct && stage_direct (m, f, ebuf, sizeof (ebuf)) < 0) {
        el_log (
            EL_ERROR, "snapshot of step %lld: device arrays: %s", (long long)step, ebuf);
        f->dev_bad = 1;
        row[L - 1] = UINT64_MAX;
    } else {
        REG_FOREACH (reg, it)
        if (it.col >= 0)
            row[it.col] = it.extent;
        row[L - 1] = s->l1[f->k].size;
        row[L] = diffed ? (uint64_t)f->tx.n : 0;
    }
    if (s->l2_committed >= 0 && s->l2_ward >= 0 && s->diff_base &&
        s->diff_gen == m->generation)
        row[L + 1] = (uint64_t)s->l2_ward + 1;
    s->l1[f->k].size = row[L - 1] == UINT64_MAX ? 0 : s->l1[f->k].size;
    rc = MPI_Allgather (row, X, MPI_UINT64_T, f->rows, X, MPI_UINT64_T, m->work);
    free (row);
    if (rc != MPI_SUCCESS) {
        el_log (EL_DEBUG,
                "snapshot %lld: allgather: %s",
                (long long)step,
                ft_strerror (rc, ebuf, sizeof (ebuf)));
        goto failed;
    }
    for (int j = 0; j < n; j++) {
        if (f->rows[(size_t)j * X + L - 1] == UINT64_MAX) {
            f->any_bad = 1;
            f->bad_rank = j;
        }
    }
    if (f->any_bad)
        return ELASTIC_OK;
    if ((rc = compute_buddies (m)) != MPI_SUCCESS)
        goto failed;
    for (int j = 0; j < n; j++)
        if (m->buddy[j] == me)
            f->ward = j;
    f->tx_diff = pair_diff (m, f, me);
    f->rx_diff = f->ward >= 0 && pair_diff (m, f, f->ward);
    if (f->ward >= 0) {
        size_t want = f->rows[(size_t)f->ward * X + L - 1];
        if (membuf_reserve (&s->l2[f->pend], want > 0 ? want : 1) < 0)
            goto failed; /* cannot receive: make everyone give up this snapshot */
        s->l2[f->pend].size = want;
    }
    if (gpu_has_arrays (m)) {
        if (defer) {
            /* the copies overlap the application's next step: L1 and the
             * L2 exchange at snap_finish */
            f->dev_pending = 1;
            return ELASTIC_OK;
        }
        if (land_devices (m, f) < 0)
            f->dev_bad = 1;
    }
    snap_post_l2 (m, f);
    return ELASTIC_OK;
failed:
    f->failure = 1;
    ft_revoke (m->work);
    return ELASTIC_OK;
}

/* Post f's L2 exchange (f->failure on an error: m->work revoked). */
static void snap_post_l2 (struct elastic_manager *m, struct inflight *f)
{
    struct snapstore *s = m->store;
    int me = m->myslot, L = f->L, X = f->X, rc;
    int64_t step = f->step;

    {
        size_t mine = s->l1[f->k].size;
        size_t theirs = f->ward >= 0 ? s->l2[f->pend].size : 0;
        MPI_Request lsend = MPI_REQUEST_NULL, lrecv = MPI_REQUEST_NULL;
        int nrx = 0, ntx = 0;
        rc = MPI_SUCCESS;
        /* a differential send starts with its list of extents */
        if (f->tx_diff)
            rc = MPI_Isend (f->tx.x,
                            2 * f->tx.n,
                            MPI_UINT64_T,
                            m->buddy[me],
                            TAG_L2,
                            m->work,
                            &lsend);
        if (rc == MPI_SUCCESS && f->rx_diff) {
            int nx = (int)f->rows[(size_t)f->ward * X + L];
            f->rx.n = 0;
            if (nx > f->rx.cap) {
                uint64_t *x = realloc (f->rx.x, (size_t)nx * 2 * sizeof (uint64_t));
                if (!x) {
                    rc = MPI_ERR_NO_MEM;
                    goto posted;
                }
                f->rx.x = x;
                f->rx.cap = nx;
            }
            f->rx.n = nx;
            rc = MPI_Irecv (
                f->rx.x, 2 * nx, MPI_UINT64_T, f->ward, TAG_L2, m->work, &lrecv);
            if (rc == MPI_SUCCESS)
                rc = ft_waitall (1, &lrecv, m->work);
            /* what is not sent comes from my committed copy */
            if (rc == MPI_SUCCESS && diff_fill (s->diff,
                                                s->l2[f->pend].p,
                                                theirs,
                                                s->l2[s->l2_committed].p,
                                                s->l2[s->l2_committed].size,
                                                &f->rx) < 0)
                rc = MPI_ERR_NO_MEM;
        }
        if (rc == MPI_SUCCESS && f->rx_diff &&
            membuf_reserve (&s->rxstage, ext_bytes (&f->rx) + 1) < 0)
            rc = MPI_ERR_NO_MEM;
        if (rc == MPI_SUCCESS && f->tx_diff &&
            pack_extents (&s->txstage, s->l1[f->k].p, &f->tx) < 0)
            rc = MPI_ERR_NO_MEM;
        if (rc != MPI_SUCCESS)
            goto posted;
        nrx = count_chunks (f->rx_diff ? ext_bytes (&f->rx) : theirs);
        ntx = count_chunks (f->tx_diff ? s->txstage.size : mine);
        if (!(f->reqs = malloc ((nrx + ntx + 1) * sizeof (MPI_Request)))) {
            rc = MPI_ERR_NO_MEM;
            goto posted;
        }
        f->reqs[f->nr++] = lsend;
        lsend = MPI_REQUEST_NULL;
        if (f->rx_diff)
            rc = post_bytes (0,
                             s->rxstage.p,
                             ext_bytes (&f->rx),
                             f->ward,
                             TAG_L2,
                             m->work,
                             f->reqs,
                             &f->nr);
        else if (f->ward >= 0)
            rc = post_bytes (
                0, s->l2[f->pend].p, theirs, f->ward, TAG_L2, m->work, f->reqs, &f->nr);
        if (rc == MPI_SUCCESS && m->buddy[me] >= 0) {
            if (f->tx_diff)
                rc = post_bytes (1,
                                 s->txstage.p,
                                 s->txstage.size,
                                 m->buddy[me],
                                 TAG_L2,
                                 m->work,
                                 f->reqs,
                                 &f->nr);
            else
                rc = post_bytes (1,
                                 s->l1[f->k].p,
                                 mine,
                                 m->buddy[me],
                                 TAG_L2,
                                 m->work,
                                 f->reqs,
                                 &f->nr);
        }
    posted:
        if (lsend != MPI_REQUEST_NULL) {
            /* not handed to f->reqs: ends with the revoke below */
            ft_revoke (m->work);
            ft_waitall (1, &lsend, m->work);
        }
        testhook_check (
            m->hooks, m->me, step, m->in_event ? HOOK_PROTECT : HOOK_SNAPSHOT);
        if (rc != MPI_SUCCESS) {
            ft_revoke (m->work);
            f->failure = 1;
        }
    }
}

static void snap_free (struct inflight *f)
{
    free (f->rows);
    free (f->reqs);
    f->rows = NULL;
    f->reqs = NULL;
    f->nr = 0;
    f->active = 0;
}

/* Complete the L2 exchange of f, agree and commit.  Returns as
 * snapshot_take. */
static int
snap_finish (struct elastic_manager *m, struct inflight *f, elastic_error_t *err)
{
    struct snapstore *s = m->store;
    int n = m->nwork, me = m->myslot, na = m->reg->na, nb = m->reg->nb;
    int X = f->X, k = f->k, ward = f->ward, flag, rc;
    int64_t step = f->step;
    struct snapmeta *sm = NULL;
    double t0 = mono_now ();

    if (f->dev_pending) {
        /* the device arrays' copies: into L1, then the L2 exchange */
        f->dev_pending = 0;
        if (land_devices (m, f) < 0)
            f->dev_bad = 1;
        snap_post_l2 (m, f);
    }
    if (f->dev_bad) {
        f->any_bad = 1;
        f->bad_rank = me;
    }
    if (ft_waitall (f->nr, f->reqs, m->work) != MPI_SUCCESS)
        f->failure = 1;
    f->nr = 0;
    if (!f->failure && f->rx_diff)
        unpack_extents (s->l2[f->pend].p, &s->rxstage, &f->rx);
    if (!f->failure && !f->any_bad && !(sm = snapmeta_create (n, na, nb))) {
        f->any_bad = 1;
        f->bad_rank = me;
    }
    flag = W_IN_SNAPSHOT | W_NOT_DONE | W_GROW |
           (f->failure || f->any_bad ? 0 : W_SNAP_OK) | (f->failure ? 0 : W_NO_FAILURE);
    rc = ft_agree (m->work, &flag);
    if (rc == MPI_SUCCESS && (flag & W_SNAP_OK)) {
        sm->step = step;
        for (int j = 0; j < n; j++) {
            sm->holder[j] = m->slot[j];
            sm->buddy[j] = m->buddy[j] >= 0 ? m->slot[m->buddy[j]] : -1;
            snapmeta_row_set (sm, j, f->rows + (size_t)j * X);
        }
        s->l1[k].size = sm->bytes[me];
        s->l1_committed = k;
        if (ward >= 0) {
            s->l2_committed = f->pend;
            s->l2_ward = ward;
        } else {
            s->l2_committed = -1;
            s->l2_ward = -1;
        }
        snapstore_set_meta (s, sm);
        sm = NULL;
        diff_committed (s->diff, ward >= 0 && f->rx_diff);
        s->diff_base = 1;
        s->diff_gen = m->generation;
        elastic_progress_snapshot (step);
        preempt_snapshot_time (m->pre, f->spent + (mono_now () - t0));
        {
            uint64_t hashed, copied, skipped;
            diff_stats (s->diff, &hashed, &copied, &skipped);
            el_log (EL_DEBUG,
                    "snapshot of step %lld committed (%zu bytes, L2 of rank %d; to the "
                    "buddy: %s; from the ward: %s; differential arrays so far: %llu "
                    "bytes hashed, %llu copied to L1, %llu skipped)",
                    (long long)step,
                    s->l1[k].size,
                    ward,
                    f->tx_diff ? "changed blocks" : "all",
                    f->rx_diff ? "changed blocks" : "all",
                    (unsigned long long)hashed,
                    (unsigned long long)copied,
                    (unsigned long long)skipped);
        }
        rc = ELASTIC_OK;
        goto out;
    }
    /* not committed: the next snapshot compares with nothing */
    diff_uncommitted (s->diff);
    s->diff_base = 0;
    if (rc != MPI_SUCCESS || f->failure ||
        (flag & (W_NO_FAILURE | W_IN_SNAPSHOT)) != (W_NO_FAILURE | W_IN_SNAPSHOT)) {
        /* a failure, or ranks that entered a world event instead: this was
         * the last agreement on work */
        m->work_final = 1;
        m->work_result = rc == MPI_SUCCESS ? flag : flag & ~W_NO_FAILURE;
        ft_revoke (m->work);
        ft_revoke (m->world);
        rc = errcodef (err,
                       ELASTIC_ERR_PROC_FAILED,
                       "snapshot of step %lld interrupted by a process failure",
                       (long long)step);
        goto out;
    }
    if (f->dev_bad)
        rc =
            errcodef (err,
                      ELASTIC_ERR_IO,
                      "snapshot of step %lld not taken: copying the device arrays failed",
                      (long long)step);
    else if (f->bad_rank >= 0)
        rc =
            errcodef (err,
                      ELASTIC_ERR_NOMEM,
                      "snapshot of step %lld not taken: out of memory on working rank %d",
                      (long long)step,
                      f->bad_rank);
    else
        rc = errcodef (err,
                       ELASTIC_ERR_NOMEM,
                       "snapshot of step %lld not taken: out of memory on another rank",
                       (long long)step);
out:
    snapmeta_destroy (sm);
    snap_free (f);
    return rc;
}

/* Complete any snapshot in flight, then copy to L1 and post the L2
 * exchange of step's snapshot. */
static int
snap_start (struct elastic_manager *m, int64_t step, int defer, elastic_error_t *err)
{
    double t0;
    int rc;

    if (m->myslot < 0)
        return errcodef (
            err, ELASTIC_ERR_STATE, "snapshot: an idle spare takes no snapshot");
    if ((rc = snapshot_complete (m, err)) != ELASTIC_OK)
        return rc;
    t0 = mono_now ();
    rc = snap_post (m, step, defer, &m->store->fl, err);
    m->store->fl.spent = mono_now () - t0;
    return rc;
}

int snapshot_take (struct elastic_manager *m, int64_t step, elastic_error_t *err)
{
    int rc;

    if ((rc = snap_start (m, step, 0, err)) != ELASTIC_OK)
        return rc;
    return snap_finish (m, &m->store->fl, err);
}

int snapshot_begin (struct elastic_manager *m, int64_t step, elastic_error_t *err)
{
    struct snapstore *s = m->store;
    int rc;

    if ((rc = snap_start (m, step, 1, err)) != ELASTIC_OK)
        return rc;
    if (s->fl.failure || s->fl.any_bad)
        return snap_finish (m, &s->fl, err); /* agree on it now */
    return ELASTIC_OK;
}

int snapshot_complete (struct elastic_manager *m, elastic_error_t *err)
{
    struct snapstore *s = m->store;

    if (!s->fl.active)
        return ELASTIC_OK;
    return snap_finish (m, &s->fl, err);
}

int snapshot_overlap (void)
{
    static int on = -1;
    if (on < 0) {
        const char *v = getenv ("ELASTIC_SNAPSHOT_OVERLAP");
        on = !(v && !strcmp (v, "0"));
    }
    return on;
}

int64_t snapshot_in_flight (struct snapstore *s)
{
    return s->fl.active ? s->fl.step : -1;
}

void snapshot_discard (struct elastic_manager *m)
{
    struct snapstore *s = m->store;

    if (!s->fl.active)
        return;
    if (s->fl.dev_pending) {
        char why[256];
        gpu_stage_wait (m, why, sizeof (why)); /* the mirrors are written */
        s->fl.dev_pending = 0;
    }
    ft_revoke (m->work);
    ft_waitall (s->fl.nr, s->fl.reqs, m->work);
    snap_free (&s->fl);
    diff_uncommitted (s->diff);
    s->diff_base = 0;
}

/* Can this rank adopt its restored state as old rank me's committed
 * snapshot?  img is set to its serialized image (own L1 or staged). */
static int adoptable (struct elastic_manager *m, const char **img)
{
    struct snapstore *s = m->store;
    const struct snapmeta *sm = s->meta;
    const struct registry *reg = m->reg;
    int n = m->nwork, me = m->myslot, na = reg->na, nb = reg->nb;
    struct reg_item it;
    const char *p;

    *img = NULL;
    if (me < 0 || sm->step < 0 || sm->n != n || sm->na != na || sm->nb != nb)
        return 0;
    for (size_t i = 0; i < (size_t)n * na; i++)
        if (sm->counts[i] != m->layout[i])
            return 0;
    if (sm->holder[me] == m->me && s->l1_committed >= 0)
        *img = s->l1[s->l1_committed].p;
    else if (s->staged == me)
        *img = s->l1[(s->l1_committed + 1) % s->nslots].p;
    else
        return 0;
    /* the values and blobs as registered now are the snapshot's, and
     * every array was restored in place, so its storage holds what the
     * snapshot holds (elastic_array_set_realloc) */
    p = *img;
    REG_FOREACH (reg, it)
    {
        if (it.kind == REG_ARRAY) {
            const struct reg_array *ra = &reg->a[it.index];
            if (!ra->in_place || ra->data != ra->rbuf ||
                ra->count != sm->counts[(size_t)me * na + it.index])
                return 0;
        } else if (it.kind == REG_BLOB &&
                   it.bytes != sm->blobsz[(size_t)me * nb + it.index])
            return 0;
        else if (it.bytes > 0 && memcmp (p, it.data, it.bytes) != 0)
            return 0;
        p += it.kind == REG_ARRAY ? sm->counts[(size_t)me * na + it.index] * it.unit
                                  : it.bytes;
    }
    return 1;
}

int snapshot_adopt (struct elastic_manager *m, elastic_error_t *err)
{
    struct snapstore *s = m->store;
    struct snapmeta *sm = s->meta, *nsm = NULL;
    int n = m->nwork, me = m->myslot, na = m->reg->na, nb = m->reg->nb;
    int pend = s->l2_committed == 0 ? 1 : 0;
    int ok, all = 0, failure = 0, flag, rc, ward = -1, keep = 0, nr = 0;
    int64_t step = sm->step;
    const char *img = NULL;
    MPI_Request *reqs = NULL;
    char ebuf[200];

    if (me < 0)
        return errcodef (err, ELASTIC_ERR_STATE, "adopt: an idle spare adopts nothing");
    diff_uncommitted (s->diff); /* the L2 copies move: the next snapshot is full */
    s->diff_base = 0;
    /* the new world's buddies (collective) */
    m->buddy_valid = 0;
    if ((rc = compute_buddies (m)) != MPI_SUCCESS) {
        el_log (EL_DEBUG, "adopt: buddies: %s", ft_strerror (rc, ebuf, sizeof (ebuf)));
        failure = 1;
        ft_revoke (m->work);
        goto agree;
    }
    ok = adoptable (m, &img);
    for (int j = 0; j < n; j++)
        if (m->buddy[j] == me)
            ward = j;
    if (ok && ward >= 0) {
        /* my ward's L2 copy: kept if I held it already, else received */
        keep = sm->buddy[ward] == m->me;
        if (keep && (s->l2_committed < 0 || s->l2_ward != ward))
            ok = 0;
        if (!keep &&
            membuf_reserve (&s->l2[pend], sm->bytes[ward] > 0 ? sm->bytes[ward] : 1) < 0)
            ok = 0;
    }
    if (ok && !(nsm = snapmeta_create (n, na, nb)))
        ok = 0;
    if (ok && !(reqs = malloc ((count_chunks (sm->bytes[me]) +
                                (ward >= 0 ? count_chunks (sm->bytes[ward]) : 0) + 1) *
                               sizeof (MPI_Request))))
        ok = 0;
    if ((rc = MPI_Allreduce (&ok, &all, 1, MPI_INT, MPI_MIN, m->work)) != MPI_SUCCESS) {
        failure = 1;
        ft_revoke (m->work);
        goto agree;
    }
    if (!all) {
        snapmeta_destroy (nsm);
        free (reqs);
        return errcodef (err,
                         ELASTIC_ERR_STATE,
                         "the restored state of step %lld cannot be adopted",
                         (long long)step);
    }
    /* L2 copies whose buddy changed: only those move */
    rc = MPI_SUCCESS;
    if (ward >= 0 && !keep)
        rc = post_bytes (
            0, s->l2[pend].p, sm->bytes[ward], ward, TAG_L2, m->work, reqs, &nr);
    if (rc == MPI_SUCCESS && m->buddy[me] >= 0 && m->slot[m->buddy[me]] != sm->buddy[me])
        rc = post_bytes (
            1, (void *)img, sm->bytes[me], m->buddy[me], TAG_L2, m->work, reqs, &nr);
    testhook_check (m->hooks, m->me, step, HOOK_PROTECT);
    if (rc != MPI_SUCCESS)
        ft_revoke (m->work);
    if (ft_waitall (nr, reqs, m->work) != MPI_SUCCESS || rc != MPI_SUCCESS)
        failure = 1;
agree:
    free (reqs);
    flag = W_IN_SNAPSHOT | W_NOT_DONE | W_GROW | (failure ? 0 : W_SNAP_OK | W_NO_FAILURE);
    rc = ft_agree (m->work, &flag);
    if (rc == MPI_SUCCESS && (flag & W_SNAP_OK) && nsm) {
        nsm->step = step;
        for (int j = 0; j < n; j++) {
            nsm->holder[j] = m->slot[j];
            nsm->buddy[j] = m->buddy[j] >= 0 ? m->slot[m->buddy[j]] : -1;
            nsm->bytes[j] = sm->bytes[j];
        }
        memcpy (nsm->counts, sm->counts, (size_t)n * na * sizeof (uint64_t));
        memcpy (nsm->blobsz, sm->blobsz, (size_t)n * nb * sizeof (uint64_t));
        if (s->staged == me) {
            s->l1_committed = (s->l1_committed + 1) % s->nslots;
            s->l1[s->l1_committed].size = sm->bytes[me];
        }
        s->staged = -1;
        if (ward < 0) {
            s->l2_committed = -1;
            s->l2_ward = -1;
        } else if (!keep) {
            s->l2[pend].size = sm->bytes[ward];
            s->l2_committed = pend;
            s->l2_ward = ward;
        }
        snapstore_set_meta (s, nsm);
        el_log (EL_DEBUG,
                "restored state of step %lld adopted as its snapshot (L2 of rank %d %s)",
                (long long)step,
                ward,
                keep ? "kept" : "received");
        return ELASTIC_OK;
    }
    snapmeta_destroy (nsm);
    /* a failure, or ranks that entered a world event instead: this was the
     * last agreement on work (as in snapshot_take) */
    m->work_final = 1;
    m->work_result = rc == MPI_SUCCESS ? flag : flag & ~W_NO_FAILURE;
    ft_revoke (m->work);
    ft_revoke (m->world);
    return errcodef (
        err,
        ELASTIC_ERR_PROC_FAILED,
        "adopting the snapshot of step %lld interrupted by a process failure",
        (long long)step);
}
