/* blob_app.c - application-side resharding with opaque per-rank blobs
 *
 * NITEMS items are distributed cyclically (item k on rank k % size), a
 * layout libelastic does not know: each rank saves its items as one blob.
 * After a world change the handler fetches, by old rank, the blobs holding
 * the items it now owns (elastic_blob_fetch) and rebuilds its blob.  Every
 * step updates each item deterministically, and an MPI_Allreduce makes the
 * ranks communicate.  The final checksum depends only on the steps done.
 *
 * --handler-fails N makes the handler fail its first N calls (retries);
 * --die-in-handler RANK makes that original rank SIGKILL itself in its
 * first handler call (a failure during a recovery's handler).  --sleep MS
 * stands for more work per step.  The job grows back (maybe_reshard_up)
 * into idle spares or new processes.
 *
 * usage: blob_app [--steps N] [--items N] [--sleep MS] [--handler-fails N]
 * [--fail RANK:STEP[:WHERE]]...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include <elastic.h>

#include "../../examples/inject.h"

struct item {
    int64_t key;
    uint64_t value;
};

struct app {
    MPI_Comm comm;
    int rank, size, world_rank;
    int nitems;
    int64_t step; /* registered value */
    struct item *mine;
    int nmine;
    int fetched;        /* blobs fetched in handlers */
    int handler_fails;  /* fail this many more handler calls */
    int die_in_handler; /* original rank that dies in its handler, or -1 */
    int handler_calls;
};

static uint64_t mix (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int own_items (struct app *a)
{
    a->nmine = 0;
    free (a->mine);
    a->mine = malloc ((a->nitems / a->size + 1) * sizeof (struct item));
    return a->mine ? 0 : -1;
}

static int rebuild (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    struct app *a = arg;
    elastic_info_t info;
    elastic_error_t err;
    int *want = NULL, nwant = 0, rc = -1, old;
    void **bufs = NULL;
    size_t *sizes = NULL;

    a->handler_calls++;
    if (a->world_rank == a->die_in_handler) {
        fprintf (stderr, "rank %d: dying in the handler (SIGKILL)\n", a->world_rank);
        fflush (stderr);
        kill (getpid (), SIGKILL);
    }
    if (a->handler_fails > 0) {
        a->handler_fails--;
        return -1;
    }
    a->comm = comm;
    MPI_Comm_rank (comm, &a->rank);
    MPI_Comm_size (comm, &a->size);
    elastic_manager_info (m, &info);
    old = info.old_size;
    if (own_items (a) < 0 || !(want = malloc (old * sizeof (int))) ||
        !(bufs = calloc (old, sizeof (void *))) ||
        !(sizes = calloc (old, sizeof (size_t))))
        goto out;
    /* the old ranks that held my new items */
    for (int j = 0; j < old; j++) {
        for (int k = j; k < a->nitems; k += old) {
            if (k % a->size == a->rank) {
                want[nwant++] = j;
                break;
            }
        }
    }
    if (elastic_blob_fetch (m, "items", nwant, want, bufs, sizes, &err) != ELASTIC_OK) {
        fprintf (stderr, "blob_app: %s\n", err.text);
        goto out;
    }
    for (int i = 0; i < nwant; i++) {
        const struct item *it = bufs[i];
        size_t n = sizes[i] / sizeof (struct item);
        if (sizes[i] % sizeof (struct item)) {
            fprintf (stderr,
                     "blob_app: blob of old rank %d has %zu bytes\n",
                     want[i],
                     sizes[i]);
            goto out;
        }
        for (size_t t = 0; t < n; t++) {
            if (it[t].key % old != want[i]) {
                fprintf (stderr,
                         "blob_app: old rank %d's blob holds item %lld\n",
                         want[i],
                         (long long)it[t].key);
                goto out;
            }
            if (it[t].key % a->size == a->rank)
                a->mine[a->nmine++] = it[t];
        }
    }
    a->fetched += nwant;
    if (elastic_register_blob (
            m, "items", a->mine, a->nmine * sizeof (struct item), &err) != ELASTIC_OK)
        goto out;
    if (a->rank == 0)
        printf ("resharded at step %lld: world %d -> %d, %d blobs fetched here\n",
                (long long)a->step,
                old,
                a->size,
                nwant);
    fflush (stdout);
    rc = 0;
out:
    for (int i = 0; bufs && i < nwant; i++)
        free (bufs[i]);
    free (bufs);
    free (sizes);
    free (want);
    return rc;
}

int main (int argc, char **argv)
{
    struct app a = {.nitems = 200, .die_in_handler = -1};
    struct inject inj;
    elastic_manager_t *m;
    elastic_error_t err;
    elastic_info_t info;
    int64_t steps = 60;
    long sleep_ms = 0;
    int rc = 0, mrc, active;
    uint64_t sum = 0, mine, total;

    inject_init (&inj);
    for (int i = 1; i < argc; i++) {
        if (!strcmp (argv[i], "--steps") && i + 1 < argc)
            steps = atoll (argv[++i]);
        else if (!strcmp (argv[i], "--items") && i + 1 < argc)
            a.nitems = atoi (argv[++i]);
        else if (!strcmp (argv[i], "--handler-fails") && i + 1 < argc)
            a.handler_fails = atoi (argv[++i]);
        else if (!strcmp (argv[i], "--sleep") && i + 1 < argc)
            sleep_ms = atol (argv[++i]);
        else if (!strcmp (argv[i], "--die-in-handler") && i + 1 < argc)
            a.die_in_handler = atoi (argv[++i]);
        else if (!strcmp (argv[i], "--fail") && i + 1 < argc) {
            if (inject_parse (&inj, argv[0], argv[++i]) < 0)
                return 2;
        } else {
            fprintf (stderr,
                     "usage: blob_app [--steps N] [--items N] [--sleep MS] "
                     "[--handler-fails N] "
                     "[--fail RANK:STEP[:WHERE]]...\n");
            return 2;
        }
    }
    inject_setenv (&inj);
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &a.world_rank);
    if ((rc = elastic_manager_create (MPI_COMM_WORLD, NULL, &m, &err)) != ELASTIC_OK) {
        fprintf (stderr, "blob_app: %s\n", err.text);
        MPI_Finalize ();
        return elastic_exit_code (rc);
    }
    {
        /* a process a growth started is rank 0 of its own MPI_COMM_WORLD */
        elastic_info_t info;
        elastic_manager_info (m, &info);
        a.world_rank = info.original_rank;
    }
    a.comm = elastic_manager_comm (m);
    if (a.comm != MPI_COMM_NULL) {
        MPI_Comm_rank (a.comm, &a.rank);
        MPI_Comm_size (a.comm, &a.size);
        own_items (&a);
        for (int k = a.rank; k < a.nitems; k += a.size)
            a.mine[a.nmine++] = (struct item){k, mix (k)};
    }
    if (elastic_register_value (m, "step", &a.step, sizeof (a.step), &err) !=
            ELASTIC_OK ||
        elastic_register_blob (
            m, "items", a.mine, a.nmine * sizeof (struct item), &err) != ELASTIC_OK ||
        elastic_manager_start (m, rebuild, &a, &active, &err) != ELASTIC_OK) {
        fprintf (stderr, "blob_app: %s\n", err.text);
        rc = 1;
        goto done;
    }
    if (!active)
        goto done;
    for (;;) {
        while (a.step < steps) {
            /* the blob is current: its pointer and size are registered */
            elastic_register_blob (
                m, "items", a.mine, a.nmine * sizeof (struct item), NULL);
            if ((rc = elastic_maybe_snapshot (m, a.step, &err)) != ELASTIC_OK)
                goto fail;
            /* grows back into idle spares or new processes */
            if ((rc = elastic_maybe_reshard_up (m, a.step, rebuild, &a, NULL, &err)) !=
                ELASTIC_OK)
                goto fail;
            if (sleep_ms > 0)
                nanosleep (&(struct timespec){sleep_ms / 1000, sleep_ms % 1000 * 1000000},
                           NULL);
            if ((mrc = inject_step (&inj, a.world_rank, a.step, a.comm)) != MPI_SUCCESS)
                goto failed;
            mine = 0;
            for (int i = 0; i < a.nmine; i++) {
                a.mine[i].value = mix (a.mine[i].value ^ (uint64_t)a.mine[i].key);
                mine += a.mine[i].value;
            }
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
        for (int i = 0; i < a.nmine; i++)
            mine += mix (a.mine[i].value + (uint64_t)a.mine[i].key);
        if ((mrc = MPI_Allreduce (&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, a.comm)) ==
            MPI_SUCCESS)
            break;
        if ((rc = elastic_maybe_reshard_down (m, mrc, rebuild, &a, &err)) != ELASTIC_OK)
            goto fail;
    }
    elastic_manager_info (m, &info);
    {
        int f = a.fetched, allf = 0;
        MPI_Reduce (&f, &allf, 1, MPI_INT, MPI_SUM, 0, a.comm);
        if (a.rank == 0) {
            printf ("final world %d, events %d, blobs fetched %d, handler calls %d\n",
                    info.size,
                    info.events,
                    allf,
                    a.handler_calls);
            printf ("checksum %016llx\n", (unsigned long long)sum);
        }
    }
    goto done;
fail:
    fprintf (stderr, "blob_app: rank %d: %s\n", a.world_rank, err.text);
done:
    fflush (stdout);
    elastic_manager_destroy (m);
    free (a.mine);
    MPI_Finalize ();
    return elastic_exit_code (rc);
}
