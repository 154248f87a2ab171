/* diff_bench.c - differential snapshots and the per-step fast path
 *
 *   bench_diff snapshot --mib M --static PCT --diff on|off [--warmup W]
 *                       [--snaps K] [--block-kib B]
 *     M MiB of uint64 per rank in one array; before each snapshot the
 *     blocks that are not static get new values (every block k with
 *     k % 10 >= PCT / 10 of each group of ten: spread over the array),
 *     outside the timed region.  Each snapshot is elastic_maybe_snapshot
 *     with snapshot_period 1, synchronous (ELASTIC_SNAPSHOT_OVERLAP=0, set
 *     here), so that the call holds the whole L1 copy and L2 exchange;
 *     the ranks start it together (MPI_Barrier) and its time is the
 *     slowest rank's.  --diff on: elastic_array_set_diff ELASTIC_DIFF_ON;
 *     off: ELASTIC_DIFF_OFF (today's full snapshot).  After W warm-up
 *     snapshots, K timed ones; prints one line per snapshot
 *     "snap I SECONDS" and "median SECONDS".
 *
 *   bench_diff fastpath --calls N
 *     N calls of elastic_maybe_snapshot and of elastic_maybe_reshard_up on
 *     steps that do nothing (snapshot_period and reshard_check_period 2^30,
 *     the default preemption signals installed: the agreement is
 *     amortized), timed with clock_gettime(CLOCK_MONOTONIC) around the
 *     loop; prints "maybe_snapshot NS ns/call" and "maybe_reshard_up NS
 *     ns/call".  Run it under strace -c -f against --calls 0 to count the
 *     system calls of the loop.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include <elastic.h>

static double now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp (const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die (const char *what, const elastic_error_t *err)
{
    fprintf (stderr, "bench_diff: %s: %s\n", what, err ? err->text : "");
    MPI_Abort (MPI_COMM_WORLD, 1);
}

static int snapshot_mode (int argc, char **argv)
{
    long mib = 16, pct = 90, warm = 40, snaps = 68, block_kib = 64;
    int diff = 1, rank, active;
    elastic_config_t cfg;
    elastic_manager_t *m;
    elastic_error_t err;
    uint64_t *v, n, blk;
    double *t;
    int64_t step = 0;

    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *a = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp (o, "--mib"))
            mib = atol (a), i++;
        else if (!strcmp (o, "--static"))
            pct = atol (a), i++;
        else if (!strcmp (o, "--warmup"))
            warm = atol (a), i++;
        else if (!strcmp (o, "--snaps"))
            snaps = atol (a), i++;
        else if (!strcmp (o, "--block-kib"))
            block_kib = atol (a), i++;
        else if (!strcmp (o, "--diff") && (!strcmp (a, "on") || !strcmp (a, "off")))
            diff = !strcmp (a, "on"), i++;
        else {
            fprintf (stderr,
                     "bench_diff: '%s' is invalid (see the usage in diff_bench.c)\n",
                     o);
            return 2;
        }
    }
    if (mib < 1 || pct < 0 || pct > 100 || pct % 10 || snaps < 1 || block_kib < 1) {
        fprintf (
            stderr,
            "bench_diff: --mib %ld --static %ld --snaps %ld --block-kib %ld: invalid "
            "(expected >= 1, a multiple of 10 from 0 to 100, >= 1, >= 1)\n",
            mib,
            pct,
            snaps,
            block_kib);
        return 2;
    }
    setenv ("ELASTIC_SNAPSHOT_OVERLAP", "0", 1);
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    elastic_config_init (&cfg);
    cfg.snapshot_period = 1;
    cfg.diff_block_kib = (int)block_kib;
    if (elastic_manager_create (MPI_COMM_WORLD, &cfg, &m, &err) != ELASTIC_OK)
        die ("create", &err);
    n = (uint64_t)mib << 17;
    blk = (uint64_t)block_kib << 7; /* elements per block */
    if (!(v = malloc (n * sizeof (uint64_t))) || !(t = malloc (snaps * sizeof (double))))
        die ("out of memory", NULL);
    for (uint64_t i = 0; i < n; i++)
        v[i] = i * 0x9e3779b97f4a7c15ull;
    if (elastic_register_value (m, "step", &step, sizeof (step), &err) != ELASTIC_OK ||
        elastic_register_array (m, "v", v, sizeof (uint64_t), n, &err) != ELASTIC_OK ||
        elastic_array_set_diff (
            m, "v", diff ? ELASTIC_DIFF_ON : ELASTIC_DIFF_OFF, &err) != ELASTIC_OK ||
        elastic_manager_start (m, NULL, NULL, &active, &err) != ELASTIC_OK)
        die ("setup", &err);
    for (long s = 0; s < warm + snaps; s++) {
        double t0, dt, all;
        /* the changing blocks get new values */
        for (uint64_t b = 0; b * blk < n; b++) {
            if ((long)(b % 10) < pct / 10)
                continue;
            for (uint64_t i = b * blk; i < n && i < (b + 1) * blk; i++)
                v[i] += (uint64_t)s + 1;
        }
        MPI_Barrier (MPI_COMM_WORLD);
        t0 = now ();
        if (elastic_maybe_snapshot (m, step, &err) != ELASTIC_OK)
            die ("snapshot", &err);
        dt = now () - t0;
        MPI_Allreduce (&dt, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        step++;
        if (s >= warm) {
            t[s - warm] = all;
            if (rank == 0)
                printf ("snap %ld %.9f\n", s - warm, all);
        }
    }
    qsort (t, snaps, sizeof (double), cmp);
    if (rank == 0)
        printf ("median %.9f\n", t[snaps / 2]);
    fflush (stdout);
    elastic_manager_destroy (m);
    free (v);
    free (t);
    MPI_Finalize ();
    return 0;
}

static int fastpath_mode (int argc, char **argv)
{
    long calls = 1000000;
    elastic_config_t cfg;
    elastic_manager_t *m;
    elastic_error_t err;
    int64_t step = 0;
    int rank, resharded, active;
    double t0, ts, tr;

    for (int i = 2; i < argc; i++) {
        if (!strcmp (argv[i], "--calls") && i + 1 < argc)
            calls = atol (argv[++i]);
        else {
            fprintf (
                stderr, "bench_diff: '%s' is invalid (expected --calls N)\n", argv[i]);
            return 2;
        }
    }
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    elastic_config_init (&cfg);
    cfg.snapshot_period = 1 << 30;
    cfg.reshard_check_period = 1 << 30;
    if (elastic_manager_create (MPI_COMM_WORLD, &cfg, &m, &err) != ELASTIC_OK)
        die ("create", &err);
    if (elastic_register_value (m, "step", &step, sizeof (step), &err) != ELASTIC_OK ||
        elastic_manager_start (m, NULL, NULL, &active, &err) != ELASTIC_OK)
        die ("setup", &err);
    /* step 0 snapshots (0 % period == 0): warm up past it */
    for (step = 0; step < 1000; step++)
        if (elastic_maybe_snapshot (m, step, &err) != ELASTIC_OK)
            die ("maybe_snapshot", &err);
    t0 = now ();
    for (long i = 0; i < calls; i++, step++)
        if (elastic_maybe_snapshot (m, step, &err) != ELASTIC_OK)
            die ("maybe_snapshot", &err);
    ts = now () - t0;
    t0 = now ();
    for (long i = 0; i < calls; i++, step++)
        if (elastic_maybe_reshard_up (m, step, NULL, NULL, &resharded, &err) !=
            ELASTIC_OK)
            die ("maybe_reshard_up", &err);
    tr = now () - t0;
    if (rank == 0 && calls > 0) {
        printf ("maybe_snapshot %.1f ns/call (%ld calls)\n", ts / calls * 1e9, calls);
        printf ("maybe_reshard_up %.1f ns/call (%ld calls)\n", tr / calls * 1e9, calls);
    }
    fflush (stdout);
    elastic_manager_destroy (m);
    MPI_Finalize ();
    return 0;
}

int main (int argc, char **argv)
{
    if (argc > 1 && !strcmp (argv[1], "snapshot"))
        return snapshot_mode (argc, argv);
    if (argc > 1 && !strcmp (argv[1], "fastpath"))
        return fastpath_mode (argc, argv);
    fprintf (stderr,
             "usage: bench_diff snapshot --mib M --static PCT --diff on|off [--warmup W] "
             "[--snaps K] [--block-kib B]\n"
             "       bench_diff fastpath --calls N\n");
    return 2;
}
