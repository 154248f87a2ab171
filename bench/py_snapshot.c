/* py_snapshot.c - B10's baseline: elastic_maybe_snapshot of one registered
 * array called from C, next to bench/py_snapshot.py, which makes the same
 * call through the Python binding (import elastic) on an ndarray.
 *
 *   bench_py_snapshot [--mib N] [--trials T] [--warmup W]
 *
 * Every rank registers a float64 array of N MiB (default 64) in rows of
 * 1024 items, creates the manager with snapshot_period 1 (every call is a
 * snapshot: the L1 copy, the L2 exchange with the buddy, the commit) and
 * no signal handlers, calls maybe_snapshot W times untimed, then T times,
 * each timed from a barrier; the slowest rank's time (MPI_MAX) is the
 * trial's.  Rank 0 prints one CSV row per trial:
 *   py_snapshot,RANKS,MIB,c,TRIAL,call_s,SECONDS,s
 * py_snapshot.py prints the same rows with variant python.  Exit 0, or 1
 * with a message if a call fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <elastic.h>

#define ROW 1024 /* float64 items per element */

static long arg (int argc, char **argv, const char *name, long def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp (argv[i], name)) {
            char *end;
            long v = strtol (argv[i + 1], &end, 10);
            if (*end || v < 1) {
                fprintf (stderr,
                         "bench_py_snapshot: %s: '%s' is invalid (expected an integer "
                         ">= 1)\n",
                         name,
                         argv[i + 1]);
                exit (2);
            }
            return v;
        }
    return def;
}

int main (int argc, char **argv)
{
    long mib = arg (argc, argv, "--mib", 64);
    long trials = arg (argc, argv, "--trials", 20);
    long warmup = arg (argc, argv, "--warmup", 3);
    elastic_config_t cfg;
    elastic_error_t err;
    elastic_manager_t *m = NULL;
    int rank, size, active, rc = 0;
    uint64_t rows = (uint64_t)mib * (1 << 20) / (ROW * sizeof (double));
    double *a;
    int64_t step = 0;

    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    if (!(a = malloc (rows * ROW * sizeof (double)))) {
        fprintf (stderr, "bench_py_snapshot: out of memory\n");
        MPI_Abort (MPI_COMM_WORLD, 1);
    }
    for (uint64_t i = 0; i < rows * ROW; i++)
        a[i] = (double)(rank * 1000003 + (int64_t)i);
    elastic_config_init (&cfg);
    cfg.snapshot_period = 1;
    cfg.signals = "none";
    if (elastic_manager_create (MPI_COMM_WORLD, &cfg, &m, &err) != ELASTIC_OK ||
        elastic_register_value (m, "step", &step, sizeof (step), &err) != ELASTIC_OK ||
        elastic_register_array (m, "a", a, ROW * sizeof (double), rows, &err) !=
            ELASTIC_OK ||
        elastic_set_type (m, "a", ELASTIC_TYPE_FLOAT64, &err) != ELASTIC_OK ||
        elastic_manager_start (m, NULL, NULL, &active, &err) != ELASTIC_OK) {
        fprintf (stderr, "bench_py_snapshot: %s\n", err.text);
        rc = 1;
        goto out;
    }
    for (long t = -warmup; t < trials; t++, step++) {
        double t0, dt, worst;
        MPI_Barrier (MPI_COMM_WORLD);
        t0 = MPI_Wtime ();
        if (elastic_maybe_snapshot (m, step, &err) != ELASTIC_OK) {
            fprintf (stderr, "bench_py_snapshot: %s\n", err.text);
            rc = 1;
            goto out;
        }
        dt = MPI_Wtime () - t0;
        MPI_Allreduce (&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (t >= 0 && rank == 0)
            printf ("py_snapshot,%d,%ld,c,%ld,call_s,%.6f,s\n", size, mib, t, worst);
    }
out:
    elastic_manager_destroy (m);
    free (a);
    MPI_Finalize ();
    return rc;
}
