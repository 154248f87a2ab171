/* resume.c - resume from an L3 snapshot at start, at any world size
 *
 * The decision is made at create from the launch (ELASTIC_RESUME,
 * SLURM_RESTART_COUNT) and the configuration.  At start the working ranks
 * open the newest snapshot of the run, check that it fits what the
 * application registered, and read each rank's block of every array in
 * the new layout (hyperslab reads) and the values, in one pass over the
 * file: l3_restore_latest verifies every checksum as the data arrives and
 * the rest after, and falls back past a damaged file (reading the older
 * one afresh).  Then the values are restored, and the resume calls the
 * handler as after a re-shard; blobs are read from the file by old rank
 * (elastic_blob_fetch).  An L1/L2 snapshot of the restored state then
 * protects it against in-place failures.  The spares learn the outcome.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <mpi.h>

#include "event.h"
#include "ft.h"
#include "gpu.h"
#include "layout.h"
#include "log.h"
#include "manager.h"
#include "registry.h"
#include "snapshot.h"
#if HAVE_HDF5
#include "l3.h"
#include "l3_dir.h"
#endif

int resume_decide (struct elastic_manager *m, elastic_error_t *err)
{
    const char *s = getenv ("ELASTIC_RESUME");
    const char *r = getenv ("SLURM_RESTART_COUNT");
    int env_resume = 0;
    long restarts = 0;
    char *end;

    if (s && *s) {
        if (!strcmp (s, "1"))
            env_resume = 1;
        else if (strcmp (s, "0") != 0)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "ELASTIC_RESUME: '%s' is invalid (expected 1 to resume from "
                             "the newest L3 snapshot, or 0)",
                             s);
    }
    if (r && *r) {
        errno = 0;
        restarts = strtol (r, &end, 10);
        if (*end != '\0' || errno != 0 || restarts < 0)
            restarts = 0; /* Slurm's, not ours to reject */
    }
    m->resume_wanted = 0;
    m->resume_why[0] = '\0';
    switch (m->cfg.resume) {
        case ELASTIC_RESUME_NEVER:
            if (env_resume || restarts > 0)
                el_log (EL_DEBUG, "resume is never: starting fresh");
            break;
        case ELASTIC_RESUME_ALWAYS:
            m->resume_wanted = 1;
            snprintf (m->resume_why, sizeof (m->resume_why), "resume always");
            break;
        default:
            m->resume_wanted = 1;
            if (m->cfg.resume_from)
                snprintf (m->resume_why, sizeof (m->resume_why), "resume_from");
            else if (env_resume)
                snprintf (m->resume_why, sizeof (m->resume_why), "ELASTIC_RESUME=1");
            else if (restarts > 0)
                snprintf (m->resume_why,
                          sizeof (m->resume_why),
                          "SLURM_RESTART_COUNT=%ld",
                          restarts);
            else
                m->resume_wanted = 0;
    }
    return ELASTIC_OK;
}

#if HAVE_HDF5
/* Working rank 0, on a fresh start: say so if the run's snapshots exist. */
static void fresh_note (struct elastic_manager *m)
{
    elastic_error_t why;
    int64_t step;

    if (m->myslot != 0)
        return;
    if (l3_dir_newest (m->snapshot_dir, m->run_id, &step, &why) == 1)
        el_log (EL_WARN,
                "'%s' holds L3 snapshots of run '%s' (newest: step %lld) from an "
                "earlier launch; this launch starts fresh (ELASTIC_RESUME=1 would "
                "continue that run) and its own L3 snapshots replace them",
                m->snapshot_dir,
                m->run_id,
                (long long)step);
}

/* Collective over work: rc agreed as the maximum (errors are positive). */
static int agree_rc (struct elastic_manager *m, int rc, int *mpirc)
{
    int all = rc;
    *mpirc = MPI_Allreduce (&rc, &all, 1, MPI_INT, MPI_MAX, m->work);
    return *mpirc == MPI_SUCCESS ? all : ELASTIC_ERR_PROC_FAILED;
}

struct resume_read {
    struct elastic_manager *m;
    char *values; /* the values read from the file (read_state) */
    int failed;   /* read_source failed for a reason not the file's */
    int rejected; /* snapshot files rejected as damaged */
};

static int read_source (struct l3_file *f, void *arg, elastic_error_t *err);

/* Collective over work: open the snapshot to resume from and read it
 * (read_source), verified in the same pass. */
static int open_source (struct elastic_manager *m,
                        struct resume_read *rr,
                        struct l3_file **f,
                        elastic_error_t *e)
{
    const char *from = m->resume_from;
    int is_dir = 0;

    if (!from)
        return l3_restore_latest (
            m->work, m->snapshot_dir, m->run_id, read_source, rr, f, &rr->rejected, e);
    if (m->myslot == 0) {
        struct stat sb;
        is_dir = stat (from, &sb) == 0 && S_ISDIR (sb.st_mode);
    }
    if (MPI_Bcast (&is_dir, 1, MPI_INT, 0, m->work) != MPI_SUCCESS) {
        return errcodef (e, ELASTIC_ERR_PROC_FAILED, "MPI_Bcast failed");
    }
    /* an explicit directory: the newest valid snapshot of any run */
    return is_dir ? l3_restore_latest (
                        m->work, from, NULL, read_source, rr, f, &rr->rejected, e)
                  : l3_restore (m->work, from, read_source, rr, f, e);
}

/* The snapshot fits the registration: every array (same element size, the
 * same global count as registered, or none registered) and value.  The
 * same answer on every rank (same file, same layout). */
static int check_fit (struct elastic_manager *m, struct l3_file *f, elastic_error_t *err)
{
    struct registry *reg = m->reg;
    int na = reg->na;

    for (int a = 0; a < na; a++) {
        size_t es;
        uint64_t gc, sum = layout_sum (m->layout + a, m->nwork, na);
        if (l3_array_info (f, reg->a[a].name, &es, &gc) != ELASTIC_OK)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "%s has no array '%s' (registered by this run)",
                             l3_path (f),
                             reg->a[a].name);
        if (es != reg->a[a].elem_size)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "array '%s': %s has elements of %zu bytes, this run "
                             "registered %zu",
                             reg->a[a].name,
                             l3_path (f),
                             es,
                             reg->a[a].elem_size);
        if (sum != 0 && sum != gc)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "array '%s': %s holds %llu elements, this run registered "
                             "%llu (a different problem size?)",
                             reg->a[a].name,
                             l3_path (f),
                             (unsigned long long)gc,
                             (unsigned long long)sum);
    }
    for (int i = 0; i < reg->nv; i++) {
        size_t size;
        if (l3_value_info (f, reg->v[i].name, &size) != ELASTIC_OK)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "%s has no value '%s' (registered by this run)",
                             l3_path (f),
                             reg->v[i].name);
        if (size != reg->v[i].size)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "value '%s': %s has %zu bytes, this run registered %zu",
                             reg->v[i].name,
                             l3_path (f),
                             size,
                             reg->v[i].size);
    }
    return ELASTIC_OK;
}

/* Collective over work: the new layout, each rank's blocks, the values
 * (into *vout, malloc'ed: registered values' bytes in order). */
static int read_state (struct elastic_manager *m,
                       struct l3_file *f,
                       char **vout,
                       elastic_error_t *err)
{
    struct registry *reg = m->reg;
    int na = reg->na, rc = ELASTIC_OK, mpirc;
    char *values = NULL, *p;
    elastic_error_t e = {""};

    registry_clear_restore (reg);
    for (int a = 0; a < na; a++) {
        uint64_t gc;
        l3_array_info (f, reg->a[a].name, NULL, &gc);
        if (layout_sum (m->layout + a, m->nwork, na) != gc)
            layout_even (gc, m->nwork, m->layout + a, na);
    }
    for (int a = 0; a < na && rc == ELASTIC_OK; a++) {
        uint64_t c = m->layout[(size_t)m->myslot * na + a];
        reg->a[a].rcount = c;
        if (reg->a[a].is_dev) {
            /* into the pinned mirror (see restore.c) */
            if (gpu_mirror_reserve (&reg->a[a], c) < 0)
                rc = ELASTIC_ERR_NOMEM;
            reg->a[a].rbuf = reg->a[a].data;
            reg->a[a].rbuf_app = 1;
        } else if (!(reg->a[a].rbuf = malloc (c > 0 ? c * reg->a[a].elem_size : 1)))
            rc = ELASTIC_ERR_NOMEM;
    }
    if (!(values = malloc (reg->vbytes > 0 ? reg->vbytes : 1)))
        rc = ELASTIC_ERR_NOMEM;
    if ((rc = agree_rc (m, rc, &mpirc)) != ELASTIC_OK) {
        errcodef (err, rc, "resume: out of memory for the restored blocks");
        goto out;
    }
    for (int a = 0; a < na && rc == ELASTIC_OK; a++) {
        uint64_t off = 0;
        for (int j = 0; j < m->myslot; j++)
            off += m->layout[(size_t)j * na + a];
        rc = l3_read_array (f, reg->a[a].name, off, reg->a[a].rcount, reg->a[a].rbuf, &e);
        if (rc != ELASTIC_OK)
            errcodef (
                err, rc, "%s%s", rc == ELASTIC_ERR_CORRUPT ? "" : "resume: ", e.text);
    }
    if (rc != ELASTIC_OK)
        goto out;
    p = values;
    for (int i = 0; i < reg->nv && rc == ELASTIC_OK; i++) {
        rc = l3_read_value (f, reg->v[i].name, p, reg->v[i].size, &e);
        p += reg->v[i].size;
    }
    if (rc != ELASTIC_OK)
        errcodef (err, rc, "%s%s", rc == ELASTIC_ERR_CORRUPT ? "" : "resume: ", e.text);
    if ((rc = agree_rc (m, rc, &mpirc)) != ELASTIC_OK) {
        if (!err || !err->text[0] || mpirc != MPI_SUCCESS)
            errcodef (err, rc, "resume: reading the values failed on another rank");
        goto out;
    }
    /* the values go into the application's variables once the whole file
     * is verified (restore) */
    free (*vout);
    *vout = values;
    values = NULL;
out:
    free (values);
    return rc;
}

/* l3_read_f of the resume: the file fits the registration, and each
 * rank's blocks and the values are read (and verified on the way).  A
 * misfit is the run's error, not the file's: ELASTIC_ERR_INVAL stops the
 * resume instead of falling back to an older file. */
static int read_source (struct l3_file *f, void *arg, elastic_error_t *err)
{
    struct resume_read *rr = arg;
    struct elastic_manager *m = rr->m;
    int rc = check_fit (m, f, err);

    if (rc == ELASTIC_OK)
        rc = read_state (m, f, &rr->values, err);
    if (rc != ELASTIC_OK)
        registry_clear_restore (m->reg);
    rr->failed = rc != ELASTIC_OK && rc != ELASTIC_ERR_CORRUPT;
    return rc;
}

/* Collective over work: the handler, retried as in a re-shard. */
static int
run_handler (struct elastic_manager *m, struct l3_file *f, elastic_error_t *err)
{
    int tries = 0, mpirc;

    m->l3_src = f;
    m->l3_src_size = l3_world_size (f);
    for (;;) {
        int hrc = 0, ok, all;
        for (int a = 0; a < m->reg->na; a++)
            m->reg->a[a].restored = 0;
        if (gpu_place_arrays (m) < 0)
            hrc = -1; /* device arrays: their placement hooks */
        m->in_handler = 1;
        if (m->handler && hrc == 0)
            hrc = m->handler (m, m->work, m->handler_arg);
        m->in_handler = 0;
        if (hrc == 0 && !mgr_all_restored (m))
            hrc = -1;
        ok = hrc == 0;
        mpirc = MPI_Allreduce (&ok, &all, 1, MPI_INT, MPI_MIN, m->work);
        if (mpirc != MPI_SUCCESS) {
            m->l3_src = NULL;
            return errcodef (err, ELASTIC_ERR_PROC_FAILED, "resume: a process failed");
        }
        if (all)
            break;
        if (++tries > m->cfg.max_reshard_retry_count) {
            m->l3_src = NULL;
            return errcodef (
                err,
                ELASTIC_ERR_STATE,
                "resume: the handler failed %d times (max_reshard_retry_count "
                "%d)",
                tries,
                m->cfg.max_reshard_retry_count);
        }
        el_log (EL_WARN, "resume: the handler failed; calling it again");
    }
    m->l3_src = NULL;
    return ELASTIC_OK;
}

/* The working ranks: resume from L3.  Returns the same code everywhere
 * (ELASTIC_ERR_PROC_FAILED: a process failed). */
static int restore (struct elastic_manager *m, elastic_error_t *err)
{
    struct l3_file *f = NULL;
    struct resume_read rr = {.m = m};
    elastic_error_t e = {""};
    double t0 = mono_now ();
    int64_t step;
    int rc, old_size;

    rc = open_source (m, &rr, &f, &e);
    if (rc != ELASTIC_OK)
        free (rr.values);
    /* resume_fresh_ok 2 (ELASTIC_RESUME_FRESH_OK=2, what the launchers
     * give a restart): fresh only when nothing was saved; a damaged
     * snapshot stops the job instead of silently discarding its work */
    if (rc == ELASTIC_ERR_NO_SNAPSHOT &&
        m->cfg.resume_fresh_ok == ELASTIC_FRESH_OK_EMPTY && rr.rejected > 0) {
        if (m->myslot == 0)
            el_log (EL_WARN,
                    "resume (%s): not starting fresh: %d snapshot file%s of this run "
                    "%s damaged (ELASTIC_RESUME_FRESH_OK=2 starts fresh only when "
                    "there is none; =1 starts fresh anyway)",
                    m->resume_why,
                    rr.rejected,
                    rr.rejected == 1 ? "" : "s",
                    rr.rejected == 1 ? "is" : "are");
    } else if (rc == ELASTIC_ERR_NO_SNAPSHOT && m->cfg.resume_fresh_ok) {
        if (m->myslot == 0)
            el_log (EL_WARN,
                    "resume (%s): %s; starting fresh (resume_fresh_ok)",
                    m->resume_why,
                    e.text);
        return ELASTIC_OK;
    }
    if (rc != ELASTIC_OK && rr.failed) /* its text says "resume" */
        return errcodef (err, rc, "%s", e.text);
    if (rc != ELASTIC_OK)
        return errcodef (err,
                         rc,
                         "resume (%s): %s%s",
                         m->resume_why,
                         e.text,
                         rc == ELASTIC_ERR_NO_SNAPSHOT
                             ? " (ELASTIC_RESUME_FRESH_OK=1 starts fresh instead)"
                             : "");
    step = l3_step (f);
    old_size = l3_world_size (f);
    /* the file is verified: its blocks are in the restore buffers */
    registry_values_load (m->reg, rr.values);
    free (rr.values);
    m->step = step;
    if ((rc = run_handler (m, f, err)) != ELASTIC_OK)
        goto out;
    free (m->resumed_from);
    free (m->persist_file);
    m->resumed_from = strdup (l3_path (f));
    m->persist_file = strdup (l3_path (f));
    m->resumed_step = step;
    m->resumed_size = old_size;
    m->persist_step = step;
out:
    registry_clear_restore (m->reg);
    if (rc == ELASTIC_ERR_PROC_FAILED)
        persist_finalize_guard (); /* the file cannot be closed */
    else
        l3_close (f);
    if (rc != ELASTIC_OK)
        return rc;
    /* protect the restored state in its new layout (L1/L2) */
    if ((rc = snapshot_take (m, step, err)) != ELASTIC_OK)
        return rc;
    if (m->myslot == 0)
        el_log (EL_INFO,
                "resumed from step %lld of %s (%s): world %d -> %d, %.3f s",
                (long long)step,
                m->resumed_from ? m->resumed_from : "?",
                m->resume_why,
                old_size,
                m->nwork,
                mono_now () - t0);
    struct l3_event_rec ev = {
        .kind = "resume",
        .step = step,
        .old_size = old_size,
        .new_size = m->nwork,
        .t = mono_now () - t0,
        .file = m->resumed_from,
        .rank = m->me,
    };
    event_emit_l3 (m, &ev, m->myslot == 0);
    return ELASTIC_OK;
}

int resume_blob_fetch (struct elastic_manager *m,
                       const char *name,
                       int n,
                       const int *old_ranks,
                       void **bufs,
                       size_t *sizes,
                       elastic_error_t *err)
{
    elastic_error_t e = {""};
    int b = registry_find_blob (m->reg, name), ok = 1, allok, rc = ELASTIC_OK, mpirc;

    for (int i = 0; i < n; i++) {
        bufs[i] = NULL;
        sizes[i] = 0;
        if (old_ranks[i] < 0 || old_ranks[i] >= m->l3_src_size)
            ok = 0;
    }
    if (b < 0)
        ok = 0;
    if (MPI_Allreduce (&ok, &allok, 1, MPI_INT, MPI_LAND, m->work) != MPI_SUCCESS)
        return errcodef (
            err, ELASTIC_ERR_PROC_FAILED, "elastic_blob_fetch: a process failed");
    if (!allok)
        return blob_fetch_refused (name, b, n, old_ranks, m->l3_src_size, err);
    for (int i = 0; i < n && rc == ELASTIC_OK; i++)
        rc = l3_read_blob (m->l3_src, name, old_ranks[i], &bufs[i], &sizes[i], &e);
    if (rc != ELASTIC_OK)
        errcodef (err, rc, "elastic_blob_fetch: %s", e.text);
    if ((rc = agree_rc (m, rc, &mpirc)) != ELASTIC_OK) {
        if (mpirc != MPI_SUCCESS)
            errcodef (err, rc, "elastic_blob_fetch: a process failed");
        else if (!err || !err->text[0])
            errcodef (
                err, rc, "elastic_blob_fetch: reading a blob failed on another rank");
        for (int i = 0; i < n; i++) {
            free (bufs[i]);
            bufs[i] = NULL;
            sizes[i] = 0;
        }
    }
    return rc;
}
#else
static void fresh_note (struct elastic_manager *m)
{
    (void)m;
}

static int restore (struct elastic_manager *m, elastic_error_t *err)
{
    return errcodef (err,
                     ELASTIC_ERR_UNSUPPORTED,
                     "resume (%s): L3 snapshots are not built in (no parallel HDF5)",
                     m->resume_why);
}

int resume_blob_fetch (struct elastic_manager *m,
                       const char *name,
                       int n,
                       const int *old_ranks,
                       void **bufs,
                       size_t *sizes,
                       elastic_error_t *err)
{
    (void)m;
    (void)name;
    (void)n;
    (void)old_ranks;
    (void)bufs;
    (void)sizes;
    return errcodef (err, ELASTIC_ERR_UNSUPPORTED, "elastic_blob_fetch: no L3");
}
#endif

int resume_run (struct elastic_manager *m, elastic_error_t *err)
{
    elastic_error_t local = {""};
    int rc = ELASTIC_OK, all, mpirc, want = m->resume_wanted, anywant;

    if (!err)
        err = &local;
    /* every rank must take the same path: the environment could differ */
    if ((mpirc = MPI_Allreduce (&want, &anywant, 1, MPI_INT, MPI_MAX, m->world)) !=
        MPI_SUCCESS)
        return errcodef (err,
                         ELASTIC_ERR_RELAUNCH,
                         "elastic_manager_start: a process failed before the start; "
                         "relaunch needed");
    if (anywant && !want) {
        m->resume_wanted = 1;
        snprintf (m->resume_why, sizeof (m->resume_why), "another rank asked");
    }
    if (m->myslot >= 0) {
        if (!m->resume_wanted)
            fresh_note (m);
        else
            rc = restore (m, err);
    }
    if (!m->resume_wanted)
        return ELASTIC_OK;
    mpirc = MPI_Allreduce (&rc, &all, 1, MPI_INT, MPI_MAX, m->world);
    if (mpirc != MPI_SUCCESS || all == ELASTIC_ERR_PROC_FAILED)
        return errcodef (err,
                         ELASTIC_ERR_RELAUNCH,
                         "elastic_manager_start: a process failed during the resume from "
                         "L3; relaunch needed");
    if (all != ELASTIC_OK && rc == ELASTIC_OK)
        errcodef (err,
                  all,
                  "elastic_manager_start: the resume from L3 failed on %s",
                  m->myslot < 0 ? "the working ranks" : "another rank");
    return all;
}
