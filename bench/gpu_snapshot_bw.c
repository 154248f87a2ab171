/* gpu_snapshot_bw.c - device snapshot bandwidth: libelastic against cudaMemcpy
 *
 * One rank, one device array of SIZE MiB (default 1024).  Measured REPS
 * times each (default 10), medians reported:
 *   stage     libelastic's device -> host path of a periodic (overlapped)
 *             snapshot: gpu_stage_begin + gpu_stage_wait, cudaMemcpyAsync
 *             on the library's stream straight into a page-locked snapshot
 *             buffer (gpu_pin), as into an L1 slot;
 *   mirror    the same into the array's pinned mirror (the path of a
 *             synchronous snapshot: L3 steps, suspends);
 *   snapshot  a whole periodic snapshot through the API: the
 *             elastic_maybe_snapshot that starts it and the next one that
 *             completes it (no work between: the host waits for the copy);
 *   pinned    cudaMemcpy of the same bytes into cudaMallocHost memory;
 *   pageable  ... into malloc'ed memory.
 * Prints one line "gpu-snapshot-bw: ..." with GB/s (1e9 B/s) and
 * stage/pinned in percent.  Exit 77 without a device.
 *
 * usage: bench_gpu_snapshot_bw [SIZE_MIB [REPS]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <elastic.h>

#include "libelastic/gpu.h"

static int cmp_d (const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median (double *v, int n)
{
    qsort (v, n, sizeof (double), cmp_d);
    return v[n / 2];
}

static int handler (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    return 0;
}

int main (int argc, char **argv)
{
    long mib = argc > 1 ? atol (argv[1]) : 1024;
    int reps = argc > 2 ? atoi (argv[2]) : 10, ndev = 0, active, rc;
    size_t bytes = (size_t)mib << 20;
    double *t_stage, *t_mirror, *t_snap, *t_pin, *t_page;
    void *d = NULL, *pin = NULL, *page = NULL, *l1 = NULL;
    elastic_manager_t *m = NULL;
    elastic_error_t err = {""};
    char why[512];
    int64_t step = 0;

    if (mib <= 0 || reps <= 0) {
        fprintf (stderr,
                 "usage: %s [SIZE_MIB [REPS]] (got '%s' '%s')\n",
                 argv[0],
                 argc > 1 ? argv[1] : "",
                 argc > 2 ? argv[2] : "");
        return 2;
    }
    setenv ("ELASTIC_SNAPSHOT_PERIOD", "2", 1); /* begun at even steps */
    MPI_Init (&argc, &argv);
    if (cudaGetDeviceCount (&ndev) != cudaSuccess || ndev == 0) {
        fprintf (stderr, "gpu-snapshot-bw: no CUDA device\n");
        MPI_Finalize ();
        return 77;
    }
    cudaSetDevice (0);
    t_stage = calloc (reps, sizeof (double));
    t_mirror = calloc (reps, sizeof (double));
    t_snap = calloc (reps, sizeof (double));
    t_pin = calloc (reps, sizeof (double));
    t_page = calloc (reps, sizeof (double));
    if (!t_stage || !t_mirror || !t_snap || !t_pin || !t_page ||
        cudaMalloc (&d, bytes) != cudaSuccess ||
        cudaMallocHost (&pin, bytes) != cudaSuccess || !(page = malloc (bytes)) ||
        !(l1 = malloc (bytes + 64))) {
        fprintf (stderr, "gpu-snapshot-bw: cannot allocate 4 x %ld MiB\n", mib);
        return 1;
    }
    cudaMemset (d, 0x5a, bytes);
    memset (page, 0, bytes); /* the pages exist */
    memset (l1, 0, bytes + 64);
    if (gpu_pin (l1, bytes + 64) < 0) {
        fprintf (stderr, "gpu-snapshot-bw: cudaHostRegister of %ld MiB failed\n", mib);
        return 1;
    }
    if ((rc = elastic_manager_create (MPI_COMM_WORLD, NULL, &m, &err)) ||
        (rc = elastic_register_value (m, "step", &step, sizeof (step), &err)) ||
        (rc = elastic_register_device_array (m, "d", d, 1 << 20, (uint64_t)mib, &err)) ||
        (rc = elastic_manager_start (m, handler, NULL, &active, &err))) {
        fprintf (stderr, "gpu-snapshot-bw: %s\n", err.text);
        return 1;
    }
    for (int warm = 1, i = 0; i < reps; i++, warm = 0) {
        double t0;
        if (warm) { /* first touch of everything */
            gpu_stage_begin (m, l1, why, sizeof (why));
            gpu_stage_wait (m, why, sizeof (why));
            gpu_stage_begin (m, NULL, why, sizeof (why));
            gpu_stage_wait (m, why, sizeof (why));
            cudaMemcpy (pin, d, bytes, cudaMemcpyDeviceToHost);
            step += 2;
            elastic_maybe_snapshot (m, step, &err);
            elastic_maybe_snapshot (m, step + 1, &err);
        }
        cudaDeviceSynchronize ();
        /* l1 as a serialized snapshot: the value "step" (8 bytes), the array */
        t0 = MPI_Wtime ();
        if (gpu_stage_begin (m, l1, why, sizeof (why)) < 0 ||
            gpu_stage_wait (m, why, sizeof (why)) < 0) {
            fprintf (stderr, "gpu-snapshot-bw: %s\n", why);
            return 1;
        }
        t_stage[i] = MPI_Wtime () - t0;
        t0 = MPI_Wtime ();
        if (gpu_stage_begin (m, NULL, why, sizeof (why)) < 0 ||
            gpu_stage_wait (m, why, sizeof (why)) < 0) {
            fprintf (stderr, "gpu-snapshot-bw: %s\n", why);
            return 1;
        }
        t_mirror[i] = MPI_Wtime () - t0;
        step += 2;
        t0 = MPI_Wtime ();
        if ((rc = elastic_maybe_snapshot (m, step, &err)) != ELASTIC_OK ||
            (rc = elastic_maybe_snapshot (m, step + 1, &err)) != ELASTIC_OK) {
            fprintf (stderr, "gpu-snapshot-bw: %s\n", err.text);
            return 1;
        }
        t_snap[i] = MPI_Wtime () - t0;
        t0 = MPI_Wtime ();
        cudaMemcpy (pin, d, bytes, cudaMemcpyDeviceToHost);
        t_pin[i] = MPI_Wtime () - t0;
        t0 = MPI_Wtime ();
        cudaMemcpy (page, d, bytes, cudaMemcpyDeviceToHost);
        t_page[i] = MPI_Wtime () - t0;
    }
    {
        double s = bytes / median (t_stage, reps) / 1e9,
               n = bytes / median (t_snap, reps) / 1e9;
        double p = bytes / median (t_pin, reps) / 1e9,
               g = bytes / median (t_page, reps) / 1e9;
        double mi = bytes / median (t_mirror, reps) / 1e9;
        printf ("gpu-snapshot-bw: bytes %zu reps %d stage %.2f GB/s mirror %.2f GB/s "
                "snapshot "
                "%.2f GB/s pinned %.2f GB/s pageable %.2f GB/s stage/pinned %.1f %%\n",
                bytes,
                reps,
                s,
                mi,
                n,
                p,
                g,
                100.0 * s / p);
        printf (
            "gpu-snapshot-bw: stage min %.4f max %.4f s; pinned min %.4f max %.4f s\n",
            t_stage[0],
            t_stage[reps - 1],
            t_pin[0],
            t_pin[reps - 1]);
    }
    fflush (stdout);
    elastic_manager_destroy (m);
    cudaFree (d);
    cudaFreeHost (pin);
    gpu_unpin (l1);
    free (l1);
    free (page);
    MPI_Finalize ();
    return 0;
}
