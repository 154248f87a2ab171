/* gpu_nccl.c - the NCCL communicator over the working ranks
 *
 * elastic_nccl_enable (before start, every rank) asks for it; the working
 * ranks create it at start and every world change rebuilds it before the
 * handler runs (gpu_nccl_rebuild, from recover.c and resume.c):
 *
 *   1. each rank decides from the agreed membership (nccl_plan_decide):
 *      keep it, shrink it (the survivors, in the old order, with the
 *      identical list of old NCCL ranks to exclude) or make a new one;
 *   2. the ranks compare the plan's hash (one MPI_Allreduce): any
 *      difference, or a rank that cannot shrink, makes it a new one for all;
 *   3. shrink: ncclCommRevoke (stops the parent's work in flight), then
 *      ncclCommShrink (NCCL_SHRINK_ABORT, a copy of the list), then
 *      ncclCommAbort on the parent (never finalized or destroyed after a
 *      revoke); the ranks agree that every child is good (count, rank),
 *      else they abort the children and fall back to
 *   4. new: abort the old one (revoked first after a failure), rank 0 of
 *      the new communicator makes a unique id, MPI_Bcast, and
 *      ncclCommInitRankConfig (non-blocking, polled under a deadline).
 *
 * Every NCCL call goes through the ops table of gpu.h.  A test hook,
 * ELASTIC_TEST_NCCL_GROUP=G, builds one communicator per G consecutive
 * working ranks instead of one over all of them (a machine with one GPU
 * can hold NCCL communicators of one rank only).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>

#include "common/error.h"
#include "ft.h"
#include "gpu.h"
#include "log.h"
#include "manager.h"

int gpu_nccl_enable (struct elastic_manager *m, elastic_error_t *err)
{
    struct gpu_state *g;
    char why[512];
    const char *e;

    if (!gpu_nccl (why, sizeof (why)))
        return errcodef (err, ELASTIC_ERR_UNSUPPORTED, "elastic_nccl_enable: %s", why);
    if (m->started)
        return errcodef (err,
                         ELASTIC_ERR_STATE,
                         "elastic_nccl_enable: call it before elastic_manager_start");
    if (!(g = gpu_state_get (m)))
        return errcodef (err, ELASTIC_ERR_NOMEM, "elastic_nccl_enable: out of memory");
    g->nccl = gpu_nccl (why, sizeof (why));
    if ((e = getenv ("ELASTIC_TEST_NCCL_GROUP")) && *e) {
        char *end;
        long v = strtol (e, &end, 10);
        if (*end || v < 1 || v > 1 << 20)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "ELASTIC_TEST_NCCL_GROUP=%s is invalid (expected a number "
                             ">= 1)",
                             e);
        g->group = (int)v;
    }
    g->nccl_enabled = 1;
    return ELASTIC_OK;
}

int gpu_nccl_comm (const struct elastic_manager *m, void **comm, elastic_error_t *err)
{
    const struct gpu_state *g = m->gpu;
    char why[512];

    if ((!g || !g->nccl_enabled) && !gpu_nccl (why, sizeof (why)))
        return errcodef (err, ELASTIC_ERR_UNSUPPORTED, "elastic_nccl_comm: %s", why);
    if (!g || !g->nccl_enabled)
        return errcodef (err,
                         ELASTIC_ERR_STATE,
                         "elastic_nccl_comm: NCCL is not enabled (elastic_nccl_enable "
                         "before elastic_manager_start)");
    if (!g->comm)
        return errcodef (err,
                         ELASTIC_ERR_STATE,
                         "elastic_nccl_comm: no NCCL communicator on this rank (%s)",
                         m->myslot < 0 ? "an idle spare"
                                       : "not started, or its rebuild failed");
    *comm = g->comm;
    return ELASTIC_OK;
}

static double now_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int gpu_nccl_check (struct elastic_manager *m,
                    void *stream,
                    double timeout_s,
                    elastic_error_t *err)
{
    static const char fn[] = "elastic_nccl_check";
    struct gpu_state *g = m->gpu;
    double end = now_s () + timeout_s;
    char why[512];

    if (!g || !g->nccl_enabled || !g->comm)
        return gpu_nccl_comm (m, &(void *){NULL}, err);
    if (!g->cuda && !(g->cuda = gpu_cuda (why, sizeof (why))))
        return errcodef (err, ELASTIC_ERR_UNSUPPORTED, "%s: %s", fn, why);
    for (;;) {
        int done, a = g->nccl->async_error (g->comm, why, sizeof (why));
        if (a == 1)
            return errcodef (err, ELASTIC_ERR_PROC_FAILED, "%s: %s", fn, why);
        /* a non-blocking communicator's call may still be in progress:
         * the stream has its work only after that */
        done = a == 2 ? 0 : g->cuda->stream_query (stream, why, sizeof (why));
        if (done < 0)
            return errcodef (err, ELASTIC_ERR_IO, "%s: %s", fn, why);
        if (done)
            return ELASTIC_OK;
        if (now_s () > end)
            return errcodef (err,
                             ELASTIC_ERR_PROC_FAILED,
                             "%s: the stream's work is not done after %.3f s",
                             fn,
                             timeout_s);
        nanosleep (&(struct timespec){0, 100000}, NULL);
    }
}

int gpu_nccl_failed (struct elastic_manager *m, elastic_error_t *err)
{
    struct gpu_state *g = m->gpu;
    char why[512];

    if (!g || !g->nccl_enabled)
        return errcodef (err,
                         ELASTIC_ERR_STATE,
                         "elastic_maybe_reshard_down: ELASTIC_NCCL_ERROR without "
                         "elastic_nccl_enable");
    g->failed_here = 1;
    if (g->comm && !g->revoked) {
        /* stop this rank's work in flight on it at once */
        if (g->nccl->revoke (g->comm, why, sizeof (why)) < 0)
            el_log (EL_WARN, "nccl: %s", why);
        g->revoked = 1;
    }
    return ELASTIC_OK;
}

/* Drop the communicator: revoke it first after a failure, then abort. */
static void drop (struct gpu_state *g, int failure)
{
    char why[512];

    if (!g->comm)
        return;
    if (failure && !g->revoked && g->nccl->revoke (g->comm, why, sizeof (why)) < 0)
        el_log (EL_DEBUG, "nccl: %s", why);
    g->nccl->abort (g->comm);
    if (failure)
        el_log (EL_INFO,
                "nccl: revoked and aborted the communicator of %d ranks",
                g->nmembers);
    g->comm = NULL;
    g->revoked = 0;
}

/* My group's members (original ranks in new rank order) and my rank in
 * it. */
static int my_group (struct elastic_manager *m, int G, int *nw, int *myrank)
{
    int first = G > 0 ? m->myslot / G * G : 0;
    int last = G > 0 ? first + G : m->nwork;
    int n = 0;

    if (last > m->nwork)
        last = m->nwork;
    for (int j = first; j < last; j++)
        nw[n++] = m->slot[j];
    *myrank = m->myslot - first;
    return n;
}

/* A shrink: 0, or -1 with why (the parent is aborted either way). */
static int do_shrink (struct gpu_state *g,
                      const int *excl,
                      int nexcl,
                      int nnew,
                      int myrank,
                      char *why,
                      size_t len)
{
    int *copy = malloc ((nexcl > 0 ? nexcl : 1) * sizeof (int)), n = -1, r = -1;
    void *child = NULL;

    if (!copy) {
        snprintf (why, len, "out of memory");
        drop (g, 1);
        return -1;
    }
    memcpy (copy, excl, nexcl * sizeof (int)); /* NCCL sorts its list */
    if (!g->revoked && g->nccl->revoke (g->comm, why, len) < 0)
        el_log (EL_DEBUG, "nccl: %s", why);
    g->revoked = 1;
    if (g->nccl->shrink (g->comm, copy, nexcl, &child, why, len) < 0)
        child = NULL;
    free (copy);
    g->nccl->abort (g->comm); /* the parent: never finalized after a revoke */
    g->comm = NULL;
    g->revoked = 0;
    if (!child)
        return -1;
    if (g->nccl->count (child, &n, why, len) < 0 ||
        g->nccl->user_rank (child, &r, why, len) < 0 || n != nnew || r != myrank) {
        if (n >= 0 && r >= 0)
            snprintf (why,
                      len,
                      "the shrunk communicator has %d ranks and rank %d (expected %d and "
                      "%d)",
                      n,
                      r,
                      nnew,
                      myrank);
        g->nccl->abort (child);
        return -1;
    }
    g->comm = child;
    return 0;
}

/* A new communicator over gcomm (rank 0 makes the id): 0, or -1 with why;
 * *mpirc set on an MPI error. */
static int do_new (struct gpu_state *g,
                   MPI_Comm gcomm,
                   int nnew,
                   int myrank,
                   int *mpirc,
                   char *why,
                   size_t len)
{
    unsigned char id[GPU_NCCL_ID_BYTES + 1];

    memset (id, 0, sizeof (id));
    if (myrank == 0 && g->nccl->unique_id (id, why, len) < 0)
        id[GPU_NCCL_ID_BYTES] = 1; /* tell the others */
    if ((*mpirc = MPI_Bcast (id, sizeof (id), MPI_BYTE, 0, gcomm)) != MPI_SUCCESS)
        return -1;
    if (id[GPU_NCCL_ID_BYTES]) {
        if (myrank != 0)
            snprintf (why, len, "ncclGetUniqueId failed on the communicator's rank 0");
        return -1;
    }
    return g->nccl->init (&g->comm, nnew, id, myrank, why, len);
}

int gpu_nccl_rebuild (struct elastic_manager *m, int failure, elastic_error_t *err)
{
    struct gpu_state *g = m->gpu;
    MPI_Comm gcomm = MPI_COMM_NULL;
    int *nw = NULL, *excl = NULL, nnew, myrank, nexcl = 0, mrc, rc = ELASTIC_OK;
    int ok, allok;
    uint64_t h[2], hall[2];
    enum nccl_plan plan;
    char why[512] = "";

    if (!g || !g->nccl_enabled || m->myslot < 0)
        return ELASTIC_OK;
    failure |= g->failed_here;
    if (!(nw = malloc (m->nwork * sizeof (int))) ||
        !(excl = malloc ((g->nmembers + 1) * sizeof (int)))) {
        rc = errcodef (err, ELASTIC_ERR_NOMEM, "nccl: out of memory");
        goto out;
    }
    nnew = my_group (m, g->group, nw, &myrank);
    plan = nccl_plan_decide (g->comm ? g->members : NULL,
                             g->comm ? g->nmembers : 0,
                             nw,
                             nnew,
                             failure,
                             excl,
                             &nexcl);
    if ((mrc = MPI_Comm_split (
             m->work, g->group > 0 ? m->myslot / g->group : 0, myrank, &gcomm)) !=
        MPI_SUCCESS)
        goto mpi_error;
    /* the same plan and list everywhere, or a new communicator for all */
    h[0] = nccl_plan_hash (plan, excl, nexcl);
    h[1] = ~h[0];
    if ((mrc = MPI_Allreduce (h, hall, 2, MPI_UINT64_T, MPI_MIN, gcomm)) != MPI_SUCCESS)
        goto mpi_error;
    if (hall[0] != h[0] || hall[1] != h[1]) {
        el_log (EL_WARN, "nccl: the ranks planned differently: a new communicator");
        plan = NCCL_NEW;
    }
    g->last_fallback = 0;
    if (plan == NCCL_KEEP)
        goto done;
    if (plan == NCCL_SHRINK) {
        ok = do_shrink (g, excl, nexcl, nnew, myrank, why, sizeof (why)) == 0;
        if (!ok)
            el_log (EL_WARN, "nccl: shrink failed: %s; making a new communicator", why);
        if ((mrc = MPI_Allreduce (&ok, &allok, 1, MPI_INT, MPI_MIN, gcomm)) !=
            MPI_SUCCESS)
            goto mpi_error;
        if (allok)
            goto done;
        drop (g, 0);
        g->last_fallback = 1;
    } else
        drop (g, failure);
    ok = do_new (g, gcomm, nnew, myrank, &mrc, why, sizeof (why)) == 0;
    if (mrc != MPI_SUCCESS)
        goto mpi_error;
    if ((mrc = MPI_Allreduce (&ok, &allok, 1, MPI_INT, MPI_MIN, gcomm)) != MPI_SUCCESS)
        goto mpi_error;
    if (!allok) {
        drop (g, 0);
        rc = errcodef (err,
                       ELASTIC_ERR_IO,
                       "nccl: creating the communicator of %d ranks failed%s%s",
                       nnew,
                       ok ? " on another rank" : ": ",
                       ok ? "" : why);
        goto out;
    }
done:
    if (plan != NCCL_KEEP) {
        int *mem = realloc (g->members, nnew * sizeof (int));
        if (!mem) {
            drop (g, 0);
            rc = errcodef (err, ELASTIC_ERR_NOMEM, "nccl: out of memory");
            goto out;
        }
        memcpy (mem, nw, nnew * sizeof (int));
        g->members = mem;
        g->nmembers = nnew;
        g->rebuilds++;
    }
    g->failed_here = 0;
    g->last_plan = plan;
    g->last_nexcl = nexcl;
    el_log (EL_INFO,
            "nccl: communicator of %d ranks (rank %d): %s%s, %d excluded",
            nnew,
            myrank,
            nccl_plan_name (plan),
            g->last_fallback ? " failed, made new" : "",
            nexcl);
    goto out;
mpi_error:
    drop (g, 1);
    ft_revoke (m->work);
    rc = errcodef (err,
                   ft_is_failure (mrc) ? ELASTIC_ERR_PROC_FAILED : ELASTIC_ERR_MPI,
                   "nccl: the agreement on the communicator failed: %s",
                   ft_strerror (mrc, why, sizeof (why)));
out:
    ft_free (&gcomm);
    free (nw);
    free (excl);
    return rc;
}
