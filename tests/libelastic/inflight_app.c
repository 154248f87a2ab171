/* inflight_app.c - many messages in flight on the working communicator when
 * a rank dies
 *
 * Every step each working rank sends BURST messages of BYTES bytes to each
 * of its two ring neighbours (MPI_Isend, all posted at once) and receives
 * as many from them, then waits for its sends.  A burst is larger than
 * what Open MPI's shared-memory transport holds per peer, so when a rank
 * dies the survivors' senders still have messages queued for each other:
 * they keep arriving while the survivors revoke, agree, shrink and create
 * new communicators.  Each message carries its step, the sender's working
 * rank, the world generation and its index; the receiver checks all four,
 * so a message of an older communicator delivered into a newer one is seen
 * (Open MPI aborts instead when its sender's rank is outside the new
 * communicator).
 *
 * The state is COUNT values in libelastic's block layout, each updated
 * every step from its own global index: the final checksum is the same for
 * any number of ranks and any failures on the way.
 *
 * usage: inflight_app [--steps N] [--count N] [--burst N] [--bytes N]
 *                     [--fail RANK:STEP[:WHERE]]...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <elastic.h>

#include "../../examples/inject.h"

struct app {
    elastic_manager_t *m;
    MPI_Comm comm;
    int rank, size, world_rank;
    int64_t step; /* registered value */
    uint64_t *x;  /* registered array, my block */
    uint64_t off, count;
    int burst, bytes;
    uint64_t generation;
    char *sbuf, *rbuf;
    MPI_Request *req;
    MPI_Status *st;
    long bad; /* messages that were not what the step sent */
};

struct msg {
    int64_t step;
    int32_t src;
    int32_t index;
    uint64_t generation;
};

static uint64_t mix (uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int rebuild (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    struct app *a = arg;
    elastic_info_t info;
    uint64_t *x;

    a->comm = comm;
    MPI_Comm_rank (comm, &a->rank);
    MPI_Comm_size (comm, &a->size);
    elastic_manager_info (m, &info);
    a->generation = info.generation;
    if (elastic_array_block (m, "x", &a->off, &a->count, NULL) != ELASTIC_OK ||
        !(x = malloc ((a->count > 0 ? a->count : 1) * sizeof (uint64_t))))
        return -1;
    if (elastic_array_restore (m, "x", x, a->count, NULL) != ELASTIC_OK) {
        free (x);
        return -1;
    }
    free (a->x);
    a->x = x;
    return 0;
}

/* The messages of one step; returns an MPI error code.  After an error the
 * requests still open are completed once the library has revoked the
 * communicator (wait_leftover). */
static int exchange (struct app *a)
{
    int left = (a->rank + a->size - 1) % a->size, right = (a->rank + 1) % a->size;
    int n = 0, rc = MPI_SUCCESS;
    int peers[2] = {left, right};

    if (a->size < 2)
        return MPI_SUCCESS;
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < a->burst && rc == MPI_SUCCESS; i++) {
            char *b = a->sbuf + ((size_t)p * a->burst + i) * a->bytes;
            struct msg h = {a->step, a->rank, i, a->generation};
            memcpy (b, &h, sizeof (h));
            rc = MPI_Isend (b, a->bytes, MPI_BYTE, peers[p], p, a->comm, &a->req[n]);
            if (rc != MPI_SUCCESS)
                a->req[n] = MPI_REQUEST_NULL;
            n++;
        }
    }
    for (int p = 0; p < 2 && rc == MPI_SUCCESS; p++) {
        /* tag p from peers[p] is what that neighbour sent to its other side */
        for (int i = 0; i < a->burst && rc == MPI_SUCCESS; i++) {
            struct msg h;
            rc = MPI_Recv (
                a->rbuf, a->bytes, MPI_BYTE, peers[p], 1 - p, a->comm, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                break;
            memcpy (&h, a->rbuf, sizeof (h));
            if (h.step != a->step || h.src != peers[p] || h.index != i ||
                h.generation != a->generation) {
                if (a->bad++ < 5)
                    fprintf (
                        stderr,
                        "inflight_app: rank %d: message %d from %d at step %lld: got "
                        "step %lld, src %d, index %d, generation %llu\n",
                        a->world_rank,
                        i,
                        peers[p],
                        (long long)a->step,
                        (long long)h.step,
                        h.src,
                        h.index,
                        (unsigned long long)h.generation);
            }
        }
    }
    if (rc == MPI_SUCCESS) {
        /* MPI_ERR_IN_STATUS: the first failed send says why (the others
         * are MPI_ERR_PENDING: still open) */
        if ((rc = MPI_Waitall (n, a->req, a->st)) == MPI_ERR_IN_STATUS) {
            for (int i = 0; i < n; i++)
                if (a->st[i].MPI_ERROR != MPI_SUCCESS &&
                    a->st[i].MPI_ERROR != MPI_ERR_PENDING)
                    return a->st[i].MPI_ERROR;
        }
        return rc;
    }
    for (int i = n; i < 2 * a->burst; i++)
        a->req[i] = MPI_REQUEST_NULL;
    return rc;
}

/* After a recovery: the sends of the interrupted step complete (in error:
 * their communicator was revoked) and are freed. */
static void wait_leftover (struct app *a)
{
    MPI_Waitall (2 * a->burst, a->req, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 2 * a->burst; i++)
        a->req[i] = MPI_REQUEST_NULL;
}

int main (int argc, char **argv)
{
    struct app a = {.burst = 64, .bytes = 1024};
    struct inject inj;
    elastic_error_t err;
    elastic_info_t info;
    int64_t steps = 200;
    uint64_t total = 4096, sum = 0, mine;
    int rc = 0, mrc, active;

    inject_init (&inj);
    for (int i = 1; i < argc; i++) {
        if (!strcmp (argv[i], "--steps") && i + 1 < argc)
            steps = atoll (argv[++i]);
        else if (!strcmp (argv[i], "--count") && i + 1 < argc)
            total = strtoull (argv[++i], NULL, 10);
        else if (!strcmp (argv[i], "--burst") && i + 1 < argc)
            a.burst = atoi (argv[++i]);
        else if (!strcmp (argv[i], "--bytes") && i + 1 < argc)
            a.bytes = atoi (argv[++i]);
        else if (!strcmp (argv[i], "--fail") && i + 1 < argc) {
            if (inject_parse (&inj, argv[0], argv[++i]) < 0)
                return 2;
        } else {
            fprintf (stderr,
                     "usage: inflight_app [--steps N] [--count N] [--burst N] [--bytes "
                     "N] [--fail RANK:STEP[:WHERE]]...\n");
            return 2;
        }
    }
    if (a.burst < 1 || a.bytes < (int)sizeof (struct msg) || steps < 1 || total < 1) {
        fprintf (stderr, "inflight_app: invalid arguments\n");
        return 2;
    }
    inject_setenv (&inj);
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &a.world_rank);
    if (!(a.sbuf = malloc ((size_t)2 * a.burst * a.bytes)) ||
        !(a.rbuf = malloc (a.bytes)) ||
        !(a.req = malloc (2 * a.burst * sizeof (MPI_Request))) ||
        !(a.st = malloc (2 * a.burst * sizeof (MPI_Status)))) {
        fprintf (stderr, "inflight_app: out of memory\n");
        MPI_Abort (MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < 2 * a.burst; i++)
        a.req[i] = MPI_REQUEST_NULL;
    memset (a.sbuf, 0, (size_t)2 * a.burst * a.bytes);
    if ((rc = elastic_manager_create (MPI_COMM_WORLD, NULL, &a.m, &err)) != ELASTIC_OK) {
        fprintf (stderr, "inflight_app: %s\n", err.text);
        MPI_Finalize ();
        return elastic_exit_code (rc);
    }
    a.comm = elastic_manager_comm (a.m);
    if (a.comm != MPI_COMM_NULL) {
        MPI_Comm_rank (a.comm, &a.rank);
        MPI_Comm_size (a.comm, &a.size);
        a.count = total / a.size + ((uint64_t)a.rank < total % a.size);
        a.off = (uint64_t)a.rank * (total / a.size) +
                ((uint64_t)a.rank < total % a.size ? (uint64_t)a.rank : total % a.size);
        if (!(a.x = malloc ((a.count > 0 ? a.count : 1) * sizeof (uint64_t))))
            MPI_Abort (MPI_COMM_WORLD, 1);
        for (uint64_t i = 0; i < a.count; i++)
            a.x[i] = mix (a.off + i);
    }
    if (elastic_register_value (a.m, "step", &a.step, sizeof (a.step), &err) !=
            ELASTIC_OK ||
        elastic_register_array (a.m, "x", a.x, sizeof (uint64_t), a.count, &err) !=
            ELASTIC_OK ||
        elastic_manager_start (a.m, rebuild, &a, &active, &err) != ELASTIC_OK) {
        fprintf (stderr, "inflight_app: %s\n", err.text);
        rc = 1;
        goto done;
    }
    if (!active)
        goto done;
    elastic_manager_info (a.m, &info);
    a.generation = info.generation;
    for (;;) {
        while (a.step < steps) {
            if ((rc = elastic_maybe_snapshot (a.m, a.step, &err)) != ELASTIC_OK)
                goto fail;
            if ((mrc = inject_step (&inj, a.world_rank, a.step, a.comm)) != MPI_SUCCESS ||
                (mrc = exchange (&a)) != MPI_SUCCESS) {
                rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err);
                wait_leftover (&a);
                if (rc != ELASTIC_OK)
                    goto fail;
                continue;
            }
            for (uint64_t i = 0; i < a.count; i++)
                a.x[i] = mix (a.x[i] ^ (a.off + i) ^ (uint64_t)a.step);
            a.step++;
        }
        mine = 0;
        for (uint64_t i = 0; i < a.count; i++)
            mine += mix (a.x[i] + a.off + i);
        if ((mrc = MPI_Allreduce (&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, a.comm)) ==
            MPI_SUCCESS)
            break;
        if ((rc = elastic_maybe_reshard_down (a.m, mrc, rebuild, &a, &err)) != ELASTIC_OK)
            goto fail;
    }
    {
        long bad = a.bad, allbad = 0;
        elastic_manager_info (a.m, &info);
        MPI_Reduce (&bad, &allbad, 1, MPI_LONG, MPI_SUM, 0, a.comm);
        if (a.rank == 0) {
            printf ("final world %d, events %d, bad messages %ld\n",
                    info.size,
                    info.events,
                    allbad);
            printf ("checksum %016llx\n", (unsigned long long)sum);
        }
        if (allbad)
            rc = ELASTIC_ERR_STATE;
    }
    goto done;
fail:
    fprintf (stderr, "inflight_app: rank %d: %s\n", a.world_rank, err.text);
done:
    fflush (stdout);
    elastic_manager_destroy (a.m);
    free (a.x);
    free (a.sbuf);
    free (a.rbuf);
    free (a.req);
    free (a.st);
    MPI_Finalize ();
    return elastic_exit_code (rc);
}
