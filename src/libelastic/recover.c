/* recover.c - world events: repair after failures, growth, the end of the job
 *
 * Every live process of the manager's world runs an event together: workers
 * that saw a failure (or grow, or finish), and idle spares woken by the
 * revoke of the world.  One attempt is
 *
 *   revoke work and world; agree on the intent (done? failure? grow?);
 *   shrink the world; drain it (every message sent on the communicators
 *   this one replaces has arrived: retire.h); share the replicated state
 *   (spares lack it);
 *   decide the new membership and layout (or a final error), the same
 *   everywhere; split the new working communicator; exchange the snapshot
 *   into the new layout; agree that all of it worked -> commit.
 *
 * Then the working ranks restore the values, call the handler, agree that
 * every handler succeeded and take a snapshot of the restored state in the
 * new layout (or, where the layout is the snapshot's and the arrays were
 * restored in place, adopt the restored state as that snapshot, moving only
 * the L2 copies whose buddy changed).  Anything failing before that snapshot commits
 * starts another attempt: the committed snapshot is never touched until then, so every
 * attempt restores from the same, whole data.
 *
 * event_run repeats attempt() until one ends the event; an attempt is one
 * function per phase, each adding to its timing of the event line:
 * phase_agree (t_revoke_agree), phase_shrink (t_shrink), phase_place and
 * phase_restore (t_restore, to the commit), phase_handler (t_handler) and
 * phase_protect (t_protect).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#include "event.h"
#include "ft.h"
#include "gpu.h"
#include "grow.h"
#include "layout.h"
#include "log.h"
#include "manager.h"
#include "preempt.h"
#include "recwatch.h"
#include "restore.h"
#include "retire.h"
#include "snapshot.h"
#include "testhook.h"

/* Intent flags, combined with a bitwise AND by the agreement. */
enum { F_NOT_DONE = 1, F_NO_FAILURE = 2, F_GROW = 4, F_ALL = 7 };
/* Commit flags. */
enum { C_OK = 1, C_NOT_FATAL = 2 };

struct ev {
    enum event_why why;
    elastic_handler_f handler;
    void *arg;
    enum event_outcome outcome;
    int rc;           /* the event's result, once a phase ended it */
    int kind_failure; /* 1: an elastic down event (counted) */
    int attempts;
    int started; /* membership at the start is known */
    int old_size;
    int *members; /* [norig] 1: working or idle spare at the start */
    int *failed;
    int nfailed;
    int *used;
    int nused;
    double t_start, t_detect, t_ra, t_shrink, t_restore, t_handler, t_protect;
    int protect_deferred; /* phase_protect left it to the next snapshot step */
    char fatal[512];

    /* buffers of every attempt */
    struct plan *p;
    int *alive; /* [norig] 1: in the shrunk world */
    int *orig;  /* [norig] original rank of each rank of it */
    void *values;

    /* one attempt */
    MPI_Comm nw;      /* the shrunk world */
    MPI_Comm newwork; /* the new working communicator (MPI_COMM_NULL: none) */
    int flags;        /* the agreed intent (F_*) */
    int ok;           /* this process's part of the attempt worked */
    int final;        /* ... and decided a final error (ev->fatal) */
    int myidx;        /* my working rank in the plan, -1: none */
    double t_place;   /* when the place phase began (restore timing) */
};

/* What a phase tells the attempt loop. */
enum step {
    STEP_ON,    /* go on to the next phase */
    STEP_RETRY, /* start another attempt */
    STEP_END,   /* the event is over: ev->rc, ev->outcome */
    STEP_DONE,  /* the new world is committed and protected: I work in it */
};

static int contains (const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* The original rank of every rank of comm, into orig[size]. */
static int
comm_orig_ranks (struct elastic_manager *m, MPI_Comm comm, int *orig, int *size)
{
    MPI_Group g;
    int *idx, rc;

    MPI_Comm_size (comm, size);
    if (!(idx = malloc (*size * sizeof (int))))
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < *size; i++)
        idx[i] = i;
    MPI_Comm_group (comm, &g);
    rc = MPI_Group_translate_ranks (g, *size, idx, m->orig_group, orig);
    MPI_Group_free (&g);
    /* after a growth the base group is the merged communicator's */
    if (rc == MPI_SUCCESS && m->base_orig)
        for (int i = 0; i < *size; i++)
            orig[i] = orig[i] == MPI_UNDEFINED ? MPI_UNDEFINED : m->base_orig[orig[i]];
    free (idx);
    return rc;
}

/* Share the replicated state from the lowest working rank of nw with every
 * process of nw (idle spares lack it).  Returns an MPI error code;
 * MPI_ERR_PENDING (an otherwise unused class) if no working rank is alive. */
static int sync_state (struct elastic_manager *m, MPI_Comm nw)
{
    struct snapmeta *sm = snapstore_meta (m->store), *nsm = NULL;
    int rank, has = m->myslot >= 0, mine, root, rc;
    int64_t len = 0, *buf = NULL;
    size_t pos = 0;

    MPI_Comm_rank (nw, &rank);
    mine = has ? rank : INT_MAX;
    if ((rc = MPI_Allreduce (&mine, &root, 1, MPI_INT, MPI_MIN, nw)) != MPI_SUCCESS)
        return rc;
    if (root == INT_MAX)
        return MPI_ERR_PENDING;
    if (rank == root) {
        len = 17 + m->nwork + m->nspare + 2 * (int64_t)sm->n +
              (int64_t)sm->n * (sm->na + sm->nb + 1);
        if (!(buf = malloc (len * sizeof (int64_t))))
            len = -1;
        else {
            buf[pos++] = m->nwork;
            buf[pos++] = m->nspare;
            buf[pos++] = m->orig_nwork;
            buf[pos++] = m->events;
            buf[pos++] = (int64_t)m->generation;
            buf[pos++] = m->in_event;
            buf[pos++] = m->event_counted;
            buf[pos++] = m->handler_tries;
            buf[pos++] = m->step;
            buf[pos++] = m->persist_step;
            buf[pos++] = m->grow_next;
            buf[pos++] = m->grow_backoff;
            buf[pos++] = m->grow_numbered;
            buf[pos++] = sm->step;
            buf[pos++] = sm->n;
            buf[pos++] = sm->na;
            buf[pos++] = sm->nb;
            for (int j = 0; j < m->nwork; j++)
                buf[pos++] = m->slot[j];
            for (int j = 0; j < m->nspare; j++)
                buf[pos++] = m->spare[j];
            for (int j = 0; j < sm->n; j++) {
                buf[pos++] = sm->holder[j];
                buf[pos++] = sm->buddy[j];
                snapmeta_row_get (sm, j, (uint64_t *)(buf + pos));
                pos += sm->na + sm->nb + 1;
            }
        }
    }
    if ((rc = MPI_Bcast (&len, 1, MPI_INT64_T, root, nw)) != MPI_SUCCESS)
        goto out;
    if (len < 0) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    if (rank != root && !(buf = malloc (len * sizeof (int64_t)))) {
        /* the others are about to send: make them fail instead of hang */
        ft_revoke (nw);
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    if ((rc = MPI_Bcast (buf, (int)len, MPI_INT64_T, root, nw)) != MPI_SUCCESS)
        goto out;
    if (has)
        goto out; /* identical already */
    pos = 0;
    m->nwork = (int)buf[pos++];
    m->nspare = (int)buf[pos++];
    m->orig_nwork = (int)buf[pos++];
    m->events = (int)buf[pos++];
    m->generation = (uint64_t)buf[pos++];
    m->in_event = (int)buf[pos++];
    m->event_counted = (int)buf[pos++];
    m->handler_tries = (int)buf[pos++];
    m->step = buf[pos++];
    /* what decides collective steps: the same everywhere (a process a
     * growth started has none of it) */
    m->persist_step = buf[pos++];
    m->grow_next = buf[pos++];
    m->grow_backoff = (int)buf[pos++];
    m->grow_numbered = (int)buf[pos++];
    {
        int64_t step = buf[pos++];
        int n = (int)buf[pos++], na = (int)buf[pos++], nb = (int)buf[pos++];
        if (na != m->reg->na || nb != m->reg->nb ||
            !(nsm = snapmeta_create (n, na, nb))) {
            rc = MPI_ERR_NO_MEM;
            goto out;
        }
        nsm->step = step;
        for (int j = 0; j < m->nwork; j++)
            m->slot[j] = (int)buf[pos++];
        for (int j = 0; j < m->nspare; j++)
            m->spare[j] = (int)buf[pos++];
        for (int j = 0; j < n; j++) {
            nsm->holder[j] = (int)buf[pos++];
            nsm->buddy[j] = (int)buf[pos++];
            snapmeta_row_set (nsm, j, (const uint64_t *)(buf + pos));
            pos += na + nb + 1;
        }
        snapstore_set_meta (m->store, nsm);
    }
out:
    free (buf);
    return rc;
}

/* A final error the live set makes unavoidable, before any membership is
 * chosen: 1 with it in ev->fatal, else 0. */
static int decide_fatal (struct elastic_manager *m, const int *alive, struct ev *ev)
{
    const struct snapmeta *sm = snapstore_meta (m->store);

    if (sm->step < 0) {
        snprintf (ev->fatal,
                  sizeof (ev->fatal),
                  "no snapshot to restore: a process failed before the first snapshot "
                  "completed; relaunch needed");
        return 1;
    }
    for (int j = 0; j < sm->n; j++) {
        if (alive[sm->holder[j]])
            continue;
        if (sm->buddy[j] < 0) {
            snprintf (
                ev->fatal,
                sizeof (ev->fatal),
                "rank %d failed and its data has no copy (a single working rank has no "
                "L2 buddy); relaunch needed",
                sm->holder[j]);
            return 1;
        }
        if (!alive[sm->buddy[j]]) {
            snprintf (
                ev->fatal,
                sizeof (ev->fatal),
                "ranks %d and %d both failed: rank %d held the only copy (L2 buddy) of "
                "rank %d's snapshot of step %lld; relaunch needed",
                sm->holder[j],
                sm->buddy[j],
                sm->buddy[j],
                sm->holder[j],
                (long long)sm->step);
            return 1;
        }
    }
    if (ev->kind_failure && !m->event_counted &&
        m->events + 1 > m->cfg.max_elastic_down_event_count) {
        snprintf (ev->fatal,
                  sizeof (ev->fatal),
                  "elastic down event %d exceeds max_elastic_down_event_count %d; "
                  "relaunch needed",
                  m->events + 1,
                  m->cfg.max_elastic_down_event_count);
        return 1;
    }
    if (m->handler_tries > m->cfg.max_reshard_retry_count) {
        snprintf (
            ev->fatal,
            sizeof (ev->fatal),
            "the handler failed %d times (max_reshard_retry_count %d); relaunch needed",
            m->handler_tries,
            m->cfg.max_reshard_retry_count);
        return 1;
    }
    return 0;
}

/* The new working ranks and idle spares into p: grow from the idle spares
 * (idle[nidle], alive), let spares take the dead ranks' places, or keep
 * the survivors. */
static void decide_members (struct elastic_manager *m,
                            const int *alive,
                            const int *idle,
                            int nidle,
                            int nlost,
                            int grow,
                            struct plan *p)
{
    p->n = 0;
    p->nspare = 0;
    p->nused = 0;
    if (grow) {
        int g = grow_limit (m) - m->nwork;
        if (g > nidle)
            g = nidle;
        for (int j = 0; j < m->nwork; j++)
            p->slot[p->n++] = m->slot[j];
        for (int i = 0; i < nidle; i++) {
            if (i < g) {
                p->slot[p->n++] = idle[i];
                p->used[p->nused++] = idle[i];
            } else
                p->spare[p->nspare++] = idle[i];
        }
    } else if (m->cfg.spare_takeover && nidle >= nlost) {
        /* spares take the dead ranks' places: same size, same layout */
        int next = 0;
        for (int j = 0; j < m->nwork; j++) {
            if (alive[m->slot[j]])
                p->slot[p->n++] = m->slot[j];
            else {
                p->slot[p->n++] = idle[next];
                p->used[p->nused++] = idle[next++];
            }
        }
        for (int i = next; i < nidle; i++)
            p->spare[p->nspare++] = idle[i];
    } else {
        /* survivors (plus every idle spare with spare_takeover) */
        for (int j = 0; j < m->nwork; j++)
            if (alive[m->slot[j]])
                p->slot[p->n++] = m->slot[j];
        for (int i = 0; i < nidle; i++) {
            if (m->cfg.spare_takeover) {
                p->slot[p->n++] = idle[i];
                p->used[p->nused++] = idle[i];
            } else
                p->spare[p->nspare++] = idle[i];
        }
    }
}

/* The layout of p: the snapshot's when the size is the snapshot's, else
 * even. */
static void decide_layout (struct elastic_manager *m, struct plan *p)
{
    const struct snapmeta *sm = snapstore_meta (m->store);
    int na = m->reg->na;

    for (int a = 0; a < na; a++) {
        if (p->n == sm->n) {
            for (int j = 0; j < p->n; j++)
                p->counts[(size_t)j * na + a] = sm->counts[(size_t)j * na + a];
        } else
            layout_even (layout_sum (sm->counts + a, sm->n, na), p->n, p->counts + a, na);
    }
}

/* Decide the new membership and layout from the shared state and the live
 * set, identically on every process.  Returns 0 with p filled, 1 with a
 * final error in ev->fatal, -1 if memory ran out. */
static int decide (
    struct elastic_manager *m, const int *alive, int flags, struct ev *ev, struct plan *p)
{
    int nlost = 0, nidle = 0, failure, grow, rc = 1;
    int *idle = NULL;

    if (!(idle = malloc ((m->nspare > 0 ? m->nspare : 1) * sizeof (int))))
        return -1;
    for (int j = 0; j < m->nwork; j++)
        if (!alive[m->slot[j]])
            nlost++;
    for (int j = 0; j < m->nspare; j++)
        if (alive[m->spare[j]])
            idle[nidle++] = m->spare[j];
    failure = nlost > 0 || !(flags & F_NO_FAILURE);
    grow = !failure && (flags & F_GROW) && nidle > 0 && m->nwork < grow_limit (m);
    if (failure)
        ev->kind_failure = 1;
    if (decide_fatal (m, alive, ev))
        goto out;
    decide_members (m, alive, idle, nidle, nlost, grow, p);
    if (p->n < m->cfg.min_world_size || p->n == 0) {
        snprintf (ev->fatal,
                  sizeof (ev->fatal),
                  "%d working ranks left, below min_world_size %d; relaunch needed",
                  p->n,
                  m->cfg.min_world_size);
        goto out;
    }
    decide_layout (m, p);
    rc = 0;
out:
    free (idle);
    return rc;
}

static void ev_note_failed (struct ev *ev, const int *alive, int norig)
{
    for (int r = 0; r < norig; r++)
        if (ev->members[r] && !alive[r] && !contains (ev->failed, ev->nfailed, r))
            ev->failed[ev->nfailed++] = r;
}

static void ev_emit (struct elastic_manager *m,
                     struct ev *ev,
                     const char *kind,
                     int new_size,
                     int write_file)
{
    /* a growth's new processes were spares for a moment: named apart */
    int nused = 0;
    for (int i = 0; i < ev->nused; i++)
        if (!contains (m->grow_new, m->grow_nnew, ev->used[i]))
            ev->used[nused++] = ev->used[i];
    ev->nused = nused;
    double t_grow =
        m->grow_nnew > 0 ? m->grow_t_snapshot + m->grow_t_spawn + m->grow_t_merge : 0;
    struct event_rec e = {
        .kind = kind,
        .step = snapstore_meta (m->store)->step,
        .old_size = ev->old_size,
        .new_size = new_size,
        .failed = ev->failed,
        .nfailed = ev->nfailed,
        .used = ev->used,
        .nused = ev->nused,
        .spawned = m->grow_new,
        .nspawned = m->grow_nnew,
        .t_snapshot = m->grow_t_snapshot,
        .rewound = m->grow_rewound,
        .t_rewind = m->grow_t_rewind,
        .t_spawn = m->grow_t_spawn,
        .t_merge = m->grow_t_merge,
        .attempts = ev->attempts,
        .handler_tries = m->handler_tries + 1,
        .t_detect = ev->t_detect,
        .t_revoke_agree = ev->t_ra,
        .t_shrink = ev->t_shrink,
        .t_restore = ev->t_restore,
        .t_handler = ev->t_handler,
        .t_protect = ev->t_protect,
        .protect_deferred = ev->protect_deferred && !ev->kind_failure,
        .t_total = mono_now () - ev->t_start + ev->t_detect + t_grow,
        .error = ev->fatal[0] ? ev->fatal : NULL,
        .rank = m->me,
    };
    event_emit (m, &e, write_file);
}

/* Apply a committed plan. */
static void commit (struct elastic_manager *m,
                    const struct plan *p,
                    MPI_Comm nw,
                    MPI_Comm newwork,
                    struct ev *ev)
{
    int na = m->reg->na;

    preempt_world_changed (m->pre);
    /* Every process used the old communicators for the last time before
     * the drain of this attempt, and completed the drain (the commit
     * agreement says so): nothing of theirs, nor of what earlier attempts
     * retired, is still on its way here (retire.h). */
    ft_free (&m->work);
    ft_free (&m->world);
    retired_release (m->retired);
    m->world = nw;
    m->work = newwork;
    m->nwork = p->n;
    memcpy (m->slot, p->slot, p->n * sizeof (int));
    m->nspare = p->nspare;
    memcpy (m->spare, p->spare, p->nspare * sizeof (int));
    m->myslot = -1;
    for (int j = 0; j < p->n; j++)
        if (p->slot[j] == m->me)
            m->myslot = j;
    memcpy (m->layout, p->counts, (size_t)p->n * na * sizeof (uint64_t));
    m->buddy_valid = 0;
    m->work_final = 0;
    m->work_result = 0;
    m->generation++;
    if (ev->kind_failure && !m->event_counted) {
        m->events++;
        m->event_counted = 1;
    }
    m->in_event = 1;
    for (int i = 0; i < p->nused; i++)
        if (!contains (ev->used, ev->nused, p->used[i]))
            ev->used[ev->nused++] = p->used[i];
}

int mgr_all_restored (struct elastic_manager *m)
{
    for (int a = 0; a < m->reg->na; a++) {
        if (!m->reg->a[a].restored) {
            el_log (EL_ERROR,
                    "the handler did not call elastic_array_restore for array '%s'",
                    m->reg->a[a].name);
            return 0;
        }
    }
    return 1;
}

/* The last agreement a working rank makes on its working communicator
 * (unless a snapshot made it): it meets the ranks still in a snapshot
 * there, and every rank learns the same intent. */
static void work_final_agree (struct elastic_manager *m, struct ev *ev)
{
    int wf = W_NO_FAILURE | W_NOT_DONE | W_GROW;
    double t = mono_now ();

    if (ev->why == WHY_FAILURE) {
        wf &= ~W_NO_FAILURE;
        ft_revoke (m->work); /* release ranks blocked on it */
    }
    if (ev->why == WHY_DONE)
        wf &= ~W_NOT_DONE;
    if (ev->why != WHY_GROW)
        wf &= ~W_GROW;
    if (ft_agree (m->work, &wf) != MPI_SUCCESS)
        wf &= ~W_NO_FAILURE;
    m->work_final = 1;
    m->work_result = wf;
    ev->t_ra += mono_now () - t;
}

/* This process's intent for the agreement of an attempt (F_*). */
static int intent (const struct elastic_manager *m, const struct ev *ev)
{
    if (m->myslot < 0)
        return F_ALL; /* an idle spare follows */
    if (ev->attempts == 1)
        return (m->work_result & W_NOT_DONE ? F_NOT_DONE : 0) |
               (m->work_result & W_NO_FAILURE ? F_NO_FAILURE : 0) |
               (m->work_result & W_GROW ? F_GROW : 0);
    if (ev->kind_failure)
        return F_NOT_DONE;
    return F_NOT_DONE | F_NO_FAILURE | F_GROW;
}

/* 1. Agree: revoke, agree on the intent.  STEP_END: the agreement failed,
 * or the job is over. */
static enum step
phase_agree (struct elastic_manager *m, struct ev *ev, elastic_error_t *err)
{
    char ebuf[256];
    double t = mono_now ();
    int mrc;

    /* The working communicator is revoked only to interrupt a repair:
     * at the end of the job or to grow, slower ranks may still be
     * finishing a collective on it. */
    recwatch_phase (m->watch, "agreement (MPIX_Comm_agree)");
    if (ev->why == WHY_FAILURE || ev->kind_failure || ev->attempts > 1)
        ft_revoke (m->work);
    ft_revoke (m->world);
    ev->flags = intent (m, ev);
    if ((mrc = ft_agree_robust (m->world, &ev->flags)) != MPI_SUCCESS) {
        ev->rc = errcodef (err,
                           ELASTIC_ERR_RELAUNCH,
                           "recovery: agreement failed: %s; relaunch needed",
                           ft_strerror (mrc, ebuf, sizeof (ebuf)));
        m->finished = 1;
        return STEP_END;
    }
    ev->t_ra += mono_now () - t;
    if (!(ev->flags & F_NOT_DONE)) {
        m->finished = 1;
        ev->outcome = EV_DONE;
        if (ev->why == WHY_FAILURE || ev->why == WHY_GROW)
            ev->rc = errcodef (
                err,
                ELASTIC_ERR_RELAUNCH,
                "the job ended on other ranks while this one was recovering from a "
                "failure; relaunch needed");
        return STEP_END;
    }
    return STEP_ON;
}

/* 2. Shrink the world into ev->nw.  STEP_END: the shrink failed. */
static enum step
phase_shrink (struct elastic_manager *m, struct ev *ev, elastic_error_t *err)
{
    char ebuf[256];
    double t = mono_now ();
    int mrc;

    recwatch_phase (m->watch, "shrink (MPIX_Comm_shrink)");
    if ((mrc = ft_shrink (m->world, &ev->nw)) != MPI_SUCCESS) {
        ev->rc = errcodef (err,
                           ELASTIC_ERR_RELAUNCH,
                           "recovery: MPIX_Comm_shrink failed: %s; relaunch needed",
                           ft_strerror (mrc, ebuf, sizeof (ebuf)));
        m->finished = 1;
        return STEP_END;
    }
    ev->t_shrink += mono_now () - t;
    return STEP_ON;
}

/* This attempt failed here: revoke nw so that every process learns it. */
static void attempt_failed (struct ev *ev)
{
    ev->ok = 0;
    ft_revoke (ev->nw);
}

/* The live set, the drain, the shared state (ev->ok: all worked). */
static void place_world (struct elastic_manager *m, struct ev *ev)
{
    char ebuf[256];
    int size, mrc;

    memset (ev->alive, 0, m->norig * sizeof (int));
    if ((mrc = comm_orig_ranks (m, ev->nw, ev->orig, &size)) != MPI_SUCCESS) {
        attempt_failed (ev);
        return;
    }
    for (int i = 0; i < size; i++)
        ev->alive[ev->orig[i]] = 1;
    /* the drain: what any process sent on an older communicator before
     * this point has reached this one when it completes (retire.h) */
    retired_mark (m->retired);
    if ((mrc = ft_drain (ev->nw, TAG_DRAIN)) != MPI_SUCCESS) {
        el_log (EL_DEBUG, "recovery: drain: %s", ft_strerror (mrc, ebuf, sizeof (ebuf)));
        ev->ok = 0; /* nw is revoked */
        return;
    }
    if ((mrc = sync_state (m, ev->nw)) != MPI_SUCCESS) {
        if (mrc == MPI_ERR_PENDING) {
            snprintf (ev->fatal,
                      sizeof (ev->fatal),
                      "every working rank failed; relaunch needed");
            ev->final = 1;
        } else
            attempt_failed (ev);
    }
}

/* 3. Place: decide the new membership and layout (or a final error) and
 * split the new working communicator.  The restore timing starts here. */
static void phase_place (struct elastic_manager *m, struct ev *ev)
{
    struct plan *p = ev->p;
    int mrc, d;

    ev->t_place = mono_now ();
    place_world (m, ev);
    if (!ev->ok || ev->final)
        return;
    if (!ev->started) {
        ev->started = 1;
        ev->old_size = m->nwork;
        for (int j = 0; j < m->nwork; j++)
            ev->members[m->slot[j]] = 1;
        for (int j = 0; j < m->nspare; j++)
            ev->members[m->spare[j]] = 1;
    }
    ev_note_failed (ev, ev->alive, m->norig);
    if ((d = decide (m, ev->alive, ev->flags, ev, p)) == 1) {
        ev->final = 1;
        return;
    }
    if (d < 0) {
        attempt_failed (ev);
        return;
    }
    if (ev->kind_failure)
        testhook_check (m->hooks, m->me, m->step, HOOK_RECOVERY);
    for (int j = 0; j < p->n; j++)
        if (p->slot[j] == m->me)
            ev->myidx = j;
    /* the new working communicator */
    mrc = MPI_Comm_split (
        ev->nw, ev->myidx >= 0 ? 0 : MPI_UNDEFINED, ev->myidx, &ev->newwork);
    if (mrc != MPI_SUCCESS) {
        ev->newwork = MPI_COMM_NULL; /* undefined after an error */
        attempt_failed (ev);
    } else if (ev->newwork != MPI_COMM_NULL)
        MPI_Comm_set_errhandler (ev->newwork, MPI_ERRORS_RETURN);
}

/* A final error was agreed: end the world here.  Returns ELASTIC_ERR_RELAUNCH. */
static int end_fatal (struct elastic_manager *m, struct ev *ev, elastic_error_t *err)
{
    int nwrank;

    if (!ev->fatal[0])
        snprintf (ev->fatal,
                  sizeof (ev->fatal),
                  "a final error was decided on another rank; relaunch needed");
    retired_add (m->retired, &ev->newwork);
    retired_add (m->retired, &m->work);
    retired_add (m->retired, &m->world);
    m->world = ev->nw;
    m->finished = 1;
    m->myslot = -1;
    MPI_Comm_rank (ev->nw, &nwrank);
    mgr_set_agreed_error (ELASTIC_ERR_RELAUNCH, nwrank == 0);
    el_log (EL_ERROR, "%s", ev->fatal);
    ev_emit (m, ev, "fatal", 0, nwrank == 0);
    return errcodef (err, ELASTIC_ERR_RELAUNCH, "%s", ev->fatal);
}

/* 4. Restore: exchange the state into the new layout, agree that all of
 * the attempt worked and commit.  STEP_RETRY: interrupted; STEP_END: a
 * final error, or this process is an idle spare of the new world. */
static enum step
phase_restore (struct elastic_manager *m, struct ev *ev, elastic_error_t *err)
{
    char ebuf[256];
    int cflags, mrc;

    if (ev->ok && !ev->final && ev->myidx >= 0) {
        mrc = restore_exchange (m, ev->p, ev->newwork, ev->myidx, ev->values);
        if (mrc != MPI_SUCCESS) {
            el_log (EL_DEBUG,
                    "recovery: restore: %s",
                    ft_strerror (mrc, ebuf, sizeof (ebuf)));
            attempt_failed (ev);
        }
    }
    /* commit, or start again */
    cflags = (ev->ok ? C_OK : 0) | (ev->final ? 0 : C_NOT_FATAL);
    mrc = ft_agree (ev->nw, &cflags);
    ev->t_restore += mono_now () - ev->t_place;
    if (!(cflags & C_NOT_FATAL)) {
        ev->rc = end_fatal (m, ev, err);
        return STEP_END;
    }
    if (mrc != MPI_SUCCESS || !(cflags & C_OK)) {
        el_log (EL_INFO, "recovery attempt %d interrupted; starting again", ev->attempts);
        /* their messages may still arrive: freed after a drain */
        retired_add (m->retired, &ev->newwork);
        retired_add (m->retired, &m->world);
        m->world = ev->nw;
        ev->kind_failure |= mrc != MPI_SUCCESS;
        return STEP_RETRY;
    }
    commit (m, ev->p, ev->nw, ev->newwork, ev);
    if (m->myslot < 0) {
        ev->outcome = EV_IDLE;
        registry_clear_restore (m->reg);
        ev->rc = ELASTIC_OK;
        return STEP_END;
    }
    return STEP_ON;
}

/* 5. Handler (the working ranks): the values, the handler, the agreement
 * that every handler succeeded.  STEP_RETRY: a failure or a failed
 * handler. */
static enum step phase_handler (struct elastic_manager *m, struct ev *ev)
{
    double t;
    int hrc = 0, hflag, mrc;

    registry_values_load (m->reg, ev->values);
    m->step = snapstore_meta (m->store)->step;
    t = mono_now ();
    /* the GPU side of the new world before the handler sees it: the NCCL
     * communicator, the device arrays' placement hooks */
    {
        elastic_error_t e = {""};
        int grc = gpu_nccl_rebuild (m, ev->kind_failure, &e);
        if (grc == ELASTIC_ERR_PROC_FAILED)
            ev->kind_failure = 1;
        if (grc != ELASTIC_OK) {
            el_log (EL_WARN, "%s", e.text);
            hrc = -1;
        } else if (gpu_place_arrays (m) < 0)
            hrc = -1;
    }
    if (ev->handler && hrc == 0) {
        /* the application's time is not the recovery's */
        recwatch_disarm (m->watch);
        m->in_handler = 1;
        hrc = ev->handler (m, m->work, ev->arg);
        m->in_handler = 0;
        recwatch_arm (m->watch, "agreement on the handlers", m->step);
    }
    if (hrc == 0 && !mgr_all_restored (m))
        hrc = -1;
    if (hrc != 0) {
        el_log (EL_WARN, "the reshard handler failed (returned %d)", hrc);
        ft_revoke (m->work);
    }
    hflag = hrc == 0;
    mrc = ft_agree (m->work, &hflag);
    ev->t_handler += mono_now () - t;
    if (mrc != MPI_SUCCESS || !hflag)
        m->work_final = 1; /* every working rank is here: the last one */
    if (mrc != MPI_SUCCESS) {
        ev->kind_failure = 1;
        return STEP_RETRY;
    }
    if (!hflag) {
        m->handler_tries++;
        return STEP_RETRY;
    }
    return STEP_ON;
}

/* 6. Protect the restored state in the new layout: adopt it as the
 * snapshot of its step where the layout is the snapshot's and the arrays
 * were restored in place, else take a snapshot.  A growth with
 * grow_eager_snapshots 0 takes none: the snapshot it restored from is of the step
 * it rolled back to (elastic_maybe_reshard_up takes it at the growth's
 * step, or a spare's growth finds it there), held by the old ranks in the
 * old layout; it stays committed until the next snapshot step, and a
 * failure meanwhile recovers the same step from it (the old ranks and their
 * buddies hold it, as before the growth).  STEP_RETRY: not protected. */
static enum step
phase_protect (struct elastic_manager *m, struct ev *ev, elastic_error_t *err)
{
    double t = mono_now ();
    int rc;

    if (!ev->kind_failure && m->nwork > ev->old_size &&
        m->cfg.grow_eager_snapshots == 0) {
        ev->protect_deferred = 1;
        return STEP_ON;
    }
    ev->protect_deferred = 0;
    recwatch_phase (m->watch, "protecting snapshot");
    rc = snapshot_adopt (m, err);
    if (rc == ELASTIC_ERR_STATE)
        rc = snapshot_take (m, m->step, err);
    ev->t_protect += mono_now () - t;
    if (rc == ELASTIC_ERR_PROC_FAILED) {
        ev->kind_failure = 1;
        return STEP_RETRY;
    }
    if (rc != ELASTIC_OK) {
        /* not taken, everywhere (no failure): count it as a failed try
         * and start again on fresh communicators */
        m->work_final = 1;
        m->handler_tries++;
        return STEP_RETRY;
    }
    return STEP_ON;
}

/* One attempt: every phase until one ends the event or asks for another
 * attempt; STEP_DONE when all of them worked. */
static enum step attempt (struct elastic_manager *m, struct ev *ev, elastic_error_t *err)
{
    enum step st;

    ev->attempts++;
    ev->nw = MPI_COMM_NULL;
    ev->newwork = MPI_COMM_NULL;
    ev->ok = 1;
    ev->final = 0;
    ev->myidx = -1;
    if ((st = phase_agree (m, ev, err)) != STEP_ON ||
        (st = phase_shrink (m, ev, err)) != STEP_ON)
        return st;
    recwatch_phase (m->watch, "drain and exchange of the state");
    phase_place (m, ev);
    recwatch_phase (m->watch, "restore");
    if ((st = phase_restore (m, ev, err)) != STEP_ON ||
        (st = phase_handler (m, ev)) != STEP_ON ||
        (st = phase_protect (m, ev, err)) != STEP_ON)
        return st;
    return STEP_DONE;
}

/* The event succeeded on a working rank of the new world. */
static void event_done (struct elastic_manager *m, struct ev *ev)
{
    /* a growth whose new ranks all died before they were taken in */
    int grow_failed = !ev->kind_failure && m->nwork <= ev->old_size;
    const char *kind = ev->kind_failure ? "reshard_down"
                       : grow_failed    ? "grow_failed"
                                        : "reshard_up";

    ev->outcome = EV_WORKING;
    registry_clear_restore (m->reg);
    if (grow_failed) {
        snprintf (ev->fatal,
                  sizeof (ev->fatal),
                  "the new ranks died before they were taken in");
        grow_backoff (m, m->step);
    }
    ev_emit (m, ev, kind, m->nwork, m->myslot == 0);
    ev->fatal[0] = '\0';
    el_log (EL_INFO,
            "%s: world %d -> %d, rolled back to step %lld",
            ev->kind_failure ? "reshard down"
            : grow_failed    ? "growth failed"
                             : "reshard up",
            ev->old_size,
            m->nwork,
            (long long)m->step);
    if (ev->protect_deferred && !grow_failed && m->myslot == 0)
        el_log (EL_INFO,
                "the new layout is protected at the next snapshot step; until then "
                "the snapshot of step %lld in the old layout (world %d) is the "
                "restore point",
                (long long)m->step,
                ev->old_size);
    m->in_event = 0;
    m->event_counted = 0;
    m->handler_tries = 0;
    m->event_step = m->step;
    ev->rc = ELASTIC_OK;
}

static void ev_free (struct ev *ev)
{
    plan_destroy (ev->p);
    free (ev->alive);
    free (ev->orig);
    free (ev->members);
    free (ev->failed);
    free (ev->used);
    free (ev->values);
}

int event_run (struct elastic_manager *m,
               enum event_why why,
               elastic_handler_f handler,
               void *arg,
               enum event_outcome *outcome,
               elastic_error_t *err)
{
    struct ev ev = {
        .why = why,
        .handler = handler,
        .arg = arg,
        .outcome = EV_IDLE,
        .rc = ELASTIC_OK,
    };
    enum step st;

    *outcome = EV_IDLE;
    /* a snapshot still in flight never commits: recover from the previous */
    if (m->myslot >= 0)
        snapshot_discard (m);
    persist_bg_abandon (m); /* and an L3 write in the background never either */
    ev.t_start = mono_now ();
    if (why == WHY_FAILURE && m->t_progress > 0)
        ev.t_detect = ev.t_start - m->t_progress;
    ev.kind_failure = why == WHY_FAILURE;
    if (!ft_available ())
        return errcodef (err,
                         ELASTIC_ERR_NO_ULFM,
                         "in-place recovery impossible: %s; relaunch needed",
                         ft_why_unavailable ());
    if (!(ev.p = plan_create (m->norig, m->reg->na)) ||
        !(ev.alive = calloc (m->norig, sizeof (int))) ||
        !(ev.orig = calloc (m->norig, sizeof (int))) ||
        !(ev.members = calloc (m->norig, sizeof (int))) ||
        !(ev.failed = calloc (m->norig, sizeof (int))) ||
        !(ev.used = calloc (m->norig, sizeof (int))) ||
        !(ev.values = malloc (m->reg->vbytes > 0 ? m->reg->vbytes : 1))) {
        ev.rc = errcodef (err, ELASTIC_ERR_NOMEM, "recovery: out of memory");
        goto out;
    }
    recwatch_arm (m->watch, "agreement on the working communicator", m->step);
    if (m->myslot >= 0 && m->work != MPI_COMM_NULL && !m->work_final)
        work_final_agree (m, &ev);
    if (m->myslot >= 0 && !(m->work_result & W_NO_FAILURE))
        ev.kind_failure = 1;
    while ((st = attempt (m, &ev, err)) == STEP_RETRY)
        ;
    if (st == STEP_DONE)
        event_done (m, &ev);
    *outcome = ev.outcome;
out:
    recwatch_disarm (m->watch);
    ev_free (&ev);
    m->grow_nnew = 0; /* the growth (if any) is over */
    return ev.rc;
}
