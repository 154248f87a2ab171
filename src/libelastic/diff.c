/* diff.c - differential snapshots: the blocks of an array that changed */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#if HAVE_XXHASH
#include <xxhash.h>
#endif
#if HAVE_XXH3_DISPATCH
#include <xxh_x86dispatch.h> /* XXH3 with AVX2/AVX-512 where the CPU has them */
#define BLOCK_HASH XXH3_128bits_dispatch
#else
#define BLOCK_HASH XXH3_128bits
#endif

#include "diff.h"

/* An array that keeps changing is not worth hashing: when more than half
 * of its blocks changed, the next snapshots copy it in full without
 * hashing, 1, 2, 4 ... up to BACKOFF_MAX of them while it goes on
 * changing, then it is hashed again (two snapshots: one to learn the
 * hashes, one to compare). */
#define BACKOFF_MAX 32

struct hash128 {
    uint64_t lo, hi;
};

/* One differential array on the sender. */
struct diffarr {
    size_t off, bytes, block; /* the layout the state is for (bytes 0: none) */
    size_t nblk;
    struct hash128 *h; /* [nblk] hash at the last snapshot */
    uint64_t *id;      /* [nblk] content id of the live block then */
    uint64_t *slot;    /* [nslots * nblk] content id slot k holds (0: unknown) */
    int hash_valid;    /* h and id are the last committed snapshot's */
    int skip;          /* snapshots left to copy in full without hashing */
    int backoff;       /* the last skip */
};

struct diffstore {
    int nslots;
    int na;
    struct diffarr *a;
    uint64_t next_id;
    /* receiver: where l2[committed] and the other buffer may differ */
    struct extents l2_changed;
    int l2_all;
    struct extents rx; /* the extents of the receive in flight */
    uint64_t hashed, copied, skipped;
};

void ext_free (struct extents *e)
{
    free (e->x);
    e->x = NULL;
    e->n = e->cap = 0;
}

int ext_add (struct extents *e, uint64_t off, uint64_t len)
{
    if (len == 0)
        return 0;
    if (e->n > 0 && e->x[2 * e->n - 2] + e->x[2 * e->n - 1] == off) {
        e->x[2 * e->n - 1] += len;
        return 0;
    }
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 16;
        uint64_t *x = realloc (e->x, (size_t)cap * 2 * sizeof (uint64_t));
        if (!x)
            return -1;
        e->x = x;
        e->cap = cap;
    }
    e->x[2 * e->n] = off;
    e->x[2 * e->n + 1] = len;
    e->n++;
    return 0;
}

uint64_t ext_bytes (const struct extents *e)
{
    uint64_t sum = 0;
    for (int i = 0; i < e->n; i++)
        sum += e->x[2 * i + 1];
    return sum;
}

int diff_available (void)
{
#if HAVE_XXHASH
    return 1;
#else
    return 0;
#endif
}

struct diffstore *diff_create (int nslots)
{
    struct diffstore *d = calloc (1, sizeof (*d));

    if (!d)
        return NULL;
    d->nslots = nslots;
    d->l2_all = 1;
    return d;
}

static void arr_free (struct diffarr *da)
{
    free (da->h);
    free (da->id);
    free (da->slot);
    memset (da, 0, sizeof (*da));
}

void diff_destroy (struct diffstore *d)
{
    int saved = errno;

    if (d) {
        for (int i = 0; i < d->na; i++)
            arr_free (&d->a[i]);
        free (d->a);
        ext_free (&d->l2_changed);
        ext_free (&d->rx);
        free (d);
    }
    errno = saved;
}

void diff_forget_array (struct diffstore *d, int a)
{
    if (a < d->na)
        arr_free (&d->a[a]);
}

void diff_forget_slot (struct diffstore *d, int k)
{
    for (int i = 0; i < d->na; i++) {
        struct diffarr *da = &d->a[i];
        if (da->slot)
            memset (da->slot + (size_t)k * da->nblk, 0, da->nblk * sizeof (uint64_t));
    }
}

void diff_uncommitted (struct diffstore *d)
{
    for (int i = 0; i < d->na; i++)
        d->a[i].hash_valid = 0;
    d->l2_all = 1;
}

/* The state of array a for this layout, (re)made if the layout changed;
 * NULL when memory runs out. */
static struct diffarr *
arr_get (struct diffstore *d, int a, size_t off, size_t bytes, size_t block)
{
    struct diffarr *da;

    if (a >= d->na) {
        struct diffarr *p = realloc (d->a, (size_t)(a + 1) * sizeof (*p));
        if (!p)
            return NULL;
        memset (p + d->na, 0, (size_t)(a + 1 - d->na) * sizeof (*p));
        d->a = p;
        d->na = a + 1;
    }
    da = &d->a[a];
    if (da->bytes == bytes && da->off == off && da->block == block && da->h)
        return da;
    arr_free (da);
    da->nblk = (bytes + block - 1) / block;
    if (!(da->h = calloc (da->nblk, sizeof (da->h[0]))) ||
        !(da->id = calloc (da->nblk, sizeof (da->id[0]))) ||
        !(da->slot = calloc ((size_t)d->nslots * da->nblk, sizeof (da->slot[0])))) {
        arr_free (da);
        return NULL;
    }
    da->off = off;
    da->bytes = bytes;
    da->block = block;
    return da;
}

static struct hash128 block_hash (const void *p, size_t n)
{
    struct hash128 r = {0, 0};
#if HAVE_XXHASH
    XXH128_hash_t h = BLOCK_HASH (p, n);
    r.lo = h.low64;
    r.hi = h.high64;
#else
    (void)p;
    (void)n;
#endif
    return r;
}

/* Copy without hashing: every block is new content. */
static int copy_full (struct diffstore *d,
                      struct diffarr *da,
                      int k,
                      const char *src,
                      char *dst,
                      struct extents *tx)
{
    uint64_t *sl = da->slot + (size_t)k * da->nblk;

    memcpy (dst, src, da->bytes);
    for (size_t b = 0; b < da->nblk; b++)
        sl[b] = da->id[b] = ++d->next_id;
    da->hash_valid = 0;
    d->copied += da->bytes;
    return ext_add (tx, da->off, da->bytes);
}

int diff_copy_array (struct diffstore *d,
                     int a,
                     int k,
                     const void *src,
                     size_t bytes,
                     size_t off,
                     size_t block,
                     char *slot,
                     struct extents *tx,
                     int *diffed)
{
    struct diffarr *da;
    const char *s = src;
    char *dst = slot + off;
    uint64_t *sl;
    size_t changed = 0;
    int base;

    *diffed = 0;
    if (bytes == 0)
        return 0;
    if (!diff_available () || !(da = arr_get (d, a, off, bytes, block)))
        return -1;
    if (da->skip > 0) {
        da->skip--;
        return copy_full (d, da, k, s, dst, tx);
    }
    base = da->hash_valid;
    sl = da->slot + (size_t)k * da->nblk;
    for (size_t b = 0; b < da->nblk; b++) {
        size_t o = b * block, n = bytes - o < block ? bytes - o : block;
        /* hashed first: a changed block is in the cache for its copy */
        struct hash128 h = block_hash (s + o, n);
        if (!base || h.lo != da->h[b].lo || h.hi != da->h[b].hi) {
            da->h[b] = h;
            da->id[b] = ++d->next_id;
            changed++;
            if (ext_add (tx, off + o, n) < 0)
                return -1;
        }
        if (sl[b] != da->id[b]) {
            memcpy (dst + o, s + o, n);
            sl[b] = da->id[b];
            d->copied += n;
        } else
            d->skipped += n;
    }
    d->hashed += bytes;
    da->hash_valid = 1;
    if (base && 2 * changed > da->nblk) {
        da->backoff =
            da->backoff ? (da->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : da->backoff * 2)
                        : 1;
        da->skip = da->backoff;
    } else if (base)
        da->backoff = 0;
    *diffed = base;
    return 0;
}

/* Append to out [lo, hi) minus the ranges of e (ascending). */
static int
subtract (struct extents *out, uint64_t lo, uint64_t hi, const struct extents *e)
{
    uint64_t at = lo;

    for (int i = 0; i < e->n && at < hi; i++) {
        uint64_t o = e->x[2 * i], end = o + e->x[2 * i + 1];
        if (end <= at)
            continue;
        if (o >= hi)
            break;
        if (o > at && ext_add (out, at, o - at) < 0)
            return -1;
        at = end > at ? end : at;
    }
    if (at < hi && ext_add (out, at, hi - at) < 0)
        return -1;
    return 0;
}

int diff_fill (struct diffstore *d,
               char *pend,
               size_t pend_size,
               const char *committed,
               size_t committed_size,
               const struct extents *rx)
{
    uint64_t lim = pend_size < committed_size ? pend_size : committed_size;
    struct extents todo = {0};
    int rc = 0;

    if (d->l2_all)
        rc = subtract (&todo, 0, lim, rx);
    else
        for (int i = 0; i < d->l2_changed.n && rc == 0; i++) {
            uint64_t o = d->l2_changed.x[2 * i], end = o + d->l2_changed.x[2 * i + 1];
            if (o >= lim)
                break;
            rc = subtract (&todo, o, end < lim ? end : lim, rx);
        }
    if (rc == 0) {
        for (int i = 0; i < todo.n; i++)
            memcpy (pend + todo.x[2 * i], committed + todo.x[2 * i], todo.x[2 * i + 1]);
        /* kept for diff_committed */
        d->rx.n = 0;
        for (int i = 0; i < rx->n && rc == 0; i++)
            rc = ext_add (&d->rx, rx->x[2 * i], rx->x[2 * i + 1]);
    }
    ext_free (&todo);
    if (rc < 0)
        d->rx.n = 0;
    return rc;
}

void diff_committed (struct diffstore *d, int rx_diff)
{
    if (rx_diff) {
        struct extents t = d->l2_changed;
        d->l2_changed = d->rx;
        d->rx = t;
        d->rx.n = 0;
        d->l2_all = 0;
    } else
        d->l2_all = 1;
}

void diff_stats (const struct diffstore *d,
                 uint64_t *hashed,
                 uint64_t *copied,
                 uint64_t *skipped)
{
    *hashed = d->hashed;
    *copied = d->copied;
    *skipped = d->skipped;
}
