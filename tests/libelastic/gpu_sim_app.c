/* gpu_sim_app.c - libelastic's GPU code path on a machine without a GPU
 *
 * The library's device-array and NCCL code runs unchanged up to the CUDA
 * and NCCL calls; those go to two tables installed here (gpu.h's test
 * seam) instead of libcudart and libnccl:
 *   - "device" memory is host memory this program hands out and tracks
 *     (cudaPointerGetAttributes says device only for those blocks), copies
 *     are memcpy, streams and events are ordered trivially;
 *   - NCCL calls are recorded, one line each, in TRACE_DIR/nccl.RANK
 *     (original rank), with the communicator's serial number, size and
 *     rank, and the exclude list as NCCL receives it; a shrink checks the
 *     list (ascending, in range, not the caller) and computes the child's
 *     size and rank as NCCL does.
 * What cannot run without a GPU -- the kernels, real copies, NCCL's own
 * protocol -- is bench/gpu-check.sh's job.
 *
 * The state: an array "x" of --n doubles, a device array, block-
 * distributed; each step every element changes by a rule of its global
 * index and the step, and the ranks combine a checksum with MPI_Allreduce
 * (where failures are seen).  The final checksum is the same for any
 * decomposition and any failures on the way.
 *
 * usage: gpu_sim_app [--n N] [--steps N] [--fail RANK:STEP[:WHERE]]...
 *                    [--nccl-error RANK:STEP]
 * environment: TRACE_DIR (required); SIM_SHRINK_FAIL=1: every shrink fails
 * (the library's fallback to a new communicator)
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <elastic.h>

#include "inject.h"
#include "libelastic/gpu.h"

/* ---- simulated device memory ---- */
#define MAXBLK 64
static struct {
    char *p;
    size_t n;
} blk[MAXBLK];

static void *dev_alloc (size_t n)
{
    for (int i = 0; i < MAXBLK; i++) {
        if (!blk[i].p) {
            if (!(blk[i].p = calloc (1, n > 0 ? n : 1)))
                return NULL;
            blk[i].n = n;
            return blk[i].p;
        }
    }
    return NULL;
}

static void dev_free (void *p)
{
    for (int i = 0; i < MAXBLK; i++) {
        if (p && blk[i].p == p) {
            free (blk[i].p);
            blk[i].p = NULL;
        }
    }
}

/* 1 if [p, p+n) lies in one device block */
static int dev_has (const void *p, size_t n)
{
    for (int i = 0; i < MAXBLK; i++)
        if (blk[i].p && (const char *)p >= blk[i].p &&
            (const char *)p + n <= blk[i].p + (blk[i].n > 0 ? blk[i].n : 1))
            return 1;
    return 0;
}

static int c_count (int *n, char *why, size_t len)
{
    *n = 1;
    return 0;
}
/* pinned host memory (the mirrors), tracked */
#define MAXPIN 16
static struct {
    char *p;
    size_t n;
} pinned[MAXPIN];
static int c_get_device (int *d, char *why, size_t len)
{
    *d = 0;
    return 0;
}
static int c_host_alloc (void **p, size_t size, char *why, size_t len)
{
    for (int i = 0; i < MAXPIN; i++)
        if (!pinned[i].p) {
            if (!(pinned[i].p = malloc (size > 0 ? size : 1)))
                break;
            pinned[i].n = size;
            *p = pinned[i].p;
            return 0;
        }
    snprintf (why, len, "out of simulated pinned memory");
    return -1;
}
static void c_host_free (void *p)
{
    for (int i = 0; i < MAXPIN; i++)
        if (p && pinned[i].p == p) {
            free (p);
            pinned[i].p = NULL;
        }
}
static int mirror_ok (const void *p, size_t n)
{
    for (int i = 0; i < MAXPIN; i++)
        if (pinned[i].p && (const char *)p >= pinned[i].p &&
            (const char *)p + n <= pinned[i].p + pinned[i].n)
            return 1;
    return 0;
}
static int c_is_dev (const void *p, char *why, size_t len)
{
    return dev_has (p, 1);
}
static int dummy;
static int c_obj (void **o, char *why, size_t len)
{
    *o = &dummy;
    return 0;
}
static void c_none (void *o)
{
}
static int c_rec (void *a, void *b, char *why, size_t len)
{
    return 0;
}
static int c_sync (void *ev, char *why, size_t len)
{
    return 0;
}
static int c_query (void *s, char *why, size_t len)
{
    return 1;
}
static int host_ok (const void *p, size_t n);
static int mirror_ok (const void *p, size_t n);
static long direct_copies;
static int c_d2h (void *dst, const void *src, size_t n, void *s, char *why, size_t len)
{
    if (!dev_has (src, n)) {
        snprintf (why, len, "d2h: source %p is not device memory", src);
        return -1;
    }
    /* into a pinned mirror or a page-locked snapshot buffer, never elsewhere */
    if (host_ok (dst, n))
        direct_copies++;
    else if (!mirror_ok (dst, n)) {
        snprintf (why, len, "d2h: destination %p is not page-locked", dst);
        return -1;
    }
    memcpy (dst, src, n);
    return 0;
}
static long staged_copies;
static int c_d2d (void *dst, const void *src, size_t n, void *s, char *why, size_t len)
{
    (void)s;
    if (!dev_has (src, n) || !dev_has (dst, n)) {
        snprintf (why, len, "d2d: %p or %p is not device memory", src, dst);
        return -1;
    }
    staged_copies++;
    memcpy (dst, src, n);
    return 0;
}
static int c_dev_alloc (void **p, size_t n, char *why, size_t len)
{
    if (!(*p = dev_alloc (n))) {
        snprintf (why, len, "out of simulated device memory");
        return -1;
    }
    return 0;
}
static int c_h2d (void *dst, const void *src, size_t n, char *why, size_t len)
{
    if (!dev_has (dst, n)) {
        snprintf (why, len, "h2d: destination %p is not device memory", dst);
        return -1;
    }
    memcpy (dst, src, n);
    return 0;
}

/* page-locking: remembered, so that a copy "straight into" a snapshot
 * buffer is checked to land in a registered range */
#define MAXREG 16
static struct {
    char *p;
    size_t n;
} reg[MAXREG];
static int c_register (void *p, size_t n, char *why, size_t len)
{
    for (int i = 0; i < MAXREG; i++)
        if (!reg[i].p) {
            reg[i].p = p;
            reg[i].n = n;
            return 0;
        }
    snprintf (why, len, "too many registered ranges");
    return -1;
}
static void c_unregister (void *p)
{
    for (int i = 0; i < MAXREG; i++)
        if (reg[i].p == p)
            reg[i].p = NULL;
}
static int host_ok (const void *p, size_t n)
{
    for (int i = 0; i < MAXREG; i++)
        if (reg[i].p && (const char *)p >= reg[i].p &&
            (const char *)p + n <= reg[i].p + reg[i].n)
            return 1;
    return 0;
}

static const struct gpu_cuda_ops sim_cuda = {
    .name = "simulated CUDA (host memory)",
    .device_count = c_count,
    .get_device = c_get_device,
    .host_alloc = c_host_alloc,
    .host_free = c_host_free,
    .is_device_ptr = c_is_dev,
    .stream_create = c_obj,
    .stream_create_nb = c_obj,
    .dev_alloc = c_dev_alloc,
    .dev_free = dev_free,
    .memcpy_d2d_async = c_d2d,
    .stream_destroy = c_none,
    .event_create = c_obj,
    .event_destroy = c_none,
    .event_record = c_rec,
    .stream_wait_event = c_rec,
    .event_sync = c_sync,
    .stream_query = c_query,
    .memcpy_d2h_async = c_d2h,
    .memcpy_h2d = c_h2d,
    .host_register = c_register,
    .host_unregister = c_unregister,
};

/* ---- recording NCCL ---- */
struct comm {
    int serial, n, rank, revoked, aborted;
};
static FILE *trace;
static int serials;

static void tr (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static void tr (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vfprintf (trace, fmt, ap);
    va_end (ap);
    fputc ('\n', trace);
    fflush (trace);
}

static int n_unique_id (unsigned char *id, char *why, size_t len)
{
    memset (id, 0, GPU_NCCL_ID_BYTES);
    static int ids;
    snprintf ((char *)id, GPU_NCCL_ID_BYTES, "id-%d-%d", (int)getpid (), ++ids);
    return 0;
}
static int
n_init (void **c, int n, const unsigned char *id, int rank, char *why, size_t len)
{
    struct comm *k = calloc (1, sizeof (*k));
    if (!k || rank < 0 || rank >= n) {
        free (k);
        snprintf (why, len, "init: bad rank %d of %d", rank, n);
        return -1;
    }
    k->serial = ++serials;
    k->n = n;
    k->rank = rank;
    tr ("init c=%d n=%d rank=%d", k->serial, n, rank);
    *c = k;
    return 0;
}
static int n_revoke (void *c, char *why, size_t len)
{
    struct comm *k = c;
    if (k->aborted) {
        tr ("ERROR revoke of aborted c=%d", k->serial);
        return -1;
    }
    k->revoked = 1;
    tr ("revoke c=%d", k->serial);
    return 0;
}
static int n_shrink (void *c, int *excl, int nexcl, void **child, char *why, size_t len)
{
    struct comm *k = c, *ch;
    char list[256] = "";
    int below = 0;

    if (nexcl <= 0) { /* NCCL 2.28: "invalid argument" */
        tr ("ERROR shrink c=%d: an empty exclude list", k->serial);
        snprintf (why, len, "an empty exclude list");
        return -1;
    }
    for (int i = 0; i < nexcl; i++) {
        size_t l = strlen (list);
        snprintf (list + l, sizeof (list) - l, "%s%d", i ? "," : "", excl[i]);
        if (excl[i] < 0 || excl[i] >= k->n || (i > 0 && excl[i] <= excl[i - 1]) ||
            excl[i] == k->rank) {
            tr ("ERROR shrink c=%d: bad exclude list [%s]", k->serial, list);
            snprintf (why, len, "bad exclude list");
            return -1;
        }
        below += excl[i] < k->rank;
    }
    if (!k->revoked)
        tr ("NOTE shrink of c=%d without a revoke", k->serial);
    if (getenv ("SIM_SHRINK_FAIL")) {
        /* the fallback: NCCL refused to shrink */
        tr ("shrink c=%d excl=[%s] failed", k->serial, list);
        snprintf (why, len, "ncclCommShrink: refused (SIM_SHRINK_FAIL)");
        return -1;
    }
    if (!(ch = calloc (1, sizeof (*ch))))
        return -1;
    ch->serial = ++serials;
    ch->n = k->n - nexcl;
    ch->rank = k->rank - below;
    tr ("shrink c=%d excl=[%s] -> c=%d n=%d rank=%d",
        k->serial,
        list,
        ch->serial,
        ch->n,
        ch->rank);
    *child = ch;
    return 0;
}
static void n_abort (void *c)
{
    struct comm *k = c;
    tr ("abort c=%d", k->serial);
    k->aborted = 1; /* kept: a later call on it is an error */
}
static int n_async (void *c, char *why, size_t len)
{
    return 0;
}
static int n_count (void *c, int *n, char *why, size_t len)
{
    *n = ((struct comm *)c)->n;
    return 0;
}
static int n_rank (void *c, int *r, char *why, size_t len)
{
    *r = ((struct comm *)c)->rank;
    return 0;
}

static const struct gpu_nccl_ops sim_nccl = {
    .name = "recording NCCL",
    .unique_id = n_unique_id,
    .init = n_init,
    .revoke = n_revoke,
    .shrink = n_shrink,
    .abort = n_abort,
    .async_error = n_async,
    .count = n_count,
    .user_rank = n_rank,
};

/* ---- the application ---- */
struct app {
    elastic_manager_t *m;
    MPI_Comm comm;
    int rank, size, wrank;
    int64_t step;
    uint64_t off, count, n;
    double *x; /* "device" memory */
};

static uint64_t mix (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void *place_x (void *data, uint64_t count, uint64_t new_count, void *arg)
{
    struct app *a = arg;
    double *p;
    if (data && count == new_count)
        return data;
    if (!(p = dev_alloc (new_count * sizeof (double))))
        return NULL;
    dev_free (a->x);
    a->x = p;
    return p;
}

static int check_nccl (struct app *a, const char *when)
{
    struct ncclComm *c;
    elastic_error_t err;
    int n = -1, r = -1;
    char why[128];

    if (elastic_nccl_comm (a->m, &c, &err) != ELASTIC_OK) {
        fprintf (stderr, "gpu_sim_app: %s: %s\n", when, err.text);
        return -1;
    }
    sim_nccl.count (c, &n, why, sizeof (why));
    sim_nccl.user_rank (c, &r, why, sizeof (why));
    if (((struct comm *)c)->aborted || n != a->size || r != a->rank) {
        fprintf (stderr,
                 "gpu_sim_app: %s: the NCCL communicator has %d ranks, rank %d%s "
                 "(expected %d, %d)\n",
                 when,
                 n,
                 r,
                 ((struct comm *)c)->aborted ? ", aborted" : "",
                 a->size,
                 a->rank);
        return -1;
    }
    tr ("handler-check %s n=%d rank=%d", when, n, r);
    return 0;
}

static int rebuild (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    struct app *a = arg;
    elastic_error_t err;

    a->comm = comm;
    MPI_Comm_rank (comm, &a->rank);
    MPI_Comm_size (comm, &a->size);
    elastic_array_block (m, "x", &a->off, &a->count, NULL);
    /* the placement hook gave a->x already: no copy here */
    if (elastic_array_restore (m, "x", a->x, a->count, &err) != ELASTIC_OK) {
        fprintf (stderr, "gpu_sim_app: %s\n", err.text);
        return -1;
    }
    return check_nccl (a, "rebuild");
}

int main (int argc, char **argv)
{
    struct app a = {.n = 1000};
    struct inject inj;
    elastic_error_t err;
    int64_t steps = 60, nerr_rank = -1, nerr_step = -1;
    int active, rc, mrc;
    char path[4096];
    const char *dir = getenv ("TRACE_DIR");

    inject_init (&inj);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp (o, "--n"))
            a.n = strtoull (v, NULL, 10), i++;
        else if (!strcmp (o, "--steps"))
            steps = strtoll (v, NULL, 10), i++;
        else if (!strcmp (o, "--fail")) {
            if (inject_parse (&inj, argv[0], v) < 0)
                return 2;
            i++;
        } else if (!strcmp (o, "--nccl-error")) {
            long long r, s;
            if (sscanf (v, "%lld:%lld", &r, &s) != 2)
                return 2;
            nerr_rank = r, nerr_step = s, i++;
        } else {
            fprintf (stderr, "gpu_sim_app: unknown option '%s'\n", o);
            return 2;
        }
    }
    if (!dir) {
        fprintf (stderr, "gpu_sim_app: TRACE_DIR is not set\n");
        return 2;
    }
    inject_setenv (&inj);
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &a.wrank);
    snprintf (path, sizeof (path), "%s/nccl.%d", dir, a.wrank);
    if (!(trace = fopen (path, "w"))) {
        perror (path);
        MPI_Abort (MPI_COMM_WORLD, 2);
    }
    gpu_set_cuda_ops (&sim_cuda);
    gpu_set_nccl_ops (&sim_nccl);
    if ((rc = elastic_manager_create (MPI_COMM_WORLD, NULL, &a.m, &err)) != ELASTIC_OK)
        goto fail;
    a.comm = elastic_manager_comm (a.m);
    if (a.comm != MPI_COMM_NULL) {
        MPI_Comm_rank (a.comm, &a.rank);
        MPI_Comm_size (a.comm, &a.size);
        a.count = a.n / a.size + ((uint64_t)a.rank < a.n % a.size);
        a.off = a.n / a.size * a.rank +
                ((uint64_t)a.rank < a.n % a.size ? (uint64_t)a.rank : a.n % a.size);
        if (!(a.x = dev_alloc (a.count * sizeof (double))))
            return 3;
        for (uint64_t i = 0; i < a.count; i++)
            a.x[i] = (double)(mix (a.off + i) >> 11) / 9007199254740992.0;
    }
    if ((rc = elastic_register_value (a.m, "step", &a.step, sizeof (a.step), &err)) ||
        (rc = elastic_register_device_array (
             a.m, "x", a.x, sizeof (double), a.count, &err)) ||
        (rc = elastic_array_set_realloc (a.m, "x", place_x, &a, &err)) ||
        (rc = elastic_nccl_enable (a.m, &err)) ||
        (rc = elastic_manager_start (a.m, rebuild, &a, &active, &err)))
        goto fail;
    if (!active)
        goto end;
    if (check_nccl (&a, "start") < 0) {
        rc = ELASTIC_ERR_STATE;
        goto end;
    }
    while (a.step < steps) {
        uint64_t s = 0, all;
        if ((rc = elastic_maybe_snapshot (a.m, a.step, &err)) != ELASTIC_OK ||
            (rc = elastic_maybe_reshard_up (a.m, a.step, rebuild, &a, NULL, &err)) !=
                ELASTIC_OK)
            goto fail;
        if ((mrc = inject_step (&inj, a.wrank, a.step, a.comm)) != MPI_SUCCESS)
            goto failed;
        if (a.wrank == nerr_rank && a.step == nerr_step) {
            nerr_rank = -1; /* once */
            mrc = ELASTIC_NCCL_ERROR;
            goto failed;
        }
        for (uint64_t i = 0; i < a.count; i++) {
            a.x[i] =
                a.x[i] * 0.5 + (double)((a.off + i) * 31 % 17 + (uint64_t)a.step % 5);
            s += mix ((uint64_t)(a.x[i] * 1024.0));
        }
        if ((mrc = MPI_Allreduce (&s, &all, 1, MPI_UINT64_T, MPI_SUM, a.comm)) !=
            MPI_SUCCESS) {
        failed:
            if ((rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err)) !=
                ELASTIC_OK)
                goto fail;
            continue;
        }
        a.step++;
    }
    for (;;) {
        uint64_t s = 0, all = 0;
        for (uint64_t i = 0; i < a.count; i++) {
            uint64_t bits;
            memcpy (&bits, &a.x[i], sizeof (bits));
            s += mix (bits ^ mix (a.off + i + 1));
        }
        if ((mrc = MPI_Allreduce (&s, &all, 1, MPI_UINT64_T, MPI_SUM, a.comm)) ==
            MPI_SUCCESS) {
            if (a.rank == 0)
                printf ("final world %d\nchecksum %016llx\n",
                        a.size,
                        (unsigned long long)all);
            tr ("device copies straight into snapshot buffers: %s",
                direct_copies > 0 ? "yes" : "no");
            tr ("device copies staged on the device: %s",
                staged_copies > 0 ? "yes" : "no");
            break;
        }
        if ((rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err)) != ELASTIC_OK)
            goto fail;
    }
    rc = ELASTIC_OK;
    goto end;
fail:
    fprintf (stderr,
             "gpu_sim_app: rank %d: %s: %s\n",
             a.wrank,
             elastic_strerror (rc),
             err.text);
end:
    fflush (stdout);
    elastic_manager_destroy (a.m);
    MPI_Finalize ();
    return elastic_exit_code (rc);
}
