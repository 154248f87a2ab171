/* manager.c - the elastic manager: creation, registration, the maybe_* calls
 *
 * The heavy lifting is elsewhere: snapshot.c (L1/L2), recover.c (world
 * events), restore.c (re-sharding).  This file holds the public entry
 * points, the spares' waiting loop and the end of the job.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>

#include "event.h"
#include "ft.h"
#include "gpu.h"
#include "grow.h"
#include "layout.h"
#include "log.h"
#include "initreport.h"
#include "manager.h"
#include "diff.h"
#include "preempt.h"
#include "recwatch.h"
#include "registry.h"
#include "retire.h"
#include "snapshot.h"
#include "common/heartbeat.h"
#include "testhook.h"

/* How long an idle spare sleeps between looks at its wake-up request. */
#define SPARE_POLL_NS 10000000L

int mgr_slot_of (const struct elastic_manager *m, int r)
{
    for (int j = 0; j < m->nwork; j++)
        if (m->slot[j] == r)
            return j;
    return -1;
}

int mgr_gather_layout (struct elastic_manager *m)
{
    int na = m->reg->na, rc;
    uint64_t *row;

    if (na == 0 || m->work == MPI_COMM_NULL)
        return MPI_SUCCESS;
    if (!(row = malloc (na * sizeof (uint64_t))))
        return MPI_ERR_NO_MEM;
    for (int a = 0; a < na; a++)
        row[a] = m->reg->a[a].count;
    rc = MPI_Allgather (row, na, MPI_UINT64_T, m->layout, na, MPI_UINT64_T, m->work);
    free (row);
    return rc;
}

static int exit_hint;

int mgr_exit_hint (void)
{
    return elastic_exit_code (exit_hint);
}

void elastic_manager_destroy (elastic_manager_t *m)
{
    int saved = errno;

    if (!m)
        return;
    exit_hint = m->suspended ? ELASTIC_SUSPENDED : m->fatal_rc;
    if (m->started && !m->finished && m->myslot >= 0) {
        elastic_error_t e;
        /* a snapshot in flight completes first (every working rank is here) */
        if (snapshot_complete (m, &e) == ELASTIC_OK)
            persist_start_due (m, &e);
        persist_bg_drain (m, &e); /* an L3 write in the background commits */
        /* the end of the job: wake the idle spares and agree with them, so
         * that every live process leaves together */
        if (ft_available ()) {
            enum event_outcome outcome;
            event_run (m, WHY_DONE, NULL, NULL, &outcome, &e);
        } else if (m->myslot == 0) {
            int done = 0;
            for (int i = 0; i < m->nspare; i++)
                MPI_Send (&done, 1, MPI_INT, m->spare[i], TAG_WAKE, m->world);
        }
        /* the job's own account of its end, for a launcher whose exit code
         * can say otherwise (mpirun counts a new process of a growth that
         * died, elastic-mpirun reads this) */
        if (m->myslot == 0 && m->fatal_rc == ELASTIC_OK && !m->suspended) {
            struct l3_event_rec c = {
                .kind = "completed",
                .step = m->step,
                .world_size = m->nwork,
                .rank = m->me,
            };
            char line[512];
            int n = event_format_l3 (&c, line, sizeof (line) - 1);
            if (n > 0)
                event_append (m, line, n); /* the log only: no world change */
        }
    }
    /* the work is done: what happens to this process from here on (a
     * signal in MPI_Finalize, the L3 guard's exit) ends a finished rank */
    if (m->started && exit_hint == ELASTIC_OK) {
        elastic_progress_end ();
        testhook_arm_finalize (m->hooks, m->me, m->step);
    }
    ft_free (&m->work);
    ft_free (&m->world);
    /* the job is over: no communicator of the library is created again */
    retired_destroy (m->retired);
    m->retired = NULL;
    if (m->started && ft_available ())
        ft_skip_finalize_fence ();
    if (m->orig_group != MPI_GROUP_NULL && m->orig_group != 0)
        MPI_Group_free (&m->orig_group);
    persist_bg_abandon (m); /* one left (an error ended the job): never committed */
    persist_reap_wait ();   /* retention's unlinks in the background */
    if (m->gpu && m->gpu->staged) {
        char why[256];
        gpu_stage_wait (m, why, sizeof (why)); /* before the mirrors go */
    }
    registry_destroy (m->reg);
    gpu_state_destroy (m->gpu);
    snapstore_destroy (m->store);
    testhook_destroy (m->hooks);
    recwatch_destroy (m->watch);
    preempt_destroy (m->pre);
    free (m->run_id);
    free (m->resume_from);
    free (m->signals);
    free (m->persist_file);
    free (m->resumed_from);
    free (m->slot);
    free (m->spare);
    free (m->buddy);
    free (m->layout);
    grow_release (m);
    free (m->snapshot_dir);
    free (m->event_log);
    free (m);
    errno = saved;
}

/* An MPI call of elastic_manager_create failed: a process failure (the
 * manager is not made yet, nothing to recover from) asks for a relaunch. */
static int create_mpi_error (int mrc, const char *call, elastic_error_t *err)
{
    if (ft_is_failure (mrc))
        return errcodef (err,
                         ELASTIC_ERR_RELAUNCH,
                         "elastic_manager_create: a process failed in %s, before the "
                         "manager was made (nothing to recover from): relaunch",
                         call);
    return errcodef (err, ELASTIC_ERR_MPI, "elastic_manager_create: %s failed", call);
}

static int create (MPI_Comm comm,
                   const elastic_config_t *cfg,
                   elastic_manager_t **mp,
                   elastic_error_t *err);

int elastic_manager_create (MPI_Comm comm,
                            const elastic_config_t *cfg,
                            elastic_manager_t **mp,
                            elastic_error_t *err)
{
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    int initialized = 0, rc;
    elastic_error_t local;

    if (!err)
        err = &local;
    err->text[0] = '\0';
    if (!mp)
        return errcodef (err, ELASTIC_ERR_INVAL, "elastic_manager_create: mp is NULL");
    *mp = NULL;
    MPI_Initialized (&initialized);
    if (!initialized)
        return errcodef (
            err, ELASTIC_ERR_STATE, "elastic_manager_create: MPI is not initialized");
    initreport_mpi_ready ();
    if (comm == MPI_COMM_NULL)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "elastic_manager_create: comm is MPI_COMM_NULL");
    /* comm returns errors while the manager is made: with the default
     * MPI_ERRORS_ARE_FATAL a process failing now (a rank killed right after
     * MPI_Init) made the others MPI_Abort with MPI_ERR_PROC_FAILED, 75,
     * which a launcher reads as "suspended" (the t9002 campaign's stop
     * case); they now return ELASTIC_ERR_RELAUNCH */
    MPI_Comm_get_errhandler (comm, &eh);
    MPI_Comm_set_errhandler (comm, MPI_ERRORS_RETURN);
    /* a rank that writes to a dead peer over tcp must get an error, not die
     * of SIGPIPE with it (t1023 beyond, 1 run in 5 here: rank 3 killed, its
     * neighbour and L2 buddy rank 4, a process PRRTE spawned, died with it
     * -- mpirun's exit 141, 128 + SIGPIPE -- and the job could not
     * recover); elastic-exec's ranks start with it ignored, PRRTE's do not */
    {
        struct sigaction sa;
        if (sigaction (SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
            signal (SIGPIPE, SIG_IGN);
    }
    rc = create (comm, cfg, mp, err);
    MPI_Comm_set_errhandler (comm, eh);
    MPI_Errhandler_free (&eh);
    return rc;
}

static int create (MPI_Comm comm,
                   const elastic_config_t *cfg,
                   elastic_manager_t **mp,
                   elastic_error_t *err)
{
    struct elastic_manager *m = NULL;
    int n, rank, rc, bad[2], anybad[2], child, mrc;

    MPI_Comm_size (comm, &n);
    MPI_Comm_rank (comm, &rank);
    el_log_set_rank (rank);
    if (!(m = calloc (1, sizeof (*m))))
        return errcodef (err, ELASTIC_ERR_NOMEM, "elastic_manager_create: out of memory");
    m->orig_group = MPI_GROUP_NULL;
    m->world = MPI_COMM_NULL;
    m->work = MPI_COMM_NULL;
    if (cfg)
        m->cfg = *cfg;
    else
        elastic_config_init (&m->cfg);
    /* a process a growth started joins the running job (grow.c) */
    child = grow_is_child ();
    rc = elastic_config_from_env (&m->cfg, err);
    if (rc == ELASTIC_OK)
        rc = elastic_config_validate (&m->cfg, child ? 0 : n, err);
    if (rc == ELASTIC_OK)
        rc = testhook_create (getenv ("ELASTIC_TEST_KILL"), &m->hooks, err);
    if (rc == ELASTIC_OK)
        rc = recwatch_create (m, &m->watch, err);
    if (rc == ELASTIC_OK && !child)
        rc = resume_decide (m, err);
    /* every rank must fail together, or the others would wait for it; and
     * every one must have a launcher that reports room to grow, or none
     * agrees on it */
    if (rc == ELASTIC_OK)
        testhook_check (m->hooks, rank, 0, HOOK_CREATE);
    bad[0] = rc;
    bad[1] = !grow_reported ();
    if ((mrc = MPI_Allreduce (bad, anybad, 2, MPI_INT, MPI_MAX, comm)) != MPI_SUCCESS) {
        rc = create_mpi_error (mrc, "MPI_Allreduce", err);
        goto error;
    }
    if (rc == ELASTIC_OK && anybad[0] != ELASTIC_OK)
        rc = errcodef (err,
                       anybad[0],
                       "elastic_manager_create: invalid configuration on another rank");
    if (rc != ELASTIC_OK) {
        mgr_set_agreed_error (rc, rank == 0);
        goto error;
    }
    /* a process a growth started: merge with the working ranks and take
     * the job's settings, before anything is made of them */
    if (child && (rc = grow_join (m, comm, err)) != ELASTIC_OK)
        goto error;
    rc = ELASTIC_ERR_NOMEM;
    if (!(m->snapshot_dir = strdup (m->cfg.snapshot_dir)) ||
        (m->cfg.event_log && !(m->event_log = strdup (m->cfg.event_log))))
        goto nomem;
    if ((m->cfg.resume_from && !(m->resume_from = strdup (m->cfg.resume_from))) ||
        !(m->signals = strdup (m->cfg.signals)))
        goto nomem;
    m->cfg.snapshot_dir = m->snapshot_dir;
    m->cfg.event_log = m->event_log;
    m->cfg.resume_from = m->resume_from;
    m->cfg.signals = m->signals;
    if ((rc = persist_setup (m, err)) != ELASTIC_OK ||
        (rc = preempt_create (&m->cfg, &m->pre, err)) != ELASTIC_OK)
        goto error;
    /* (a joining process has them, sized by grow_join) */
    if ((!m->slot && !(m->slot = calloc (n, sizeof (int)))) ||
        (!m->spare && !(m->spare = calloc (n, sizeof (int)))) ||
        (!m->buddy && !(m->buddy = calloc (n, sizeof (int)))) ||
        !(m->reg = registry_create ()) || !(m->retired = retired_create ()) ||
        !(m->store = snapstore_create (m->cfg.snapshot_buffer_size)))
        goto nomem;
    preempt_offer (m->pre,
                   child ? m->join_offer
                         : !anybad[1] && m->cfg.grow_policy != ELASTIC_GROW_NEVER);
    if (child) {
        m->step = -1;
        m->event_step = -1;
        el_log (EL_INFO,
                "joined the running job as rank %d (of %d so far): waiting to be "
                "taken in",
                m->me,
                m->norig);
        *mp = m;
        return ELASTIC_OK;
    }
    if ((mrc = MPI_Comm_dup (comm, &m->world)) != MPI_SUCCESS) {
        m->world = MPI_COMM_NULL;
        rc = create_mpi_error (mrc, "MPI_Comm_dup", err);
        goto error;
    }
    MPI_Comm_set_errhandler (m->world, MPI_ERRORS_RETURN);
    MPI_Comm_group (m->world, &m->orig_group);
    m->norig = n;
    m->me = rank;
    m->orig_nwork = m->nwork = n - m->cfg.spare_ranks;
    for (int j = 0; j < m->nwork; j++)
        m->slot[j] = j;
    m->nspare = m->cfg.spare_ranks;
    for (int i = 0; i < m->nspare; i++)
        m->spare[i] = m->nwork + i;
    m->myslot = rank < m->nwork ? rank : -1;
    m->step = -1;
    m->event_step = -1;
    if ((mrc = MPI_Comm_split (
             m->world, m->myslot >= 0 ? 0 : MPI_UNDEFINED, rank, &m->work)) !=
        MPI_SUCCESS) {
        m->work = MPI_COMM_NULL;
        rc = create_mpi_error (mrc, "MPI_Comm_split", err);
        goto error;
    }
    /* one outcome on every live process: the split may have succeeded
     * here and failed elsewhere (ULFM's collectives need not agree) */
    if (ft_available ()) {
        int flag = 1;
        if ((mrc = ft_agree (m->world, &flag)) != MPI_SUCCESS || !flag) {
            rc = create_mpi_error (mrc != MPI_SUCCESS ? mrc : ft_revoked_code (),
                                   "the agreement that ends it",
                                   err);
            goto error;
        }
    }
    if (m->work != MPI_COMM_NULL)
        MPI_Comm_set_errhandler (m->work, MPI_ERRORS_RETURN);
    if (!ft_available () && rank == 0)
        el_log (EL_WARN,
                "%s: relaunch-only mode (a failure ends the job with exit code %d)%s",
                ft_why_unavailable (),
                ELASTIC_EXIT_RELAUNCH,
                m->nspare > 0 ? "; spare ranks stay idle" : "");
    el_log (EL_DEBUG,
            "manager: %d ranks, %d working, %d spares, snapshot every %d steps",
            n,
            m->nwork,
            m->nspare,
            m->cfg.snapshot_period);
    *mp = m;
    return ELASTIC_OK;
nomem:
    rc = errcodef (err, ELASTIC_ERR_NOMEM, "elastic_manager_create: out of memory");
error:
    elastic_manager_destroy (m);
    return rc;
}

static int check_registering (elastic_manager_t *m, elastic_error_t *err)
{
    if (!m)
        return errcodef (err, ELASTIC_ERR_INVAL, "manager is NULL");
    return ELASTIC_OK;
}

int elastic_register_value (
    elastic_manager_t *m, const char *name, void *data, size_t size, elastic_error_t *err)
{
    int rc = check_registering (m, err);
    return rc ? rc : registry_add_value (m->reg, name, data, size, err);
}

int elastic_register_array (elastic_manager_t *m,
                            const char *name,
                            void *data,
                            size_t elem_size,
                            uint64_t count,
                            elastic_error_t *err)
{
    int rc = check_registering (m, err);
    return rc ? rc : registry_add_array (m->reg, name, data, elem_size, count, err);
}

int elastic_register_device_array (elastic_manager_t *m,
                                   const char *name,
                                   void *data,
                                   size_t elem_size,
                                   uint64_t count,
                                   elastic_error_t *err)
{
    if (!m)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "elastic_register_device_array: manager is NULL");
    return gpu_register_array (m, name, data, elem_size, count, err);
}

int elastic_device_set_stream (elastic_manager_t *m, void *stream, elastic_error_t *err)
{
    if (!m)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "elastic_device_set_stream: manager is NULL");
    return gpu_set_stream (m, stream, err);
}

int elastic_nccl_enable (elastic_manager_t *m, elastic_error_t *err)
{
    if (!m)
        return errcodef (err, ELASTIC_ERR_INVAL, "elastic_nccl_enable: manager is NULL");
    return gpu_nccl_enable (m, err);
}

int elastic_nccl_comm (const elastic_manager_t *m,
                       struct ncclComm **comm,
                       elastic_error_t *err)
{
    void *c = NULL;
    int rc;

    if (!m || !comm)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "elastic_nccl_comm: %s is NULL",
                         !m ? "manager" : "comm");
    *comm = NULL;
    if ((rc = gpu_nccl_comm (m, &c, err)) == ELASTIC_OK)
        *comm = c;
    return rc;
}

int elastic_nccl_check (elastic_manager_t *m,
                        void *stream,
                        double timeout_s,
                        elastic_error_t *err)
{
    if (!m)
        return errcodef (err, ELASTIC_ERR_INVAL, "elastic_nccl_check: manager is NULL");
    if (!(timeout_s >= 0))
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "elastic_nccl_check: timeout_s %g is invalid (expected >= 0)",
                         timeout_s);
    return gpu_nccl_check (m, stream, timeout_s, err);
}

int elastic_register_blob (elastic_manager_t *m,
                           const char *name,
                           const void *data,
                           size_t size,
                           elastic_error_t *err)
{
    int rc = check_registering (m, err);
    return rc ? rc : registry_set_blob (m->reg, name, data, size, err);
}

int elastic_set_type (elastic_manager_t *m,
                      const char *name,
                      int type,
                      elastic_error_t *err)
{
    int rc = check_registering (m, err);
    return rc ? rc : registry_set_type (m->reg, name, type, err);
}

/* An idle spare: sleep until a world event needs it (the revoke of the
 * world completes the receive posted here with MPIX_ERR_REVOKED), or until
 * the job ends. */
static int spare_wait (elastic_manager_t *m, int *active, elastic_error_t *err)
{
    struct timespec nap = {0, SPARE_POLL_NS};
    enum event_outcome outcome;
    char ebuf[256];
    int rc;

    for (;;) {
        MPI_Request req = MPI_REQUEST_NULL;
        int msg = -1, flag = 0, wake = 0;

        rc = MPI_Irecv (&msg, 1, MPI_INT, MPI_ANY_SOURCE, TAG_WAKE, m->world, &req);
        if (rc != MPI_SUCCESS) {
            if (!ft_is_failure (rc))
                return errcodef (err,
                                 ELASTIC_ERR_MPI,
                                 "spare: %s",
                                 ft_strerror (rc, ebuf, sizeof (ebuf)));
            wake = 1;
        }
        while (!wake) {
            rc = MPI_Test (&req, &flag, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS && flag) {
                /* relaunch-only mode: the end of the job */
                m->finished = 1;
                *active = 0;
                return ELASTIC_OK;
            }
            if (rc != MPI_SUCCESS) {
                if (ft_is_proc_failed (rc)) {
                    /* a death alone does not concern a spare: the workers
                     * revoke the world when they need it */
                    ft_ack (m->world);
                    if (req == MPI_REQUEST_NULL)
                        break;
                    continue;
                }
                if (ft_is_revoked (rc)) {
                    wake = 1;
                    break;
                }
                if (req != MPI_REQUEST_NULL)
                    MPI_Request_free (&req);
                return errcodef (err,
                                 ELASTIC_ERR_MPI,
                                 "spare: %s",
                                 ft_strerror (rc, ebuf, sizeof (ebuf)));
            }
            nanosleep (&nap, NULL);
        }
        if (req != MPI_REQUEST_NULL) {
            MPI_Cancel (&req);
            MPI_Request_free (&req);
        }
        if (!wake)
            continue;
        if ((rc = event_run (m, WHY_SPARE, m->handler, m->handler_arg, &outcome, err)) !=
            ELASTIC_OK) {
            m->fatal_rc = rc;
            return rc;
        }
        if (outcome == EV_WORKING) {
            *active = 1;
            return ELASTIC_OK;
        }
        if (outcome == EV_DONE) {
            *active = 0;
            return ELASTIC_OK;
        }
    }
}

int elastic_manager_start (elastic_manager_t *m,
                           elastic_handler_f handler,
                           void *arg,
                           int *active,
                           elastic_error_t *err)
{
    uint64_t sig[2], res[2];
    int rc;
    char ebuf[256];

    if (!m || !active)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "elastic_manager_start: invalid arguments");
    *active = 0;
    if (m->started)
        return errcodef (
            err, ELASTIC_ERR_STATE, "elastic_manager_start: already started");
    m->handler = handler;
    m->handler_arg = arg;
    m->reg->frozen = 1;
    if (!(m->layout = calloc ((size_t)m->norig * (m->reg->na > 0 ? m->reg->na : 1),
                              sizeof (uint64_t))))
        return errcodef (err, ELASTIC_ERR_NOMEM, "elastic_manager_start: out of memory");
    if (m->joined) {
        /* started by a growth: the working ranks wake it in their growth
         * event, as they wake an idle spare */
        grow_join_check (m);
        m->started = 1;
        m->t_progress = mono_now ();
        return spare_wait (m, active, err);
    }
    /* same registrations everywhere: compare min and max of a signature */
    sig[0] = registry_signature (m->reg);
    sig[1] = ~sig[0];
    if ((rc = MPI_Allreduce (sig, res, 2, MPI_UINT64_T, MPI_MIN, m->world)) !=
        MPI_SUCCESS)
        goto mpi_error;
    if (res[0] != sig[0] || res[1] != sig[1]) {
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "elastic_manager_start: ranks registered different state (every rank, "
            "spares included, must register the same names and sizes in the same "
            "order)");
    }
    if ((rc = mgr_gather_layout (m)) != MPI_SUCCESS)
        goto mpi_error;
    m->started = 1;
    m->t_progress = mono_now ();
    /* the NCCL communicator of the working ranks (elastic_nccl_enable),
     * before a resume's handler.  Not fatal: the spares are waiting for
     * the resume's outcome; elastic_nccl_comm says why it is missing and
     * the next world change tries again */
    if (m->gpu && m->gpu->nccl_enabled && m->myslot >= 0) {
        elastic_error_t e = {""};
        if (gpu_nccl_rebuild (m, 0, &e) != ELASTIC_OK)
            el_log (EL_WARN, "%s", e.text);
    }
    if ((rc = resume_run (m, err)) != ELASTIC_OK) {
        /* every rank has the same result: the job ends here */
        m->finished = 1;
        m->fatal_rc = rc;
        if (rc != ELASTIC_ERR_RELAUNCH)
            mgr_set_agreed_error (rc, m->me == 0);
        if (m->myslot == 0 || (m->me == 0 && rc != ELASTIC_ERR_RELAUNCH))
            el_log (EL_ERROR, "%s", err ? err->text : elastic_strerror (rc));
        return rc;
    }
    if (m->myslot >= 0) {
        *active = 1;
        return ELASTIC_OK;
    }
    return spare_wait (m, active, err);
mpi_error:
    if (ft_is_failure (rc))
        return errcodef (
            err,
            ELASTIC_ERR_RELAUNCH,
            "elastic_manager_start: a process failed before the first snapshot: %s; "
            "relaunch needed",
            ft_strerror (rc, ebuf, sizeof (ebuf)));
    return errcodef (err,
                     ELASTIC_ERR_MPI,
                     "elastic_manager_start: %s",
                     ft_strerror (rc, ebuf, sizeof (ebuf)));
}

MPI_Comm elastic_manager_comm (const elastic_manager_t *m)
{
    return m ? m->work : MPI_COMM_NULL;
}

int elastic_manager_info (const elastic_manager_t *m, elastic_info_t *info)
{
    const struct snapmeta *sm;

    if (!m || !info)
        return ELASTIC_ERR_INVAL;
    sm = snapstore_meta (m->store);
    info->rank = m->myslot;
    info->size = m->nwork;
    info->is_spare = m->myslot < 0;
    info->original_rank = m->me;
    info->original_size = m->orig_nwork;
    info->idle_spares = m->nspare;
    info->events = m->events;
    info->generation = m->generation;
    info->snapshot_step = sm->step;
    info->old_size = m->l3_src ? m->l3_src_size : sm->n;
    info->persist_step = m->persist_step;
    info->resumed_step = m->resumed_step;
    info->resumed_size = m->resumed_size;
    info->resumed_from = m->resumed_from;
    return ELASTIC_OK;
}

void elastic_manager_set_event_callback (elastic_manager_t *m,
                                         elastic_event_f cb,
                                         void *arg)
{
    if (m) {
        m->event_cb = cb;
        m->event_arg = arg;
    }
}

static int check_working (elastic_manager_t *m, const char *fn, elastic_error_t *err)
{
    if (!m)
        return errcodef (err, ELASTIC_ERR_INVAL, "%s: manager is NULL", fn);
    if (m->finished)
        return errcodef (
            err,
            m->fatal_rc ? m->fatal_rc : ELASTIC_ERR_STATE,
            "%s: the manager has ended (after a final error or the end of the job)",
            fn);
    if (!m->started)
        return errcodef (
            err, ELASTIC_ERR_STATE, "%s: call elastic_manager_start first", fn);
    if (m->suspended)
        return errcodef (err, ELASTIC_SUSPENDED, "%s", m->suspend_text);
    if (m->myslot < 0)
        return errcodef (err, ELASTIC_ERR_STATE, "%s: not a working rank", fn);
    return ELASTIC_OK;
}

int mgr_recover_inside (elastic_manager_t *m, elastic_error_t *err)
{
    enum event_outcome outcome;
    int rc = event_run (m, WHY_FAILURE, m->handler, m->handler_arg, &outcome, err);
    if (rc != ELASTIC_OK)
        m->fatal_rc = rc;
    return rc;
}

/* Suspend at step: the L1/L2 snapshot was taken (or failed without a
 * process failure); write L3 and answer ELASTIC_SUSPENDED. */
static int
suspend (elastic_manager_t *m, int64_t step, const char *why, elastic_error_t *err)
{
    int written = 0, rc;

    if (m->persist_step != step) {
        rc = persist_write (m, step, why, &written, err);
        if (rc == ELASTIC_ERR_PROC_FAILED)
            return rc;
    } else
        written = 1; /* this step is in L3 already */
    preempt_clear (m->pre);
    m->suspended = 1;
    if (written)
        snprintf (m->suspend_text,
                  sizeof (m->suspend_text),
                  "suspended at step %lld (%s) to %s: exit with ELASTIC_EXIT_SUSPENDED "
                  "and run again to resume",
                  (long long)step,
                  why,
                  m->persist_file ? m->persist_file : "L3");
    else
        snprintf (m->suspend_text,
                  sizeof (m->suspend_text),
                  "suspended at step %lld (%s) without an L3 snapshot of it (the write "
                  "failed): a resume starts from step %lld",
                  (long long)step,
                  why,
                  (long long)m->persist_step);
    if (m->myslot == 0)
        el_log (written ? EL_INFO : EL_WARN, "%s", m->suspend_text);
    struct l3_event_rec e = {
        .kind = "suspend",
        .step = step,
        .world_size = m->nwork,
        .file = written ? m->persist_file : NULL,
        .reason = why,
        .rank = m->me,
    };
    event_emit_l3 (m, &e, m->myslot == 0);
    /* one exit code for the job: working rank 0's; the supervisor learns
     * of the others' suspension from the heartbeat */
    mgr_set_agreed_error (ELASTIC_SUSPENDED, m->myslot == 0);
    heartbeat_flag (ELASTIC_HEARTBEAT_SUSPENDED);
    return errcodef (err, ELASTIC_SUSPENDED, "%s", m->suspend_text);
}

/* elastic_maybe_snapshot after the checks: notices, L1/L2, L3. */
static int maybe_snapshot (elastic_manager_t *m, int64_t step, elastic_error_t *err)
{
    const char *why = NULL;
    int persist, rc, mrc, written;
    char ebuf[256];

    /* the snapshot whose L2 exchange overlapped the last step: commit it */
    if ((rc = snapshot_complete (m, err)) != ELASTIC_OK) {
        if (rc == ELASTIC_ERR_PROC_FAILED)
            el_log (EL_INFO,
                    "a process failed during the snapshot before step %lld: recovering",
                    (long long)step);
        return rc;
    }
    if (step == m->event_step)
        return ELASTIC_OK; /* see event_step */
    m->event_step = -1;
    if (preempt_due (m->pre, step)) {
        int room = grow_room (m);
        if (m->cfg.grow_policy == ELASTIC_GROW_NEVER)
            room = 0;
        if ((mrc = preempt_agree (m->pre, m->work, step, &room, &why)) != MPI_SUCCESS) {
            if (!ft_is_failure (mrc))
                return errcodef (err,
                                 ELASTIC_ERR_MPI,
                                 "elastic_maybe_snapshot: %s",
                                 ft_strerror (mrc, ebuf, sizeof (ebuf)));
            ft_revoke (m->work);
            return ELASTIC_ERR_PROC_FAILED;
        }
        m->grow_room = room;
        if (why && m->myslot == 0)
            el_log (EL_INFO, "step %lld: %s: suspending", (long long)step, why);
    }
    /* the last persist step's snapshot committed above: its background
     * write starts now, unless a suspend writes this newer step */
    if (why)
        m->persist_due = -1;
    else if (m->persist_due >= 0) {
        rc = persist_start_due (m, err);
        preempt_skip_step (m->pre);
        if (rc != ELASTIC_OK)
            return rc;
    }
    persist = why || (m->cfg.persist_period > 0 && step % m->cfg.persist_period == 0 &&
                      step != m->persist_step);
    if ((persist || step % m->cfg.snapshot_period == 0) &&
        snapstore_meta (m->store)->step != step) {
        /* a background L3 write: keep its L1 copy, commit it when done */
        if ((rc = persist_bg_poll (m, step, err)) != ELASTIC_OK)
            return rc;
        /* a snapshot step overlaps its L2 exchange with the next step
         * (committed at the next call), and so does a persist step whose
         * L3 file is written in the background (started once the snapshot
         * commits); a suspend, or an L3 write in the call, needs it now */
        if (persist && !why && snapshot_overlap () && m->cfg.persist_background != 0) {
            rc = snapshot_begin (m, step, err);
            if (rc == ELASTIC_OK)
                m->persist_due = step;
        } else if (persist || why || !snapshot_overlap ())
            rc = snapshot_take (m, step, err);
        else
            rc = snapshot_begin (m, step, err);
        if (rc == ELASTIC_ERR_PROC_FAILED) {
            el_log (EL_INFO,
                    "a process failed during the snapshot of step %lld: recovering",
                    (long long)step);
            return rc;
        }
        if (rc != ELASTIC_OK && !why)
            return rc;
    }
    if (why)
        return suspend (m, step, why, err);
    if (m->persist_due == step)
        return ELASTIC_OK;
    if (persist) {
        rc = persist_background (m, step, &written, err);
        preempt_skip_step (m->pre);
        return rc;
    }
    return ELASTIC_OK;
}

int elastic_maybe_snapshot (elastic_manager_t *m, int64_t step, elastic_error_t *err)
{
    int rc;

    if ((rc = check_working (m, "elastic_maybe_snapshot", err)) != ELASTIC_OK)
        return rc;
    if (step < 0)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "elastic_maybe_snapshot: step %lld is invalid (expected >= 0)",
                         (long long)step);
    elastic_progress (step);
    preempt_enter (m->pre, m->generation);
    m->t_progress = mono_now ();
    m->step = step;
    rc = maybe_snapshot (m, step, err);
    if (rc == ELASTIC_ERR_PROC_FAILED)
        rc = mgr_recover_inside (m, err);
    return rc;
}

int elastic_maybe_reshard_down (elastic_manager_t *m,
                                int mpi_err,
                                elastic_handler_f handler,
                                void *arg,
                                elastic_error_t *err)
{
    enum event_outcome outcome;
    char ebuf[256];
    int rc;

    if (mpi_err == MPI_SUCCESS)
        return ELASTIC_OK;
    if ((rc = check_working (m, "elastic_maybe_reshard_down", err)) != ELASTIC_OK)
        return rc;
    if (mpi_err == ELASTIC_NCCL_ERROR) {
        /* seen first by NCCL: revoke it here, and the working communicator
         * so that every rank's next MPI call fails and joins the repair */
        if ((rc = gpu_nccl_failed (m, err)) != ELASTIC_OK)
            return rc;
        if (!ft_available ()) {
            m->fatal_rc = ELASTIC_ERR_NO_ULFM;
            return errcodef (err,
                             ELASTIC_ERR_NO_ULFM,
                             "an NCCL failure cannot be recovered in place: %s; relaunch "
                             "needed",
                             ft_why_unavailable ());
        }
        ft_revoke (m->work);
        mpi_err = ft_revoked_code ();
    }
    if (!ft_available ()) {
        m->fatal_rc = ELASTIC_ERR_NO_ULFM;
        return errcodef (err,
                         ELASTIC_ERR_NO_ULFM,
                         "%s cannot be recovered in place: %s; relaunch needed",
                         ft_strerror (mpi_err, ebuf, sizeof (ebuf)),
                         ft_why_unavailable ());
    }
    if (!ft_is_failure (mpi_err))
        return errcodef (err,
                         ELASTIC_ERR_MPI,
                         "not a process failure, returned unchanged: %s",
                         ft_strerror (mpi_err, ebuf, sizeof (ebuf)));
    if (handler) {
        m->handler = handler;
        m->handler_arg = arg;
    }
    el_log (EL_INFO,
            "step %lld: %s: recovering",
            (long long)m->step,
            ft_strerror (mpi_err, ebuf, sizeof (ebuf)));
    /* alive, though no step goes by while it recovers: a supervisor's hang
     * watchdog (elastic-exec --hang-timeout) times the recovery from here */
    heartbeat_touch ();
    rc = event_run (m, WHY_FAILURE, m->handler, m->handler_arg, &outcome, err);
    heartbeat_touch ();
    if (rc != ELASTIC_OK)
        m->fatal_rc = rc;
    return rc;
}

int elastic_maybe_reshard_up (elastic_manager_t *m,
                              int64_t step,
                              elastic_handler_f handler,
                              void *arg,
                              int *resharded,
                              elastic_error_t *err)
{
    enum event_outcome outcome;
    int rc, k = 0;

    if (resharded)
        *resharded = 0;
    if ((rc = check_working (m, "elastic_maybe_reshard_up", err)) != ELASTIC_OK)
        return rc;
    if (step < 0)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "elastic_maybe_reshard_up: step %lld is invalid (expected >= 0)",
                         (long long)step);
    if (step % m->cfg.reshard_check_period != 0 || m->nwork >= grow_limit (m) ||
        !ft_available ())
        return ELASTIC_OK;
    /* idle spares first; without them, new processes in the room the
     * launcher reported (the same on every rank: agreed) */
    if (m->nspare == 0 && (!grow_due (m, step) || !(k = grow_count (m, m->grow_room))))
        return ELASTIC_OK;
    if (handler) {
        m->handler = handler;
        m->handler_arg = arg;
    }
    m->t_progress = mono_now ();
    m->step = step;
    if ((rc = snapshot_complete (m, err)) == ELASTIC_OK)
        rc = persist_start_due (m, err);
    if (rc == ELASTIC_ERR_PROC_FAILED) {
        if (resharded)
            *resharded = 1;
        return mgr_recover_inside (m, err);
    }
    if (rc != ELASTIC_OK)
        return rc;
    m->grow_t_snapshot = 0;
    m->grow_rewound = 0;
    m->grow_t_rewind = 0;
    /* the newest snapshot, where coming back to it is cheaper (grow.c),
     * else one of this step */
    if (!(k > 0 && grow_rewind (m, step)) && snapstore_meta (m->store)->step != step) {
        double t0 = mono_now ();
        persist_bg_hold_l1 (m);
        rc = snapshot_take (m, step, err);
        m->grow_t_snapshot = mono_now () - t0;
        if (rc == ELASTIC_ERR_PROC_FAILED) {
            if (resharded)
                *resharded = 1;
            return mgr_recover_inside (m, err);
        }
        if (rc != ELASTIC_OK)
            return rc;
    }
    if (k > 0) {
        if ((rc = grow_spawn (m, k, step, err)) == ELASTIC_ERR_PROC_FAILED) {
            if (resharded)
                *resharded = 1;
            return mgr_recover_inside (m, err);
        }
        if (m->nspare == 0)
            return ELASTIC_OK; /* given up: the job goes on at its size */
    } else
        el_log (EL_INFO,
                "step %lld: %d idle spares, working world %d < %d: growing",
                (long long)step,
                m->nspare,
                m->nwork,
                grow_limit (m));
    rc = event_run (m, WHY_GROW, m->handler, m->handler_arg, &outcome, err);
    if (rc != ELASTIC_OK)
        m->fatal_rc = rc;
    else if (resharded)
        *resharded = 1;
    return rc;
}

int elastic_array_block (const elastic_manager_t *m,
                         const char *name,
                         uint64_t *offset,
                         uint64_t *count,
                         uint64_t *global_count)
{
    int a, na;
    uint64_t off = 0, all = 0;

    if (!m)
        return ELASTIC_ERR_INVAL;
    if ((a = registry_find_array (m->reg, name)) < 0)
        return ELASTIC_ERR_NOT_FOUND;
    if (!m->layout)
        return ELASTIC_ERR_STATE;
    na = m->reg->na;
    for (int j = 0; j < m->nwork; j++) {
        if (j < m->myslot)
            off += m->layout[(size_t)j * na + a];
        all += m->layout[(size_t)j * na + a];
    }
    if (offset)
        *offset = m->myslot >= 0 ? off : 0;
    if (count)
        *count = m->myslot >= 0 ? m->layout[(size_t)m->myslot * na + a] : 0;
    if (global_count)
        *global_count = all;
    return ELASTIC_OK;
}

int elastic_array_restore (elastic_manager_t *m,
                           const char *name,
                           void *buf,
                           uint64_t count,
                           elastic_error_t *err)
{
    struct reg_array *ra;
    int a;

    if (!m)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "elastic_array_restore: manager is NULL");
    if (!m->in_handler)
        return errcodef (
            err, ELASTIC_ERR_STATE, "elastic_array_restore: only inside a handler");
    if ((a = registry_find_array (m->reg, name)) < 0)
        return errcodef (err,
                         ELASTIC_ERR_NOT_FOUND,
                         "elastic_array_restore: no array '%s'",
                         name ? name : "");
    ra = &m->reg->a[a];
    if (count != ra->rcount)
        return errcodef (
            err,
            ELASTIC_ERR_INVAL,
            "elastic_array_restore: array '%s': count %llu is invalid (expected %llu, "
            "this rank's new block)",
            name,
            (unsigned long long)count,
            (unsigned long long)ra->rcount);
    if (count > 0 && !buf)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "elastic_array_restore: array '%s': buf is NULL",
                         name);
    if (ra->is_dev)
        return gpu_array_restore (m, ra, buf, count, err);
    ra->in_place = buf == ra->rbuf && ra->rbuf_app;
    if (count > 0 && buf != ra->rbuf)
        memcpy (buf, ra->rbuf, count * ra->elem_size);
    ra->data = buf;
    ra->count = count;
    ra->restored = 1;
    return ELASTIC_OK;
}

int elastic_array_set_realloc (elastic_manager_t *m,
                               const char *name,
                               elastic_realloc_f fn,
                               void *arg,
                               elastic_error_t *err)
{
    int a;

    if (!m)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "elastic_array_set_realloc: manager is NULL");
    if ((a = registry_find_array (m->reg, name)) < 0)
        return errcodef (err,
                         ELASTIC_ERR_NOT_FOUND,
                         "elastic_array_set_realloc: no array '%s' (register it first)",
                         name ? name : "");
    m->reg->a[a].place = fn;
    m->reg->a[a].place_arg = arg;
    return ELASTIC_OK;
}

int elastic_array_set_diff (elastic_manager_t *m,
                            const char *name,
                            int mode,
                            elastic_error_t *err)
{
    int a;

    if (!m)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "elastic_array_set_diff: manager is NULL");
    if ((a = registry_find_array (m->reg, name)) < 0)
        return errcodef (err,
                         ELASTIC_ERR_NOT_FOUND,
                         "elastic_array_set_diff: no array '%s' (register it first)",
                         name ? name : "");
    if (mode < ELASTIC_DIFF_AUTO || mode > ELASTIC_DIFF_OFF)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "elastic_array_set_diff: mode %d is invalid (expected "
                         "ELASTIC_DIFF_AUTO, _ON or _OFF)",
                         mode);
    if (mode == ELASTIC_DIFF_ON && !diff_available ())
        return errcodef (err,
                         ELASTIC_ERR_UNSUPPORTED,
                         "elastic_array_set_diff: '%s': differential snapshots are not "
                         "built in (configure found no xxhash: apt-get install "
                         "libxxhash-dev)",
                         name);
    m->reg->a[a].diff = mode;
    return ELASTIC_OK;
}

/* The last error every rank agreed on, and whether this process reports it */
static int agreed_rc = ELASTIC_OK;
static int agreed_reporter = 1;

void mgr_set_agreed_error (int rc, int reporter)
{
    agreed_rc = rc;
    agreed_reporter = reporter ? 1 : 0;
}

int elastic_exit_code (int rc)
{
    if (rc == ELASTIC_OK)
        return 0;
    if (rc == agreed_rc && !agreed_reporter)
        return 0; /* the lowest survivor exits with the code for the job */
    if (rc == ELASTIC_ERR_RELAUNCH || rc == ELASTIC_ERR_NO_ULFM)
        return ELASTIC_EXIT_RELAUNCH;
    if (rc == ELASTIC_SUSPENDED)
        return ELASTIC_EXIT_SUSPENDED;
    return 1;
}
