/* persist.c - the manager's L3 level: the run id, persisting the state
 *
 * The registry's entries become l3 descriptors: values as replicated
 * values, arrays as blocks at the global offsets of the current layout
 * (m->layout, the same on every working rank), blobs per rank.  l3_write
 * does the rest (collective HDF5, atomic commit, retention).  This is the
 * synchronous write (a suspend, the deadline, ELASTIC_PERSIST_BACKGROUND=0);
 * persist_bg.c writes the periodic ones in the background.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <mpi.h>

#include "event.h"
#include "ft.h"
#include "log.h"
#include "manager.h"
#include "preempt.h"
#include "registry.h"
#include "testhook.h"
#if HAVE_HDF5
#include "l3.h"
#include "l3_dir.h"
#include "persist_int.h"
#endif

int persist_setup (struct elastic_manager *m, elastic_error_t *err)
{
    const char *id = m->cfg.run_id; /* ELASTIC_RUN_ID has set it already */
    const char *job = getenv ("SLURM_JOB_ID");

    if (!id || !*id)
        id = job && *job ? job : "default";
    m->persist_step = -1;
    m->persist_due = -1;
    m->resumed_step = -1;
    if (!(m->run_id = strdup (id)))
        return errcodef (err, ELASTIC_ERR_NOMEM, "elastic_manager_create: out of memory");
    m->cfg.run_id = m->run_id;
    return ELASTIC_OK;
}

/* MPI_COMM_SELF's attributes are deleted first thing in MPI_Finalize, the
 * newest first: this one, set after HDF5's, runs before HDF5 shuts down. */
static int guard_cb (MPI_Comm comm, int key, void *val, void *extra)
{
    int code = mgr_exit_hint ();

    (void)comm;
    (void)key;
    (void)val;
    (void)extra;
    el_log (EL_INFO,
            "MPI_Finalize after an L3 I/O interrupted by a process failure: exiting "
            "with %d before HDF5 shuts down",
            code);
    fflush (NULL);
    _exit (code);
    return MPI_SUCCESS;
}

void persist_finalize_guard (void)
{
    static int set;
    int key;

    if (set)
        return;
    if (MPI_Comm_create_keyval (MPI_COMM_NULL_COPY_FN, guard_cb, &key, NULL) ==
            MPI_SUCCESS &&
        MPI_Comm_set_attr (MPI_COMM_SELF, key, NULL) == MPI_SUCCESS)
        set = 1;
}

#if HAVE_HDF5
void persist_kill_hook (void *arg)
{
    struct persist_hook_ctx *c = arg;
    testhook_check (c->m->hooks, c->m->me, c->step, HOOK_PERSIST);
}

void persist_emit (struct elastic_manager *m,
                   const char *kind,
                   int64_t step,
                   int64_t bytes,
                   double t,
                   const char *file,
                   const char *error)
{
    struct l3_event_rec e = {
        .kind = kind,
        .step = step,
        .world_size = m->nwork,
        .bytes = bytes,
        .t = t,
        .file = file,
        .error = error,
        .rank = m->me,
    };
    event_emit_l3 (m, &e, m->myslot == 0);
}

/* This rank's block of array a in the current layout, as l3_write takes it
 * (data: the live array; persist_describe may point it elsewhere). */
static struct l3_array array_desc (const struct elastic_manager *m, int a)
{
    const struct reg_array *ra = &m->reg->a[a];
    int na = m->reg->na;
    uint64_t off = 0, all = 0;

    for (int j = 0; j < m->nwork; j++) {
        uint64_t c = m->layout[(size_t)j * na + a];
        if (j < m->myslot)
            off += c;
        all += c;
    }
    return (struct l3_array){
        .name = ra->name,
        .elem_size = ra->elem_size,
        .local_count = ra->count,
        .global_offset = off,
        .global_count = all,
        .data = ra->data,
        .type = ra->type,
    };
}

void persist_describe (const struct elastic_manager *m,
                       const char *image,
                       struct l3_state *st,
                       elastic_error_t *e)
{
    const struct registry *reg = m->reg;
    struct l3_array *arrays = calloc (reg->na > 0 ? reg->na : 1, sizeof (*arrays));
    struct l3_value *values = calloc (reg->nv > 0 ? reg->nv : 1, sizeof (*values));
    struct l3_blob *blobs = calloc (reg->nb > 0 ? reg->nb : 1, sizeof (*blobs));
    struct reg_item it;
    size_t at = 0; /* it's offset in the serialized image */

    if (!arrays || !values || !blobs) {
        errprintf (e, "out of memory");
        free (arrays);
        free (values);
        free (blobs);
        *st = (struct l3_state){NULL, 1, NULL, 1, NULL, 1};
        return;
    }
    REG_FOREACH (reg, it)
    {
        if (image)
            it.data = (void *)(image + at);
        at += it.bytes;
        switch (it.kind) {
            case REG_VALUE:
                values[it.index] = (struct l3_value){
                    .name = it.name,
                    .size = it.bytes,
                    .data = it.data,
                    .type = it.type,
                };
                break;
            case REG_ARRAY:
                arrays[it.index] = array_desc (m, it.index);
                arrays[it.index].data = it.data;
                break;
            case REG_BLOB:
                blobs[it.index] = (struct l3_blob){
                    .name = it.name,
                    .size = it.bytes,
                    .data = it.data,
                };
                break;
        }
    }
    *st = (struct l3_state){arrays, reg->na, values, reg->nv, blobs, reg->nb};
}

void persist_state_free (struct l3_state *st)
{
    free ((void *)st->arrays);
    free ((void *)st->values);
    free ((void *)st->blobs);
}

int persist_write (struct elastic_manager *m,
                   int64_t step,
                   const char *why,
                   int *written,
                   elastic_error_t *err)
{
    struct persist_hook_ctx ctx = {m, step};
    struct l3_write_opts opts = {
        .dir = m->snapshot_dir,
        .run_id = m->run_id,
        .keep = m->cfg.snapshot_keep,
        .verify = 0,
        .test_hook = m->hooks ? persist_kill_hook : NULL,
        .test_arg = &ctx,
    };
    struct l3_state st;
    elastic_error_t e = {""};
    int rc;
    double t0, dt;

    *written = 0;
    /* at most one write: one in the background finishes first */
    if ((rc = persist_bg_drain (m, err)) == ELASTIC_ERR_PROC_FAILED)
        return rc;
    persist_describe (m, NULL, &st, &e);
    t0 = mono_now ();
    rc = l3_write (m->work, &opts, &st, step, &e);
    dt = mono_now () - t0;
    persist_state_free (&st);
    if (rc == ELASTIC_OK) {
        char path[PATH_MAX];
        int64_t bytes = persist_committed (m, step, dt, path, sizeof (path));

        *written = 1;
        if (m->myslot == 0)
            el_log (EL_INFO,
                    "L3 snapshot of step %lld written%s%s%s: %s (%.1f MiB, %.3f s)",
                    (long long)step,
                    why ? " (" : "",
                    why ? why : "",
                    why ? ")" : "",
                    path,
                    bytes / 1048576.0,
                    dt);
        persist_emit (m, "persist", step, bytes, dt, path, NULL);
        return ELASTIC_OK;
    }
    if (rc == ELASTIC_ERR_PROC_FAILED) {
        persist_finalize_guard ();
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
    persist_failed (m, step, e.text, dt);
    return ELASTIC_OK;
}

int64_t persist_committed (
    struct elastic_manager *m, int64_t step, double t, char *path, size_t size)
{
    char name[64];
    struct stat sb;
    int64_t bytes = -1;

    l3_snap_name (name, sizeof (name), step, 0);
    snprintf (path, size, "%s/%s", m->snapshot_dir, name);
    if (m->myslot == 0 && stat (path, &sb) == 0)
        bytes = (int64_t)sb.st_size;
    free (m->persist_file);
    m->persist_file = strdup (path);
    m->persist_step = step;
    preempt_l3_time (m->pre, t);
    return bytes;
}

void persist_failed (struct elastic_manager *m, int64_t step, const char *why, double t)
{
    if (m->myslot == 0) {
        if (m->persist_step >= 0)
            el_log (EL_WARN,
                    "L3 snapshot of step %lld not written: %s; the older snapshots are "
                    "intact (newest: step %lld); continuing",
                    (long long)step,
                    why,
                    (long long)m->persist_step);
        else
            el_log (EL_WARN,
                    "L3 snapshot of step %lld not written: %s; older snapshots are "
                    "intact; continuing",
                    (long long)step,
                    why);
    }
    persist_emit (m, "persist_failed", step, -1, t, NULL, why);
}
#else
int persist_write (struct elastic_manager *m,
                   int64_t step,
                   const char *why,
                   int *written,
                   elastic_error_t *err)
{
    (void)why;
    (void)err;
    *written = 0;
    if (!m->persist_warned && m->myslot == 0)
        el_log (EL_WARN,
                "L3 snapshots are not built in (no parallel HDF5): step %lld not "
                "persisted",
                (long long)step);
    m->persist_warned = 1;
    return ELASTIC_OK;
}
#endif
