/* diff_app.c - a mostly static array under differential snapshots
 *
 * One array of --elems uint64 elements, distributed in blocks, snapshotted
 * differentially (elastic_array_set_diff ELASTIC_DIFF_ON).  It is cut into
 * chunks of 512 elements (4 KiB); at step s some chunks change:
 *   --mode one    only chunk s % nchunks (one block between two steps);
 *   --mode tenth  about one chunk in ten, a different set each step.
 * A changed chunk's element i becomes value (i, s), so the whole array at
 * step r is known: each chunk holds the values of the last step before r at
 * which it changed.  After every restore the handler checks every element
 * of its new block against that ("verify ok" or "verify BAD"): a changed
 * block that was not re-sent to the buddy, or an unchanged one whose L1/L2
 * copy is stale, shows up there and in the final checksum.
 *
 * usage: diff_app [--steps N] [--elems N] [--mode one|tenth]
 *                 [--no-diff] [--fail RANK:STEP[:WHERE]]...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <elastic.h>

#include "../../examples/inject.h"

#define CHUNK 512

struct app {
    MPI_Comm comm;
    int rank, size, world_rank;
    int tenth;
    uint64_t elems, nchunks;
    int64_t step; /* registered value */
    uint64_t *v;
    uint64_t off, count;
    long bad; /* elements found wrong after restores */
    int restores;
};

static uint64_t mix (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int changes (const struct app *a, uint64_t c, int64_t s)
{
    if (!a->tenth)
        return c == (uint64_t)s % a->nchunks;
    return mix (c * 1000003u + (uint64_t)s) % 10 == 0;
}

static uint64_t value (uint64_t i, int64_t s)
{
    return mix (i ^ ((uint64_t)(s + 1) << 40));
}

/* The value of element i at the top of step r. */
static uint64_t expected (const struct app *a, uint64_t i, int64_t r)
{
    uint64_t c = i / CHUNK;
    for (int64_t s = r - 1; s >= 0; s--)
        if (changes (a, c, s))
            return value (i, s);
    return value (i, -1);
}

static long verify (const struct app *a)
{
    long bad = 0;
    for (uint64_t k = 0; k < a->count; k++)
        if (a->v[k] != expected (a, a->off + k, a->step))
            bad++;
    return bad;
}

static int rebuild (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    struct app *a = arg;
    elastic_error_t err;
    uint64_t off, count;
    uint64_t *p;
    long bad, allbad = 0;

    a->comm = comm;
    MPI_Comm_rank (comm, &a->rank);
    MPI_Comm_size (comm, &a->size);
    if (elastic_array_block (m, "v", &off, &count, NULL) != ELASTIC_OK)
        return -1;
    if (!(p = malloc ((count ? count : 1) * sizeof (uint64_t))))
        return -1;
    if (elastic_array_restore (m, "v", p, count, &err) != ELASTIC_OK) {
        fprintf (stderr, "diff_app: %s\n", err.text);
        free (p);
        return -1;
    }
    free (a->v);
    a->v = p;
    a->off = off;
    a->count = count;
    bad = verify (a);
    a->bad += bad;
    a->restores++;
    if (MPI_Reduce (&bad, &allbad, 1, MPI_LONG, MPI_SUM, 0, comm) != MPI_SUCCESS)
        return -1;
    if (a->rank == 0)
        printf ("restored step %lld on %d ranks: verify %s (%ld bad elements)\n",
                (long long)a->step,
                a->size,
                allbad ? "BAD" : "ok",
                allbad);
    fflush (stdout);
    return 0;
}

static void apply_step (struct app *a)
{
    uint64_t c0 = a->off / CHUNK, c1 = (a->off + a->count + CHUNK - 1) / CHUNK;
    for (uint64_t c = c0; c < c1; c++) {
        if (!changes (a, c, a->step))
            continue;
        uint64_t lo = c * CHUNK > a->off ? c * CHUNK : a->off;
        uint64_t hi =
            (c + 1) * CHUNK < a->off + a->count ? (c + 1) * CHUNK : a->off + a->count;
        for (uint64_t i = lo; i < hi; i++)
            a->v[i - a->off] = value (i, a->step);
    }
}

static void usage (void)
{
    fprintf (stderr,
             "usage: diff_app [--steps N] [--elems N] [--mode one|tenth] [--no-diff] "
             "[--fail RANK:STEP[:WHERE]]...\n");
    exit (2);
}

int main (int argc, char **argv)
{
    struct app a = {.elems = 65536};
    struct inject inj;
    elastic_manager_t *m;
    elastic_error_t err;
    elastic_info_t info;
    int64_t steps = 60;
    int rc = 0, mrc, active, nodiff = 0;
    uint64_t sum = 0, mine, total;

    inject_init (&inj);
    for (int i = 1; i < argc; i++) {
        if (!strcmp (argv[i], "--steps") && i + 1 < argc)
            steps = atoll (argv[++i]);
        else if (!strcmp (argv[i], "--elems") && i + 1 < argc)
            a.elems = strtoull (argv[++i], NULL, 10);
        else if (!strcmp (argv[i], "--mode") && i + 1 < argc) {
            i++;
            if (!strcmp (argv[i], "tenth"))
                a.tenth = 1;
            else if (strcmp (argv[i], "one"))
                usage ();
        } else if (!strcmp (argv[i], "--no-diff"))
            nodiff = 1;
        else if (!strcmp (argv[i], "--fail") && i + 1 < argc) {
            if (inject_parse (&inj, argv[0], argv[++i]) < 0)
                return 2;
        } else
            usage ();
    }
    if (a.elems < CHUNK)
        usage ();
    a.nchunks = (a.elems + CHUNK - 1) / CHUNK;
    inject_setenv (&inj);
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &a.world_rank);
    if ((rc = elastic_manager_create (MPI_COMM_WORLD, NULL, &m, &err)) != ELASTIC_OK) {
        fprintf (stderr, "diff_app: %s\n", err.text);
        MPI_Finalize ();
        return elastic_exit_code (rc);
    }
    a.comm = elastic_manager_comm (m);
    if (a.comm != MPI_COMM_NULL) {
        MPI_Comm_rank (a.comm, &a.rank);
        MPI_Comm_size (a.comm, &a.size);
        a.off = a.elems * a.rank / a.size;
        a.count = a.elems * (a.rank + 1) / a.size - a.off;
        if (!(a.v = malloc (a.count * sizeof (uint64_t))))
            return 1;
        for (uint64_t k = 0; k < a.count; k++)
            a.v[k] = value (a.off + k, -1);
    }
    if (elastic_register_value (m, "step", &a.step, sizeof (a.step), &err) !=
            ELASTIC_OK ||
        elastic_register_array (m, "v", a.v, sizeof (uint64_t), a.count, &err) !=
            ELASTIC_OK ||
        elastic_array_set_diff (
            m, "v", nodiff ? ELASTIC_DIFF_OFF : ELASTIC_DIFF_ON, &err) != ELASTIC_OK ||
        elastic_manager_start (m, rebuild, &a, &active, &err) != ELASTIC_OK) {
        fprintf (stderr, "diff_app: %s\n", err.text);
        rc = 1;
        goto done;
    }
    if (!active)
        goto done;
    for (;;) {
        while (a.step < steps) {
            if ((rc = elastic_maybe_snapshot (m, a.step, &err)) != ELASTIC_OK)
                goto fail;
            if ((mrc = inject_step (&inj, a.world_rank, a.step, a.comm)) != MPI_SUCCESS)
                goto failed;
            apply_step (&a);
            mine = a.count;
            if ((mrc = MPI_Allreduce (&mine, &total, 1, MPI_UINT64_T, MPI_SUM, a.comm)) !=
                MPI_SUCCESS) {
            failed:
                if ((rc = elastic_maybe_reshard_down (m, mrc, rebuild, &a, &err)) !=
                    ELASTIC_OK)
                    goto fail;
                continue;
            }
            a.step++;
        }
        mine = 0;
        for (uint64_t k = 0; k < a.count; k++)
            mine += mix (a.v[k] + a.off + k);
        if ((mrc = MPI_Allreduce (&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, a.comm)) ==
            MPI_SUCCESS)
            break;
        if ((rc = elastic_maybe_reshard_down (m, mrc, rebuild, &a, &err)) != ELASTIC_OK)
            goto fail;
    }
    elastic_manager_info (m, &info);
    {
        long bad = verify (&a) + a.bad, allbad = 0;
        MPI_Reduce (&bad, &allbad, 1, MPI_LONG, MPI_SUM, 0, a.comm);
        if (a.rank == 0) {
            printf ("final world %d, events %d, bad elements %ld\n",
                    info.size,
                    info.events,
                    allbad);
            printf ("checksum %016llx\n", (unsigned long long)sum);
        }
    }
    goto done;
fail:
    fprintf (stderr, "diff_app: rank %d: %s\n", a.world_rank, err.text);
done:
    fflush (stdout);
    elastic_manager_destroy (m);
    free (a.v);
    MPI_Finalize ();
    return elastic_exit_code (rc);
}
