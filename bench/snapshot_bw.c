/* snapshot_bw.c - B3/B4: L1 copy and L2 buddy exchange bandwidth of
 * libelastic's snapshot, next to memcpy and MPI_Sendrecv of the same bytes
 * between the same ranks, in the same program, trial by trial.
 *
 *   snapshot_bw [--mib N] [--trials T] [--warmup W]
 *
 * Every rank registers an array of N MiB (default 16) and calls
 * elastic_maybe_snapshot with snapshot_period 1, so every call is a
 * snapshot: serialize into the L1 ring, an allgather of the sizes, the L2
 * exchange (Isend to the buddy, Irecv from the ward, MPI_Waitall), and the
 * commit agreement.  The library does not time its phases, so this program
 * times them through MPI's profiling interface: it defines MPI_Allgather
 * and MPI_Waitall, which libelastic (linked statically from
 * libelastic-core.la) calls, and records when they are entered and left
 * during a snapshot.  Nothing in the library is changed or bypassed:
 *
 *   l1     = call start -> MPI_Allgather entered  (serialize: the L1 copy)
 *   l2     = MPI_Allgather returned -> MPI_Waitall returned  (L2 exchange)
 *   commit = MPI_Waitall returned -> call returned  (agreement, commit)
 *   call   = the whole elastic_maybe_snapshot
 *
 * Baselines, each trial, right after the snapshot:
 *   memcpy   = memcpy of the same bytes into one of two pre-faulted buffers
 *              (the L1 ring has two slots, so the same cache behaviour)
 *   sendrecv = MPI_Sendrecv of the same bytes to the buddy (rank + 1) from
 *              the ward (rank - 1): the pairs libelastic uses on one node
 *
 * Each phase is the slowest rank's (MPI_MAX), started from a barrier for
 * the baselines and from the collective's natural start for the library.
 * Rank 0 prints one CSV line per trial and value:
 *   snapshot,RANKS,MIB,VARIANT,TRIAL,METRIC,VALUE,UNIT
 * with VARIANT elastic or baseline, METRIC l1_s/l2_s/commit_s/call_s or
 * memcpy_s/sendrecv_s.  Exit 0, or 1 with a message if a call fails.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <elastic.h>

/* Phase stamps, set by the profiling wrappers while in_snapshot is 1. */
static int in_snapshot;
static double t_ag_enter, t_ag_leave, t_wa_leave;

int MPI_Allgather (const void *sbuf,
                   int scount,
                   MPI_Datatype stype,
                   void *rbuf,
                   int rcount,
                   MPI_Datatype rtype,
                   MPI_Comm comm)
{
    int rc;

    if (in_snapshot && t_ag_enter == 0.0)
        t_ag_enter = PMPI_Wtime ();
    rc = PMPI_Allgather (sbuf, scount, stype, rbuf, rcount, rtype, comm);
    if (in_snapshot && t_ag_leave == 0.0)
        t_ag_leave = PMPI_Wtime ();
    return rc;
}

int MPI_Waitall (int count, MPI_Request reqs[], MPI_Status stats[])
{
    int rc = PMPI_Waitall (count, reqs, stats);

    if (in_snapshot)
        t_wa_leave = PMPI_Wtime ();
    return rc;
}

static long parse (const char *opt, const char *s, long min, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol (s ? s : "", &end, 10);
    if (!s || !*s || *end || errno || v < min || v > max) {
        fprintf (stderr,
                 "snapshot_bw: %s: '%s' is invalid (expected an integer from %ld to "
                 "%ld)\n",
                 opt,
                 s ? s : "",
                 min,
                 max);
        exit (2);
    }
    return v;
}

static void fill (uint64_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (seed + i) * 0x9e3779b97f4a7c15ull;
}

int main (int argc, char **argv)
{
    long mib = 16, trials = 10, warmup = 3;
    int rank, size, rc;
    elastic_config_t cfg;
    elastic_error_t err;
    elastic_manager_t *m = NULL;
    uint64_t *state = NULL, *dst[2] = {NULL, NULL}, *rbuf = NULL;
    int64_t step = 0;
    size_t bytes, n;

    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp (argv[i], "--mib"))
            mib = parse ("--mib", v, 1, 1 << 16), i++;
        else if (!strcmp (argv[i], "--trials"))
            trials = parse ("--trials", v, 1, 100000), i++;
        else if (!strcmp (argv[i], "--warmup"))
            warmup = parse ("--warmup", v, 0, 100000), i++;
        else {
            fprintf (stderr,
                     "snapshot_bw: '%s' is invalid (expected --mib N, --trials T, "
                     "--warmup W)\n",
                     argv[i]);
            return 2;
        }
    }
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    bytes = (size_t)mib << 20;
    n = bytes / sizeof (uint64_t);
    if (!(state = malloc (bytes)) || !(dst[0] = malloc (bytes)) ||
        !(dst[1] = malloc (bytes)) || !(rbuf = malloc (bytes))) {
        fprintf (
            stderr, "snapshot_bw: rank %d: out of memory (%ld MiB x 4)\n", rank, mib);
        MPI_Abort (MPI_COMM_WORLD, 1);
    }
    fill (state, n, (uint64_t)rank << 40);
    fill (dst[0], n, 1); /* fault every page in */
    fill (dst[1], n, 2);
    fill (rbuf, n, 3);

    elastic_config_init (&cfg);
    cfg.snapshot_period = 1;
    cfg.snapshot_buffer_size = 2;
    if ((rc = elastic_manager_create (MPI_COMM_WORLD, &cfg, &m, &err)) != ELASTIC_OK ||
        (rc = elastic_register_value (m, "step", &step, sizeof (step), &err)) !=
            ELASTIC_OK ||
        (rc = elastic_register_array (m, "state", state, sizeof (uint64_t), n, &err)) !=
            ELASTIC_OK) {
        fprintf (stderr, "snapshot_bw: rank %d: %s\n", rank, err.text);
        MPI_Abort (MPI_COMM_WORLD, 1);
    }
    int active;
    if ((rc = elastic_manager_start (m, NULL, NULL, &active, &err)) != ELASTIC_OK) {
        fprintf (stderr, "snapshot_bw: rank %d: %s\n", rank, err.text);
        MPI_Abort (MPI_COMM_WORLD, 1);
    }
    MPI_Comm comm = elastic_manager_comm (m);
    int buddy = (rank + 1) % size, ward = (rank - 1 + size) % size;

    for (long t = 0; t < warmup + trials; t++) {
        double v[6], mx[6], t0, t1;

        /* the library's snapshot (warm-up calls fault its buffers in) */
        PMPI_Barrier (comm);
        t_ag_enter = t_ag_leave = t_wa_leave = 0.0;
        in_snapshot = 1;
        t0 = PMPI_Wtime ();
        rc = elastic_maybe_snapshot (m, step, &err);
        t1 = PMPI_Wtime ();
        in_snapshot = 0;
        if (rc != ELASTIC_OK) {
            fprintf (stderr, "snapshot_bw: rank %d: %s\n", rank, err.text);
            MPI_Abort (MPI_COMM_WORLD, 1);
        }
        if (t_wa_leave == 0.0) /* one rank: no buddy, no exchange */
            t_wa_leave = t_ag_leave;
        v[0] = t_ag_enter - t0;
        v[1] = t_wa_leave - t_ag_leave;
        v[2] = t1 - t_wa_leave;
        v[3] = t1 - t0;
        step++;
        state[(size_t)t % n]++; /* the state changes between snapshots */

        /* memcpy of the same bytes, all ranks at once (as serialize runs) */
        PMPI_Barrier (comm);
        t0 = PMPI_Wtime ();
        memcpy (dst[t % 2], state, bytes);
        v[4] = PMPI_Wtime () - t0;

        /* MPI_Sendrecv of the same bytes along the buddy ring */
        v[5] = 0.0;
        if (size > 1) {
            PMPI_Barrier (comm);
            t0 = PMPI_Wtime ();
            for (size_t off = 0; off < bytes; off += (size_t)1 << 30) {
                int len = (int)(bytes - off < ((size_t)1 << 30) ? bytes - off
                                                                : ((size_t)1 << 30));
                PMPI_Sendrecv ((char *)state + off,
                               len,
                               MPI_BYTE,
                               buddy,
                               7,
                               (char *)rbuf + off,
                               len,
                               MPI_BYTE,
                               ward,
                               7,
                               comm,
                               MPI_STATUS_IGNORE);
            }
            v[5] = PMPI_Wtime () - t0;
        }
        PMPI_Reduce (v, mx, 6, MPI_DOUBLE, MPI_MAX, 0, comm);
        if (rank == 0 && t >= warmup) {
            static const char *name[6] = {
                "l1_s", "l2_s", "commit_s", "call_s", "memcpy_s", "sendrecv_s"};
            for (int k = 0; k < 6; k++) {
                if (size == 1 && (k == 1 || k == 5))
                    continue;
                printf ("snapshot,%d,%ld,%s,%ld,%s,%.9f,s\n",
                        size,
                        mib,
                        k < 4 ? "elastic" : "baseline",
                        t - warmup + 1,
                        name[k],
                        mx[k]);
            }
            fflush (stdout);
        }
    }
    elastic_manager_destroy (m);
    free (state);
    free (dst[0]);
    free (dst[1]);
    free (rbuf);
    MPI_Finalize ();
    return 0;
}
