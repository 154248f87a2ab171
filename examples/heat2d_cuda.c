/* heat2d_cuda.c - heat2d with its grid in device memory (libelastic example)
 *
 * The grid of examples/heat2d.c, the same decomposition and the same
 * arithmetic (heat2d_kernels.cu, compiled with -fmad=false): its checksum
 * is heat2d's, bit for bit, for any number of ranks and any failures.  The
 * grid lives in device memory (cudaMalloc) and is registered with
 * elastic_register_device_array; recoveries restore it through a placement
 * hook that reallocates the device buffers; a suspend writes it to an L3
 * file and a resume reads it back into device memory.  Halos go through
 * host buffers (cudaMemcpy) and MPI.  All device work is on the legacy
 * default stream, so the library's snapshot copies are ordered with it.
 *
 * Each rank uses device 0 of what it sees (elastic-exec's binding sets
 * CUDA_VISIBLE_DEVICES to the nearest GPU); ranks may share a GPU.
 *
 * usage: heat2d_cuda [--nx N] [--ny N] [--steps N] [--persist-period N]
 *                    [--snapshot-dir DIR] [--fail RANK:STEP[:WHERE]]...
 *                    [--suspend-at STEP] [--nccl] [--nccl-error RANK:STEP]
 *                    [--timing] [--sweeps K] [--quiet]
 *
 * --suspend-at STEP: original rank 0 sends itself SIGUSR1 at that step (a
 * preemption notice: the job suspends to L3 and exits 75);
 * --nccl: elastic_nccl_enable, and every step an ncclAllReduce of the
 * rank's interior sum on the library's communicator, checked against a
 * host reduction over the same ranks (ELASTIC_TEST_NCCL_GROUP=1 makes
 * one-rank communicators, for one GPU shared by several ranks);
 * --nccl-error RANK:STEP: that original rank reports an NCCL failure
 * (ELASTIC_NCCL_ERROR) to elastic_maybe_reshard_down at that step;
 * --timing: per-step times (median, p10, p90) of snapshot steps and others
 * (each step ends with the legacy stream's work, not the library's copies
 * to the host on its own non-blocking stream);
 * --sweeps K: K Jacobi sweeps per library step (1): a heavier step, for
 * the benchmark of a snapshot copy hidden behind the next step.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#if HAVE_NCCL
#include <nccl.h>
#endif
#include <elastic.h>

#include "halo.h"
#include "inject.h"

int heat2d_cuda_step (double *u, double *v, unsigned long long rows, int nx);

struct app {
    elastic_manager_t *m;
    MPI_Comm comm;
    int rank, size, world_rank, nx, ny, quiet, use_nccl;
    int64_t steps, step;
    uint64_t row0, rows, cap_rows;
    double *u, *v;    /* device: (rows + 2) x nx, ghost rows above and below */
    double *hrow;     /* host: two rows for the halos */
    double *nccl_buf; /* device: one double for the NCCL check */
};

static uint64_t splitmix64 (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double initial (uint64_t g)
{
    return (double)(splitmix64 (g) >> 11) / 9007199254740992.0;
}

static int cuda_ok (cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 1;
    fprintf (stderr, "heat2d_cuda: %s: %s\n", what, cudaGetErrorString (e));
    return 0;
}

/* The ghost rows that are domain edges (top 1, bottom 0). */
static int set_edges (struct app *a)
{
    size_t n = a->nx * sizeof (double);
    for (int j = 0; j < a->nx; j++)
        a->hrow[j] = 1.0, a->hrow[a->nx + j] = 0.0;
    if (a->rank == 0 &&
        !cuda_ok (cudaMemcpy (a->u, a->hrow, n, cudaMemcpyHostToDevice), "edges"))
        return -1;
    if (a->rank == a->size - 1 && !cuda_ok (cudaMemcpy (a->u + (a->rows + 1) * a->nx,
                                                        a->hrow + a->nx,
                                                        n,
                                                        cudaMemcpyHostToDevice),
                                            "edges"))
        return -1;
    return 0;
}

/* Device room for rows rows (+2 ghost rows), kept when the size is the
 * same; contents not kept. */
static int alloc_grid (struct app *a, uint64_t rows)
{
    size_t n = (rows + 2) * a->nx * sizeof (double);

    if (a->u && rows == a->cap_rows)
        return 0;
    cudaFree (a->u);
    cudaFree (a->v);
    a->u = a->v = NULL;
    if (!cuda_ok (cudaMalloc ((void **)&a->u, n), "cudaMalloc") ||
        !cuda_ok (cudaMalloc ((void **)&a->v, n), "cudaMalloc"))
        return -1;
    cudaMemset (a->u, 0, n);
    cudaMemset (a->v, 0, n);
    a->cap_rows = rows;
    return 0;
}

/* libelastic's placement hook for "u": a device buffer for new_count rows. */
static void *place_grid (void *data, uint64_t count, uint64_t new_count, void *arg)
{
    struct app *a = arg;
    if (alloc_grid (a, new_count) < 0)
        return NULL;
    return a->u + a->nx;
}

static int rebuild (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    struct app *a = arg;
    elastic_error_t err;
    elastic_info_t info;

    a->comm = comm;
    MPI_Comm_rank (comm, &a->rank);
    MPI_Comm_size (comm, &a->size);
    elastic_array_block (m, "u", &a->row0, &a->rows, NULL);
    if (alloc_grid (a, a->rows) < 0)
        return -1;
    /* the hook gave this buffer: the block is in it already */
    if (elastic_array_restore (m, "u", a->u + a->nx, a->rows, &err) != ELASTIC_OK) {
        fprintf (stderr, "heat2d_cuda: %s\n", err.text);
        return -1;
    }
    if (set_edges (a) < 0)
        return -1;
    elastic_manager_info (m, &info);
    if (a->rank == 0 && !a->quiet)
        printf ("resharded at step %lld: world %d -> %d\n",
                (long long)a->step,
                info.old_size,
                a->size);
    fflush (stdout);
    return 0;
}

/* One step: halos (device -> host, MPI, host -> device), then the kernel.
 * Returns an MPI error code (MPI_ERR_OTHER on a CUDA error). */
static int jacobi_step (struct app *a)
{
    int nx = a->nx, rc;
    int up = a->rank > 0 ? a->rank - 1 : MPI_PROC_NULL;
    int down = a->rank < a->size - 1 ? a->rank + 1 : MPI_PROC_NULL;
    size_t rb = nx * sizeof (double);
    double *s = a->hrow, *r = a->hrow + nx;

    /* my first row up, my bottom ghost from below (no copy to the host
     * without a neighbour there: a rank alone does device work only) */
    if (up != MPI_PROC_NULL &&
        !cuda_ok (cudaMemcpy (s, a->u + nx, rb, cudaMemcpyDeviceToHost), "halo"))
        return MPI_ERR_OTHER;
    if ((rc = halo_sendrecv (s, up, 0, r, down, 0, nx, a->comm)) != MPI_SUCCESS)
        return rc;
    if (down != MPI_PROC_NULL &&
        !cuda_ok (cudaMemcpy (a->u + (a->rows + 1) * nx, r, rb, cudaMemcpyHostToDevice),
                  "halo"))
        return MPI_ERR_OTHER;
    /* my last row down, my top ghost from above */
    if (down != MPI_PROC_NULL &&
        !cuda_ok (cudaMemcpy (s, a->u + a->rows * nx, rb, cudaMemcpyDeviceToHost),
                  "halo"))
        return MPI_ERR_OTHER;
    if ((rc = halo_sendrecv (s, down, 1, r, up, 1, nx, a->comm)) != MPI_SUCCESS)
        return rc;
    if (up != MPI_PROC_NULL &&
        !cuda_ok (cudaMemcpy (a->u, r, rb, cudaMemcpyHostToDevice), "halo"))
        return MPI_ERR_OTHER;
    if (!cuda_ok (heat2d_cuda_step (a->u, a->v, a->rows, nx), "kernel"))
        return MPI_ERR_OTHER;
    return MPI_SUCCESS;
}

/* heat2d's checksum, from a host copy of the interior. */
static int checksum (struct app *a, uint64_t *sum)
{
    uint64_t mine = 0, bits;
    size_t n = a->rows * a->nx;
    double *h = malloc (n * sizeof (double) + 1);

    if (!h || !cuda_ok (cudaMemcpy (
                            h, a->u + a->nx, n * sizeof (double), cudaMemcpyDeviceToHost),
                        "checksum")) {
        free (h);
        return MPI_ERR_OTHER;
    }
    for (uint64_t i = 0; i < a->rows; i++)
        for (int j = 0; j < a->nx; j++) {
            uint64_t g = (a->row0 + i) * a->nx + j;
            memcpy (&bits, &h[i * a->nx + j], sizeof (bits));
            mine += splitmix64 (bits ^ splitmix64 (g + 1));
        }
    free (h);
    return MPI_Allreduce (&mine, sum, 1, MPI_UINT64_T, MPI_SUM, a->comm);
}

#if HAVE_NCCL
/* An ncclAllReduce of my first interior value on the library's
 * communicator, checked against MPI over the same group of ranks.
 * Returns 0, 1 (NCCL failed: pass ELASTIC_NCCL_ERROR), or an MPI error
 * code + 2. */
static int nccl_check_step (struct app *a)
{
    struct ncclComm *c;
    elastic_error_t err;
    double x, got = 0;
    int n;

    if (elastic_nccl_comm (a->m, &c, &err) != ELASTIC_OK) {
        fprintf (stderr, "heat2d_cuda: %s\n", err.text);
        return 1;
    }
    if (!cuda_ok (cudaMemcpy (&x, a->u + a->nx, sizeof (x), cudaMemcpyDeviceToHost),
                  "nccl"))
        return 1;
    /* a non-blocking communicator may answer ncclInProgress: then the
     * library's check below waits for it */
    {
        ncclResult_t r =
            ncclAllReduce (a->u + a->nx, a->nccl_buf, 1, ncclDouble, ncclSum, c, 0);
        if (r != ncclSuccess && r != ncclInProgress) {
            fprintf (stderr, "heat2d_cuda: ncclAllReduce: %s\n", ncclGetErrorString (r));
            return 1;
        }
    }
    if (elastic_nccl_check (a->m, NULL, 30.0, &err) != ELASTIC_OK) {
        fprintf (stderr, "heat2d_cuda: %s\n", err.text);
        return 1;
    }
    cudaMemcpy (&got, a->nccl_buf, sizeof (got), cudaMemcpyDeviceToHost);
    ncclCommCount (c, &n);
    /* one-rank communicators (ELASTIC_TEST_NCCL_GROUP=1): the sum is x */
    if (n == 1 && got != x) {
        fprintf (
            stderr, "heat2d_cuda: ncclAllReduce gave %.17g, expected %.17g\n", got, x);
        return 1;
    }
    return 0;
}
#endif

static long parse_num (const char *opt, const char *s, long min, long max)
{
    char *end;
    long v;
    errno = 0;
    v = strtol (s ? s : "", &end, 10);
    if (!s || !*s || *end || errno || v < min || v > max) {
        fprintf (
            stderr,
            "heat2d_cuda: %s: '%s' is invalid (expected an integer from %ld to %ld)\n",
            opt,
            s ? s : "",
            min,
            max);
        exit (2);
    }
    return v;
}

static int cmp_d (const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* "NAME: n N median M p10 P p90 Q ms" of v[n] (sorted in place). */
static void print_stats (const char *name, double *v, int n)
{
    double total = 0;
    if (n == 0)
        return;
    for (int i = 0; i < n; i++)
        total += v[i];
    qsort (v, n, sizeof (double), cmp_d);
    printf ("timing %s: n %d median %.4f p10 %.4f p90 %.4f mean %.4f ms\n",
            name,
            n,
            v[n / 2] * 1e3,
            v[n / 10] * 1e3,
            v[n * 9 / 10] * 1e3,
            total / n * 1e3);
}

static int finish (struct app *a, int rc, const char *what, const char *text)
{
    if (rc != ELASTIC_OK && rc != ELASTIC_SUSPENDED)
        fprintf (stderr,
                 "heat2d_cuda: rank %d: %s: %s: %s\n",
                 a->world_rank,
                 what,
                 elastic_strerror (rc),
                 text);
    if (rc == ELASTIC_SUSPENDED && a->rank == 0)
        printf ("suspended at step %lld\n", (long long)a->step);
    fflush (stdout);
    elastic_manager_destroy (a->m);
    cudaFree (a->u);
    cudaFree (a->v);
    cudaFree (a->nccl_buf);
    free (a->hrow);
    MPI_Finalize ();
    return elastic_exit_code (rc);
}

int main (int argc, char **argv)
{
    struct app a = {.nx = 256, .ny = 256, .steps = 100};
    struct inject inj;
    elastic_config_t cfg;
    elastic_error_t err = {""};
    elastic_info_t info;
    long suspend_at = -1, nerr_rank = -1, nerr_step = -1;
    int rc, mrc, active, ndev = 0, timing = 0, ns = 0, no = 0, period, sweeps = 1;
    long cap = 0;
    double *t_snap = NULL, *t_other = NULL;
    uint64_t sum;

    inject_init (&inj);
    elastic_config_init (&cfg);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp (o, "--nx"))
            a.nx = (int)parse_num (o, v, 1, 1 << 20), i++;
        else if (!strcmp (o, "--ny"))
            a.ny = (int)parse_num (o, v, 1, 1 << 24), i++;
        else if (!strcmp (o, "--steps"))
            a.steps = parse_num (o, v, 0, 1L << 40), i++;
        else if (!strcmp (o, "--persist-period"))
            cfg.persist_period = (int)parse_num (o, v, 0, 1 << 30), i++;
        else if (!strcmp (o, "--snapshot-dir") && v)
            cfg.snapshot_dir = v, i++;
        else if (!strcmp (o, "--suspend-at"))
            suspend_at = parse_num (o, v, 0, 1L << 40), i++;
        else if (!strcmp (o, "--fail")) {
            if (!v || inject_parse (&inj, argv[0], v) < 0)
                return 2;
            i++;
        } else if (!strcmp (o, "--nccl"))
            a.use_nccl = 1;
        else if (!strcmp (o, "--nccl-error")) {
            if (!v || sscanf (v, "%ld:%ld", &nerr_rank, &nerr_step) != 2) {
                fprintf (
                    stderr,
                    "heat2d_cuda: --nccl-error: '%s' is invalid (expected RANK:STEP)\n",
                    v ? v : "");
                return 2;
            }
            i++;
        } else if (!strcmp (o, "--timing"))
            timing = 1;
        else if (!strcmp (o, "--sweeps"))
            sweeps = (int)parse_num (o, v, 1, 1 << 20), i++;
        else if (!strcmp (o, "--quiet"))
            a.quiet = 1;
        else {
            fprintf (
                stderr, "heat2d_cuda: unknown option '%s' (see the file's header)\n", o);
            return 2;
        }
    }
#if !HAVE_NCCL
    if (a.use_nccl || nerr_rank >= 0) {
        fprintf (stderr, "heat2d_cuda: --nccl: built without NCCL\n");
        return 2;
    }
#endif
    inject_setenv (&inj);
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &a.world_rank);
    if (cudaGetDeviceCount (&ndev) != cudaSuccess || ndev == 0) {
        if (a.world_rank == 0)
            fprintf (stderr, "heat2d_cuda: no CUDA device\n");
        MPI_Finalize ();
        return 77;
    }
    cudaSetDevice (0);
    if (!(a.hrow = malloc (2 * a.nx * sizeof (double))) ||
        (timing && ((cap = 2 * (a.steps + 1)),
                    !(t_snap = malloc (cap * sizeof (double))) ||
                        !(t_other = malloc (2 * cap * sizeof (double)))))) {
        fprintf (stderr, "heat2d_cuda: out of memory\n");
        MPI_Abort (MPI_COMM_WORLD, 1);
    }
    if ((rc = elastic_manager_create (MPI_COMM_WORLD, &cfg, &a.m, &err)) != ELASTIC_OK)
        return finish (&a, rc, "create", err.text);
    {
        const char *e = getenv ("ELASTIC_SNAPSHOT_PERIOD");
        period = e && atoi (e) > 0 ? atoi (e) : cfg.snapshot_period;
    }
    a.comm = elastic_manager_comm (a.m);
    if (a.comm != MPI_COMM_NULL) {
        MPI_Comm_rank (a.comm, &a.rank);
        MPI_Comm_size (a.comm, &a.size);
        a.rows = a.ny / a.size + ((uint64_t)a.rank < (uint64_t)a.ny % a.size);
        a.row0 = (uint64_t)a.ny / a.size * a.rank +
                 ((uint64_t)a.rank < (uint64_t)a.ny % a.size ? (uint64_t)a.rank
                                                             : (uint64_t)a.ny % a.size);
        if (alloc_grid (&a, a.rows) < 0)
            return finish (&a, ELASTIC_ERR_NOMEM, "setup", "no device memory");
        {
            size_t n = a.rows * a.nx;
            double *h = malloc (n * sizeof (double) + 1);
            if (!h)
                return finish (&a, ELASTIC_ERR_NOMEM, "setup", "out of memory");
            for (size_t k = 0; k < n; k++)
                h[k] = initial (a.row0 * a.nx + k);
            rc = cuda_ok (
                cudaMemcpy (a.u + a.nx, h, n * sizeof (double), cudaMemcpyHostToDevice),
                "setup");
            free (h);
            if (!rc || set_edges (&a) < 0)
                return finish (&a, ELASTIC_ERR_IO, "setup", "a CUDA call failed");
        }
    }
    if (a.use_nccl &&
        !cuda_ok (cudaMalloc ((void **)&a.nccl_buf, sizeof (double)), "cudaMalloc"))
        return finish (&a, ELASTIC_ERR_NOMEM, "setup", "no device memory");
    if ((rc = elastic_register_value (a.m, "step", &a.step, sizeof (a.step), &err)) ||
        (rc = elastic_register_device_array (
             a.m, "u", a.u ? a.u + a.nx : NULL, a.nx * sizeof (double), a.rows, &err)) ||
        (rc = elastic_set_type (a.m, "step", ELASTIC_TYPE_INT64, &err)) ||
        (rc = elastic_set_type (a.m, "u", ELASTIC_TYPE_FLOAT64, &err)) ||
        (rc = elastic_array_set_realloc (a.m, "u", place_grid, &a, &err)) ||
        (a.use_nccl && (rc = elastic_nccl_enable (a.m, &err))))
        return finish (&a, rc, "register", err.text);
    if ((rc = elastic_manager_start (a.m, rebuild, &a, &active, &err)) != ELASTIC_OK)
        return finish (&a, rc, "start", err.text);
    if (!active)
        return finish (&a, ELASTIC_OK, "", "");
    elastic_manager_info (a.m, &info);
    if (info.resumed_step >= 0 && info.rank == 0)
        printf ("resumed from step %lld (world %d -> %d)\n",
                (long long)info.resumed_step,
                info.resumed_size,
                info.size);
    if (a.world_rank == 0 && !a.quiet)
        printf ("heat2d_cuda: %dx%d grid, %lld steps, %d working ranks\n",
                a.nx,
                a.ny,
                (long long)a.steps,
                info.size);
    for (;;) {
        while (a.step < a.steps) {
            double t0 = MPI_Wtime ();
            int snap_step;
            if (a.step == suspend_at && a.world_rank == 0) {
                suspend_at = -1;
                raise (SIGUSR1); /* a preemption notice to this rank */
            }
            rc = elastic_maybe_snapshot (a.m, a.step, &err);
            if (rc == ELASTIC_SUSPENDED)
                return finish (&a, rc, "", "");
            if (rc != ELASTIC_OK)
                return finish (&a, rc, "snapshot", err.text);
            /* a snapshot starts at a multiple of the period and completes
             * at the next step's call */
            snap_step = a.step % period <= 1;
            if ((mrc = inject_step (&inj, a.world_rank, a.step, a.comm)) != MPI_SUCCESS)
                goto failed;
            if (a.world_rank == nerr_rank && a.step == nerr_step) {
                nerr_rank = -1;
                mrc = ELASTIC_NCCL_ERROR;
                goto failed;
            }
            for (int k = 0; k < sweeps; k++)
                if ((mrc = jacobi_step (&a)) != MPI_SUCCESS)
                    goto failed;
#if HAVE_NCCL
            if (a.use_nccl) {
                int nr = nccl_check_step (&a);
                if (nr == 1) {
                    mrc = ELASTIC_NCCL_ERROR;
                    goto failed;
                }
            }
#endif
            if (timing && ns < cap && no < cap) {
                cudaStreamSynchronize (0); /* the step's work, not the library's */
                if (snap_step)
                    t_snap[ns++] = MPI_Wtime () - t0;
                else
                    t_other[no++] = MPI_Wtime () - t0;
            }
            a.step++;
            continue;
        failed:
            if ((rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err)) !=
                ELASTIC_OK)
                return finish (&a, rc, "reshard down", err.text);
        }
        if ((mrc = checksum (&a, &sum)) == MPI_SUCCESS)
            break;
        if ((rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err)) != ELASTIC_OK)
            return finish (&a, rc, "reshard down", err.text);
    }
    elastic_manager_info (a.m, &info);
    if (a.rank == 0) {
        if (timing) {
            print_stats ("snapshot-steps", t_snap, ns);
            print_stats ("other-steps", t_other, no);
            /* all steps together */
            memcpy (t_other + no, t_snap, ns * sizeof (double));
            print_stats ("all-steps", t_other, no + ns);
        }
        printf ("final world %d, events %d\n", info.size, info.events);
        printf ("checksum %016llx\n", (unsigned long long)sum);
    }
    free (t_snap);
    free (t_other);
    return finish (&a, ELASTIC_OK, "", "");
}
