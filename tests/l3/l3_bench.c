/* l3_bench.c - L3 write and restore bandwidth (driven by bench/l3-bandwidth.sh)
 *
 *   l3_bench write DIR MIB STEP    each rank writes MIB MiB of one array
 *   l3_bench read DIR MIB STEP     restore as a resume does: open the
 *                                  newest (structure only), each rank reads
 *                                  an even share of the array, verified as
 *                                  it arrives (l3_restore_latest);
 *                                  L3_BENCH_OPEN_VERIFY=1: verify every
 *                                  block at the open first (l3_open_latest)
 *
 * L3_BENCH_VERIFY=1 verifies before the commit; L3_BENCH_COLLECTIVE=1 writes
 * with collective MPI-IO (the default is independent).
 *
 * Rank 0 prints one line of KEY=VALUE: bytes, seconds, MiB/s (and, for
 * read, the open (open+verify, with L3_BENCH_OPEN_VERIFY) and read seconds
 * apart; read includes the verification).  Times are the slowest
 * rank's, from a barrier to the end of the call.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include "libelastic/l3.h"

struct bench_read {
    double *buf;
    uint64_t off, cnt;
    double t_open; /* when the file was open */
};

static int bench_read_cb (struct l3_file *f, void *arg, elastic_error_t *err)
{
    struct bench_read *br = arg;

    br->t_open = MPI_Wtime ();
    return l3_read_array (f, "data", br->off, br->cnt, br->buf, err);
}

int main (int argc, char **argv)
{
    int rank, size, rc = 0;
    elastic_error_t err;

    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    if (argc != 5) {
        if (rank == 0)
            fprintf (stderr, "usage: l3_bench write|read DIR MIB STEP\n");
        MPI_Finalize ();
        return 2;
    }
    const char *dir = argv[2];
    uint64_t per = (uint64_t)atol (argv[3]) << 20, n = per / 8;
    int64_t step = atoll (argv[4]);
    uint64_t global = n * (uint64_t)size;
    double *buf = malloc (per);

    for (uint64_t i = 0; i < n; i++)
        buf[i] = (double)(rank * n + i) * 0.5;
    if (!strcmp (argv[1], "write")) {
        struct l3_array a = {
            "data", 8, n, n * (uint64_t)rank, global, buf, L3_TYPE_FLOAT64};
        struct l3_state st = {&a, 1, NULL, 0, NULL, 0};
        struct l3_write_opts opts = {.dir = dir,
                                     .run_id = "bench",
                                     .keep = 1,
                                     .verify = getenv ("L3_BENCH_VERIFY") != NULL,
                                     .collective =
                                         getenv ("L3_BENCH_COLLECTIVE") != NULL};
        MPI_Barrier (MPI_COMM_WORLD);
        double t0 = MPI_Wtime ();
        int e = l3_write (MPI_COMM_WORLD, &opts, &st, step, &err);
        double t = MPI_Wtime () - t0, tmax;
        MPI_Reduce (&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (e != ELASTIC_OK) {
            if (rank == 0)
                fprintf (stderr, "l3_write: %s\n", err.text);
            rc = 1;
        } else if (rank == 0)
            printf ("l3 write ranks=%d bytes=%llu seconds=%.3f MiB/s=%.1f\n",
                    size,
                    (unsigned long long)(global * 8),
                    tmax,
                    global * 8 / 1048576.0 / tmax);
    } else {
        struct l3_file *f;
        uint64_t off = global * rank / size, cnt = global * (rank + 1) / size - off;
        struct bench_read br = {buf, off, cnt, 0};
        double t0, t1, t2;
        int e;
        MPI_Barrier (MPI_COMM_WORLD);
        t0 = MPI_Wtime ();
        if (getenv ("L3_BENCH_OPEN_VERIFY")) {
            e = l3_open_latest (MPI_COMM_WORLD, dir, "bench", &f, &err);
            t1 = MPI_Wtime ();
            if (e == ELASTIC_OK) {
                e = l3_read_array (f, "data", off, cnt, buf, &err);
                l3_close (f);
            }
        } else {
            e = l3_restore_latest (
                MPI_COMM_WORLD, dir, "bench", bench_read_cb, &br, &f, NULL, &err);
            t1 = br.t_open > 0 ? br.t_open : MPI_Wtime ();
            if (e == ELASTIC_OK)
                l3_close (f);
        }
        t2 = MPI_Wtime ();
        double t[2] = {t1 - t0, t2 - t1}, tmax[2];
        MPI_Reduce (t, tmax, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        for (uint64_t i = 0; e == ELASTIC_OK && i < cnt; i++)
            if (buf[i] != (double)(off + i) * 0.5) {
                fprintf (stderr,
                         "rank %d: element %llu wrong\n",
                         rank,
                         (unsigned long long)(off + i));
                rc = 1;
                break;
            }
        if (e != ELASTIC_OK) {
            if (rank == 0)
                fprintf (stderr, "l3 restore: %s\n", err.text);
            rc = 1;
        } else if (rank == 0)
            printf ("l3 read ranks=%d bytes=%llu seconds=%.3f MiB/s=%.1f "
                    "open+verify=%.3f read=%.3f\n",
                    size,
                    (unsigned long long)(global * 8),
                    tmax[0] + tmax[1],
                    global * 8 / 1048576.0 / (tmax[0] + tmax[1]),
                    tmax[0],
                    tmax[1]);
    }
    free (buf);
    MPI_Allreduce (MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize ();
    return rc;
}
