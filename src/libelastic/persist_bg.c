/* persist_bg.c - the manager's periodic L3 writes in the background, from L1
 *
 * A persist step takes its L1 snapshot as every snapshot step does; then
 * the working ranks lay the L3 file out together (l3_write_begin: the
 * descriptors compared, rank 0 creating the HDF5 objects and reserving
 * the blocks) and each rank leaves its own bytes to a thread of its own
 * (l3_bg.c) that copies them from the committed L1 copy, which nothing
 * changes until the snapshot ring comes back to it.  The thread calls no
 * MPI: the applications initialize MPI with MPI_Init (MPI_THREAD_SINGLE),
 * and collective MPI-IO on a second thread would need MPI_THREAD_MULTIPLE.
 * Every later snapshot step (persist_bg_poll) asks the ranks, with one
 * small allreduce, whether every thread finished; once all have, the file
 * is committed as l3_write commits it (one agreement, rank 0 checks,
 * renames, prunes).  A world change abandons the write: never committed,
 * the older files stay, and the recovery waits for at most one piece of
 * the thread's copy (doc/architecture.md, "Background L3").
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <mpi.h>

#include "event.h"
#include "ft.h"
#include "log.h"
#include "manager.h"
#include "preempt.h"
#include "snapshot.h"
#if HAVE_HDF5
#include "l3.h"
#include "l3_bg.h"
#include "l3_dir.h"
#include "persist_int.h"

struct persist_bg {
    struct l3_bg *b;
    int64_t step;
    int snaps;   /* snapshots since the one it reads */
    double t_fg; /* seconds the job spent laying the file out */
    struct persist_hook_ctx hook;
};

static void bg_free (struct persist_bg *j)
{
    free (j);
}

static struct l3_write_opts write_opts (struct elastic_manager *m)
{
    return (struct l3_write_opts){
        .dir = m->snapshot_dir,
        .run_id = m->run_id,
        .keep = m->cfg.snapshot_keep,
        .verify = 0,
    };
}

/* Collective: agree on every rank's outcome of j and commit; j is freed. */
static int commit (struct elastic_manager *m, struct persist_bg *j, elastic_error_t *err)
{
    struct l3_write_opts opts = write_opts (m);
    elastic_error_t e = {""};
    uint64_t bytes = 0, direct;
    double t_release, t_done, dt, t0;
    int64_t step = j->step;
    int rc;

    l3_bg_wait (j->b, L3_BG_DONE);
    rc = l3_bg_result (j->b, &bytes, &e);
    direct = l3_bg_direct (j->b);
    l3_bg_times (j->b, &t_release, &t_done);
    l3_bg_destroy (j->b);
    m->bg = NULL;
    t0 = mono_now ();
    rc = l3_write_commit (m->work, &opts, step, rc, &e);
    /* what a synchronous write would have taken (the deadline's estimate):
     * the layout, this rank's thread, the commit; not the steps between */
    dt = j->t_fg + t_done + (mono_now () - t0);
    el_log (EL_DEBUG,
            "background L3 write of step %lld: committed in %.3f s",
            (long long)step,
            mono_now () - t0);
    bg_free (j);
    if (rc == ELASTIC_OK) {
        char path[PATH_MAX];
        int64_t size = persist_committed (m, step, dt, path, sizeof (path));

        if (m->myslot == 0)
            el_log (EL_INFO,
                    "L3 snapshot of step %lld written in the background: %s (%.1f MiB; "
                    "L1 read in %.3f s, on disk in %.3f s; rank 0's %.1f MiB, %.1f with "
                    "O_DIRECT)",
                    (long long)step,
                    path,
                    size / 1048576.0,
                    t_release,
                    t_done,
                    bytes / 1048576.0,
                    direct / 1048576.0);
        persist_emit (m, "persist", step, size, dt, path, NULL);
        return ELASTIC_OK;
    }
    if (rc == ELASTIC_ERR_PROC_FAILED || rc == ELASTIC_ERR_MPI) {
        ft_revoke (m->work);
        ft_revoke (m->world);
        return errcodef (err,
                         ELASTIC_ERR_PROC_FAILED,
                         "the commit of the background L3 write of step %lld was "
                         "interrupted by a process failure: %s",
                         (long long)step,
                         e.text);
    }
    persist_failed (m, step, e.text, dt);
    return ELASTIC_OK;
}

/* Collective: 1 if every working rank's thread is done, 0 if not, -1 on a
 * process failure (revoked; err says so). */
static int all_done (struct elastic_manager *m, elastic_error_t *err)
{
    int mine = l3_bg_phase (m->bg->b) == L3_BG_DONE, all = 0, e;
    char ebuf[256];

    if ((e = MPI_Allreduce (&mine, &all, 1, MPI_INT, MPI_MIN, m->work)) != MPI_SUCCESS) {
        ft_revoke (m->work);
        ft_revoke (m->world);
        errcodef (err,
                  ELASTIC_ERR_PROC_FAILED,
                  "a process failed while the L3 write of step %lld was in the "
                  "background: %s",
                  (long long)m->bg->step,
                  ft_strerror (e, ebuf, sizeof (ebuf)));
        return -1;
    }
    return all;
}

void persist_bg_hold_l1 (struct elastic_manager *m)
{
    /* the L1 ring has snapshot_buffer_size slots: the n-th snapshot after
     * the one read overwrites it when n reaches the ring's size */
    if (m->bg && ++m->bg->snaps >= m->cfg.snapshot_buffer_size &&
        l3_bg_phase (m->bg->b) < L3_BG_FLUSHING) {
        el_log (EL_INFO,
                "the snapshot ring comes back to the L1 copy of step %lld: waiting "
                "for its background L3 write to read it",
                (long long)m->bg->step);
        l3_bg_wait (m->bg->b, L3_BG_FLUSHING);
    }
}

int persist_bg_poll (struct elastic_manager *m, int64_t step, elastic_error_t *err)
{
    int done;

    (void)step;
    if (!m->bg)
        return ELASTIC_OK;
    persist_bg_hold_l1 (m);
    if ((done = all_done (m, err)) < 0)
        return ELASTIC_ERR_PROC_FAILED;
    return done ? commit (m, m->bg, err) : ELASTIC_OK;
}

int persist_bg_drain (struct elastic_manager *m, elastic_error_t *err)
{
    if (!m->bg)
        return ELASTIC_OK;
    if (l3_bg_phase (m->bg->b) != L3_BG_DONE) {
        if (m->myslot == 0)
            el_log (EL_INFO,
                    "waiting for the background L3 write of step %lld to finish",
                    (long long)m->bg->step);
        l3_bg_wait (m->bg->b, L3_BG_DONE);
    }
    return commit (m, m->bg, err);
}

void persist_reap_wait (void)
{
    l3_reaper_wait ();
}

void persist_bg_abandon (struct elastic_manager *m)
{
    m->persist_due = -1; /* its snapshot is rolled back or discarded too */
    if (!m->bg)
        return;
    if (m->myslot == 0 || m->me == 0)
        el_log (EL_INFO,
                "the background L3 write of step %lld is abandoned (a world change): "
                "never committed; the older snapshots stay",
                (long long)m->bg->step);
    l3_bg_abandon (m->bg->b);
    bg_free (m->bg);
    m->bg = NULL;
}

/* Collective: before a new background write, the one in flight is
 * committed (1: waited for it; 2: only if every rank finished it).
 * *busy: it is still in flight (2). */
static int settle (struct elastic_manager *m, int *busy, elastic_error_t *err)
{
    int done;

    *busy = 0;
    if (!m->bg)
        return ELASTIC_OK;
    if (m->cfg.persist_background == 1)
        return persist_bg_drain (m, err);
    if ((done = all_done (m, err)) < 0)
        return ELASTIC_ERR_PROC_FAILED;
    if (done)
        return commit (m, m->bg, err);
    *busy = 1;
    return ELASTIC_OK;
}

static void skipped (struct elastic_manager *m, int64_t step)
{
    char why[96];

    snprintf (why,
              sizeof (why),
              "the background write of step %lld is still in flight",
              (long long)m->bg->step);
    if (m->myslot == 0)
        el_log (EL_WARN, "L3 snapshot of step %lld skipped: %s", (long long)step, why);
    struct l3_event_rec e = {
        .kind = "persist_skipped",
        .step = step,
        .world_size = m->nwork,
        .reason = why,
        .rank = m->me,
    };
    event_emit_l3 (m, &e, m->myslot == 0);
}

int persist_background (struct elastic_manager *m,
                        int64_t step,
                        int *written,
                        elastic_error_t *err)
{
    const struct snapmeta *sm = snapstore_meta (m->store);
    const char *image = snapstore_source (m->store, m->me, m->myslot);
    struct l3_write_opts opts = write_opts (m);
    struct persist_bg *j;
    struct l3_bg *b = NULL;
    struct l3_state st;
    elastic_error_t e = {""};
    int busy, rc, ok;
    double t0;

    *written = 0;
    /* the same answer on every rank: the snapshot of step is committed
     * everywhere or nowhere */
    ok = m->cfg.persist_background != 0 && sm->step == step && sm->n == m->nwork;
    if (!ok)
        return persist_write (m, step, NULL, written, err);
    if ((rc = settle (m, &busy, err)) != ELASTIC_OK)
        return rc;
    if (busy) {
        skipped (m, step);
        return ELASTIC_OK;
    }
    if (!(j = calloc (1, sizeof (*j))))
        errprintf (&e, "out of memory");
    t0 = mono_now ();
    /* NULL image or j: NULL descriptors (below), refused on every rank */
    persist_describe (m, j && image ? image : NULL, &st, &e);
    if (!j || !image) {
        persist_state_free (&st);
        st = (struct l3_state){NULL, 1, NULL, 1, NULL, 1};
        if (!image)
            errprintf (&e, "no L1 copy of step %lld on this rank", (long long)step);
    }
    rc = l3_write_begin (m->work, &opts, &st, step, &b, &e);
    if (st.arrays || st.values || st.blobs)
        persist_state_free (&st);
    if (rc == ELASTIC_OK) {
        j->b = b;
        j->step = step;
        j->hook = (struct persist_hook_ctx){m, step};
        if (m->hooks)
            l3_bg_set_hook (b, persist_kill_hook, &j->hook);
        j->t_fg = mono_now () - t0;
        l3_bg_start (b);
        m->bg = j;
        *written = 1;
        el_log (EL_DEBUG,
                "L3 write of step %lld in the background (%.3f s to lay it out)",
                (long long)step,
                j->t_fg);
        return ELASTIC_OK;
    }
    free (j);
    if (rc == ELASTIC_ERR_PROC_FAILED || rc == ELASTIC_ERR_MPI) {
        ft_revoke (m->work);
        ft_revoke (m->world);
        return errcodef (
            err,
            ELASTIC_ERR_PROC_FAILED,
            "the L3 write of step %lld was interrupted by a process failure: "
            "%s",
            (long long)step,
            e.text);
    }
    persist_failed (m, step, e.text, mono_now () - t0);
    return ELASTIC_OK;
}
#else
int persist_background (struct elastic_manager *m,
                        int64_t step,
                        int *written,
                        elastic_error_t *err)
{
    return persist_write (m, step, NULL, written, err);
}

int persist_bg_poll (struct elastic_manager *m, int64_t step, elastic_error_t *err)
{
    (void)m;
    (void)step;
    (void)err;
    return ELASTIC_OK;
}

void persist_bg_hold_l1 (struct elastic_manager *m)
{
    (void)m;
}

int persist_bg_drain (struct elastic_manager *m, elastic_error_t *err)
{
    (void)m;
    (void)err;
    return ELASTIC_OK;
}

void persist_reap_wait (void)
{
}

void persist_bg_abandon (struct elastic_manager *m)
{
    m->persist_due = -1;
}
#endif

int persist_start_due (struct elastic_manager *m, elastic_error_t *err)
{
    int64_t step = m->persist_due;
    int written;

    m->persist_due = -1;
    /* the same on every rank: the snapshot committed everywhere or nowhere */
    if (step < 0 || snapstore_meta (m->store)->step != step)
        return ELASTIC_OK;
    return persist_background (m, step, &written, err);
}
