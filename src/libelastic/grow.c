/* grow.c - growing into new processes: spawn, merge, join (see grow.h)
 *
 * The working ranks (no idle spare left) start k processes of their own
 * program with MPI_Comm_spawn over a duplicate of the world, merge the
 * intercommunicator (they come first, the new processes after them) and
 * send the new processes a header: the original-rank numbering of the
 * merged communicator, the registry and configuration signatures.  Every
 * process of the merged communicator agrees that all of it worked; then
 * the merged communicator is the world, the new processes are its idle
 * spares, and the caller runs the growth event that wakes them (recover.c)
 * exactly as it wakes spares started at launch.
 *
 * Original ranks keep their meaning across growths: the new processes are
 * numbered after every rank there ever was (norig, norig + 1, ...), and the
 * manager keeps the original rank of each rank of its base group (the
 * merged communicator's) in base_orig, since the base group no longer holds
 * the ranks that died.
 *
 * A growth that did not complete changes nothing: the merged communicator
 * is revoked (a new process waiting in its join learns it and exits 0, its
 * work ended), and if no working rank failed meanwhile the job goes on at
 * its size, the next check trying again after a back-off; if one failed,
 * the caller recovers as from any failure.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>

#include "common/clock.h"
#include "common/heartbeat.h"
#include "event.h"
#include "ft.h"
#include "grow.h"
#include "log.h"
#include "manager.h"
#include "preempt.h"
#include "recwatch.h"
#include "retire.h"
#include "testhook.h"

#define GROW_MAGIC 0x454c47524f57ll /* "ELGROW" */
#define GROW_ENV   "ELASTIC_GROW_CHILD"

/* checks between failed growths at most (the back-off doubles) */
#define GROW_BACKOFF_MAX 64

int grow_is_child (void)
{
    const char *s = getenv (GROW_ENV);
    MPI_Comm parent = MPI_COMM_NULL;

    if (!s || strcmp (s, "1") != 0)
        return 0;
    MPI_Comm_get_parent (&parent);
    return parent != MPI_COMM_NULL;
}

/* The integer settings a new process takes from the working ranks (its
 * own may differ: a launcher such as mpirun gives a spawn its own
 * environment, not the job's -x variables), in the header's order. */
#define SETTING(f) offsetof (elastic_config_t, f)
static const size_t int_settings[] = {
    SETTING (snapshot_period),
    SETTING (snapshot_buffer_size),
    SETTING (persist_period),
    SETTING (reshard_check_period),
    SETTING (max_elastic_down_event_count),
    SETTING (max_reshard_retry_count),
    SETTING (min_world_size),
    SETTING (spare_ranks),
    SETTING (spare_takeover),
    SETTING (snapshot_keep),
    SETTING (resume),
    SETTING (resume_fresh_ok),
    SETTING (signal_check_period),
    SETTING (deadline_margin),
    SETTING (diff_threshold_kib),
    SETTING (diff_block_kib),
    SETTING (persist_background),
    SETTING (grow_policy),
    SETTING (max_world_size),
    SETTING (grow_min_batch),
    SETTING (grow_eager_snapshots),
};
#define NSETTINGS (sizeof (int_settings) / sizeof (int_settings[0]))

/* The header: GROW_HDR_FIXED values, the settings, then the original rank
 * of each rank of the merged communicator. */
#define GROW_HDR_FIXED 11
#define GROW_HDR_HEAD  (GROW_HDR_FIXED + (int)NSETTINGS)

static uint64_t fnv (uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Where the job's L3 files go: a process that writes them elsewhere cannot
 * join (its environment, not a setting the header can carry). */
static uint64_t place_signature (const struct elastic_manager *m)
{
    const char *dir = m->snapshot_dir ? m->snapshot_dir : "";
    const char *id = m->run_id ? m->run_id : "";
    uint64_t h = 1469598103934665603ull;

    h = fnv (h, dir, strlen (dir) + 1);
    return fnv (h, id, strlen (id) + 1);
}

int grow_limit (const struct elastic_manager *m)
{
    switch (m->cfg.grow_policy) {
        case ELASTIC_GROW_NEVER:
            return m->nwork;
        case ELASTIC_GROW_ORIGINAL:
            return m->orig_nwork;
        default:
            return m->cfg.max_world_size > 0 ? m->cfg.max_world_size : m->orig_nwork;
    }
}

/* ELASTIC_GROW_SLOTS, read once (or the job's, from a growth's header):
 * -1 when unset or not a number. */
static int slots = -2;

static int launcher_slots (void)
{
    if (slots == -2) {
        const char *s = getenv ("ELASTIC_GROW_SLOTS");
        char *end;
        long v = s ? strtol (s, &end, 10) : -1;

        if (s && (end == s || *end != '\0' || v < 0 || v > INT_MAX)) {
            el_log (EL_WARN,
                    "ELASTIC_GROW_SLOTS='%s' is not a number of slots (0 or more): "
                    "ignored",
                    s);
            v = -1;
        }
        slots = (int)v;
    }
    return slots;
}

int grow_reported (void)
{
    return heartbeat_supervised () || launcher_slots () >= 0;
}

int grow_room (const struct elastic_manager *m)
{
    int room = heartbeat_capacity ();
    int slots = launcher_slots ();

    if (slots >= 0 && slots - (m->nwork + m->nspare) > room)
        room = slots - (m->nwork + m->nspare);
    return room < 0 ? 0 : room;
}

int grow_count (const struct elastic_manager *m, int room)
{
    int want = grow_limit (m) - m->nwork, k, batch;

    if (want <= 0 || room <= 0 || m->nspare > 0)
        return 0;
    k = room < want ? room : want;
    batch = m->cfg.grow_min_batch < want ? m->cfg.grow_min_batch : want;
    return k >= batch ? k : 0;
}

int grow_due (const struct elastic_manager *m, int64_t step)
{
    return m->grow_room > 0 && step >= m->grow_next;
}

/* grow_rewind's limit: the steps that take less time to redo than a
 * snapshot (0: none). */
static int64_t rewind_steps (const struct elastic_manager *m)
{
    double mean = preempt_step_mean (m->pre), cost = preempt_snapshot_cost (m->pre);

    if (m->cfg.grow_eager_snapshots || mean <= 0 || cost <= 0)
        return 0;
    return cost / mean >= (double)INT64_MAX ? INT64_MAX : (int64_t)(cost / mean);
}

int grow_rewind (struct elastic_manager *m, int64_t step)
{
    int64_t snap = snapstore_meta (m->store)->step, back = step - snap;

    if (snap < 0 || back <= 0 || back > rewind_steps (m))
        return 0;
    m->grow_rewound = back;
    m->grow_t_rewind = (double)back * preempt_step_mean (m->pre);
    if (m->myslot == 0)
        el_log (EL_INFO,
                "step %lld: the growth starts from the snapshot of step %lld: redoing "
                "%lld steps (about %.1f ms) costs less than a snapshot (%.1f ms)",
                (long long)step,
                (long long)snap,
                (long long)back,
                m->grow_t_rewind * 1e3,
                preempt_snapshot_cost (m->pre) * 1e3);
    return 1;
}

/* The program and arguments of this process, for the new ones. */
static int capture_command (struct elastic_manager *m)
{
    char exe[PATH_MAX], buf[65536];
    ssize_t n;
    size_t len, pos, argc = 0;
    FILE *f;

    if ((n = readlink ("/proc/self/exe", exe, sizeof (exe) - 1)) <= 0)
        return -1;
    exe[n] = '\0';
    if (!(f = fopen ("/proc/self/cmdline", "r")))
        return -1;
    len = fread (buf, 1, sizeof (buf) - 1, f);
    fclose (f);
    buf[len] = '\0';
    for (pos = 0; pos < len; pos += strlen (buf + pos) + 1)
        argc++;
    if (argc == 0 || !(m->grow_argv = calloc (argc, sizeof (char *))) ||
        !(m->grow_cmd = strdup (exe)))
        return -1;
    /* argv[0] is the program: MPI_Comm_spawn takes the arguments after it */
    pos = strlen (buf) + 1;
    for (size_t i = 0; pos < len; i++, pos += strlen (buf + pos) + 1)
        if (!(m->grow_argv[i] = strdup (buf + pos)))
            return -1;
    return 0;
}

void grow_release (struct elastic_manager *m)
{
    if (m->grow_argv)
        for (size_t i = 0; m->grow_argv[i]; i++)
            free (m->grow_argv[i]);
    free (m->grow_argv);
    free (m->grow_cmd);
    free (m->base_orig);
    free (m->grow_new);
    m->grow_argv = NULL;
    m->grow_cmd = NULL;
    m->base_orig = NULL;
    m->grow_new = NULL;
}

/* Resize the arrays indexed by original or working rank to norig. */
static int resize_members (struct elastic_manager *m, int norig)
{
    int na = m->reg && m->reg->na > 0 ? m->reg->na : 1;
    int *slot, *spare, *buddy;
    uint64_t *layout = NULL;

    if (!(slot = realloc (m->slot, norig * sizeof (int))))
        return -1;
    m->slot = slot;
    if (!(spare = realloc (m->spare, norig * sizeof (int))))
        return -1;
    m->spare = spare;
    if (!(buddy = realloc (m->buddy, norig * sizeof (int))))
        return -1;
    m->buddy = buddy;
    if (m->started) {
        if (!(layout = realloc (m->layout, (size_t)norig * na * sizeof (uint64_t))))
            return -1;
        m->layout = layout;
    }
    return 0;
}

/* Make merged (rank i has original rank orig[i]) the base of the original
 * numbering, with norig ranks in all. */
static int set_base (struct elastic_manager *m, MPI_Comm merged, int *orig, int norig)
{
    if (resize_members (m, norig) < 0)
        return -1;
    if (m->orig_group != MPI_GROUP_NULL)
        MPI_Group_free (&m->orig_group);
    MPI_Comm_group (merged, &m->orig_group);
    free (m->base_orig);
    m->base_orig = orig;
    m->norig = norig;
    return 0;
}

/* A growth given up before anything was restored: the job goes on at
 * step, where it was (a growth that meant to start from an older snapshot
 * rolled nothing back). */
static void emit_failed (struct elastic_manager *m, const char *why, int64_t step)
{
    struct event_rec e = {
        .kind = "grow_failed",
        .step = step,
        .old_size = m->nwork,
        .new_size = m->nwork,
        .spawned = m->grow_new,
        .nspawned = m->grow_nnew,
        .t_snapshot = m->grow_t_snapshot,
        .rewound = m->grow_rewound,
        .t_rewind = m->grow_t_rewind,
        .t_spawn = m->grow_t_spawn,
        .t_merge = m->grow_t_merge,
        .attempts = 1,
        .handler_tries = 0,
        .error = why,
        .rank = m->me,
    };

    event_emit (m, &e, m->myslot == 0);
}

/* The growth did not complete and no working rank failed: the job goes on
 * at its size, the next try after a back-off (in checks). */
static void give_up (struct elastic_manager *m, int k, const char *why, int64_t step)
{
    if (m->myslot == 0)
        el_log (EL_WARN,
                "step %lld: growing by %d failed (%s): going on with %d ranks",
                (long long)step,
                k,
                why,
                m->nwork);
    m->grow_rewound = 0;
    m->grow_t_rewind = 0;
    emit_failed (m, why, step);
    grow_backoff (m, step);
    m->grow_nnew = 0;
}

void grow_backoff (struct elastic_manager *m, int64_t step)
{
    m->grow_backoff = m->grow_backoff ? 2 * m->grow_backoff : 1;
    if (m->grow_backoff > GROW_BACKOFF_MAX)
        m->grow_backoff = GROW_BACKOFF_MAX;
    m->grow_next = step + (int64_t)m->grow_backoff * m->cfg.reshard_check_period;
}

/* ---- placing new processes on a host list ---------------------------- */

#define PLACE_MAX_HOSTS 64

/* Where a growth's k processes go: count[i] of them on host[i]. */
struct placement {
    int n;
    char host[PLACE_MAX_HOSTS][MPI_MAX_PROCESSOR_NAME];
    int count[PLACE_MAX_HOSTS];
};

/* 1 if name (MPI_Get_processor_name) is host, or one of them is the
 * other's short form (n1 and n1.cluster). */
static int same_host (const char *name, const char *host, size_t hl)
{
    size_t nl = strlen (name);

    if (nl == hl && !strncmp (name, host, hl))
        return 1;
    if (nl > hl && !strncmp (name, host, hl) && name[hl] == '.')
        return 1;
    return hl > nl && !strncmp (name, host, nl) && host[nl] == '.';
}

/* Collective over comm: where k new processes go.  Under a launcher that
 * names its hosts' slots (ELASTIC_GROW_HOSTS=HOST:SLOTS,..., elastic-mpirun
 * on a host list), the hosts with the most slots its live processes leave
 * free, one process at a time: PRRTE 3.0 keeps counting the slot of a
 * process that died as used (Open MPI #12599, #13427), so a spawn that
 * names no host finds every host of the allocation full.  pl->n is 0
 * without the variable (the launcher places them).  Returns an MPI error
 * code (the names' allgather). */
static int place (MPI_Comm comm, int k, struct placement *pl)
{
    const char *env = getenv ("ELASTIC_GROW_HOSTS");
    char me[MPI_MAX_PROCESSOR_NAME] = "", *names;
    int np, len, rc, nh = 0, slots[PLACE_MAX_HOSTS];
    char host[PLACE_MAX_HOSTS][MPI_MAX_PROCESSOR_NAME];

    pl->n = 0;
    if (!env || !*env)
        return MPI_SUCCESS;
    MPI_Comm_size (comm, &np);
    if (!(names = calloc ((size_t)np, MPI_MAX_PROCESSOR_NAME)))
        return MPI_SUCCESS; /* the launcher places them */
    MPI_Get_processor_name (me, &len);
    rc = MPI_Allgather (me,
                        MPI_MAX_PROCESSOR_NAME,
                        MPI_CHAR,
                        names,
                        MPI_MAX_PROCESSOR_NAME,
                        MPI_CHAR,
                        comm);
    for (const char *p = env; rc == MPI_SUCCESS && *p && nh < PLACE_MAX_HOSTS;) {
        const char *colon = strchr (p, ':'), *comma = strchr (p, ',');
        size_t hl;
        char *end;
        long v;

        if (!comma)
            comma = p + strlen (p);
        if (!colon || colon > comma || colon == p ||
            (hl = (size_t)(colon - p)) >= MPI_MAX_PROCESSOR_NAME ||
            (v = strtol (colon + 1, &end, 10)) < 0 || end != comma || v > INT_MAX) {
            el_log (EL_WARN,
                    "ELASTIC_GROW_HOSTS='%s' is not HOST:SLOTS,...: the launcher "
                    "places the new processes",
                    env);
            nh = 0;
            break;
        }
        memcpy (host[nh], p, hl);
        host[nh][hl] = '\0';
        slots[nh] = (int)v;
        for (int i = 0; i < np; i++)
            slots[nh] -= same_host (names + (size_t)i * MPI_MAX_PROCESSOR_NAME, p, hl);
        nh++;
        p = *comma ? comma + 1 : comma;
    }
    free (names);
    if (rc != MPI_SUCCESS)
        return rc;
    for (int left = k; left > 0 && nh > 0; left--) {
        int best = 0, j;
        for (int h = 1; h < nh; h++)
            if (slots[h] > slots[best])
                best = h;
        if (slots[best] <= 0)
            break; /* no free slot named: the rest wherever PRRTE puts them */
        for (j = 0; j < pl->n && strcmp (pl->host[j], host[best]) != 0; j++)
            ;
        if (j == pl->n) {
            snprintf (pl->host[j], sizeof (pl->host[j]), "%s", host[best]);
            pl->count[j] = 0;
            pl->n++;
        }
        pl->count[j]++;
        slots[best]--;
    }
    if (pl->n > 0) {
        int placed = 0;
        for (int j = 0; j < pl->n; j++)
            placed += pl->count[j];
        pl->count[pl->n - 1] += k - placed;
    }
    return MPI_SUCCESS;
}

/* MPI_Comm_spawn_multiple with one app per host of pl, each pinned there
 * (oversubscribing, since PRRTE still counts the dead processes' slots). */
static int spawn_placed (struct elastic_manager *m,
                         MPI_Comm comm,
                         const struct placement *pl,
                         MPI_Comm *inter,
                         int *errcodes)
{
    char *cmds[PLACE_MAX_HOSTS];
    char **argvs[PLACE_MAX_HOSTS];
    MPI_Info infos[PLACE_MAX_HOSTS];
    int rc;

    for (int j = 0; j < pl->n; j++) {
        cmds[j] = m->grow_cmd;
        argvs[j] = m->grow_argv;
        MPI_Info_create (&infos[j]);
        MPI_Info_set (infos[j], "PMIX_ENVAR", GROW_ENV "=1");
        MPI_Info_set (infos[j], "host", pl->host[j]);
        MPI_Info_set (infos[j], "map_by", ":OVERSUBSCRIBE");
        MPI_Info_set (infos[j], "bind_to", "none"); /* its cores look taken too */
    }
    if (m->myslot == 0) {
        char where[512] = "";
        for (int j = 0, used = 0; j < pl->n && used < (int)sizeof (where); j++)
            used += snprintf (where + used,
                              sizeof (where) - used,
                              "%s%s x%d",
                              j ? ", " : "",
                              pl->host[j],
                              pl->count[j]);
        el_log (EL_INFO, "growth: the new ranks go to the free slots of %s", where);
    }
    rc = MPI_Comm_spawn_multiple (
        pl->n, cmds, argvs, pl->count, infos, 0, comm, inter, errcodes);
    for (int j = 0; j < pl->n; j++)
        MPI_Info_free (&infos[j]);
    return rc;
}

int grow_spawn (struct elastic_manager *m, int k, int64_t step, elastic_error_t *err)
{
    MPI_Comm sc = MPI_COMM_NULL, inter = MPI_COMM_NULL, merged = MPI_COMM_NULL;
    MPI_Info info = MPI_INFO_NULL;
    struct placement pl;
    int *errcodes = NULL, *orig = NULL, *news, np, rank, ok, one, mrc, total, first;
    int64_t *hdr = NULL;
    char ebuf[256], why[300] = "";
    double t0 = mono_now ();

    (void)err;
    m->grow_room = 0; /* spent: the next growth needs a fresh report */
    if (!m->grow_cmd && capture_command (m) < 0) {
        give_up (m, k, "cannot read this program's command line from /proc/self", step);
        return ELASTIC_OK;
    }
    MPI_Comm_size (m->world, &np);
    total = np + k;
    if (!(errcodes = calloc (k, sizeof (int))) ||
        !(hdr = calloc (GROW_HDR_HEAD + total, sizeof (int64_t))) ||
        !(orig = malloc (total * sizeof (int))) ||
        !(news = realloc (m->grow_new, k * sizeof (int)))) {
        free (errcodes);
        free (hdr);
        free (orig);
        give_up (m, k, "out of memory", step);
        return ELASTIC_OK;
    }
    m->grow_new = news;
    /* every request numbers its processes, started or not, after every
     * number given before (a launcher counts the same way: elastic-exec
     * names the ranks it starts so) */
    first = m->grow_numbered > m->norig ? m->grow_numbered : m->norig;
    m->grow_numbered = first + k;
    for (int i = 0; i < k; i++)
        m->grow_new[i] = first + i;
    m->grow_nnew = k;
    if (m->myslot == 0)
        el_log (EL_INFO,
                "step %lld: room for %d new ranks: growing %d -> %d (ranks %d..%d)",
                (long long)step,
                k,
                m->nwork,
                m->nwork + k,
                first,
                first + k - 1);
    if ((mrc = MPI_Comm_dup (m->world, &sc)) != MPI_SUCCESS) {
        sc = MPI_COMM_NULL;
        goto parent_failed;
    }
    MPI_Comm_set_errhandler (sc, MPI_ERRORS_RETURN);
    /* Open MPI can block for ever in a collective that a failure struck
     * (recwatch.h): the growth is under the same watch as a recovery */
    recwatch_arm (m->watch, "growth: MPI_Comm_spawn", step);
    /* where they go, when the launcher names its hosts' slots */
    if ((mrc = place (sc, k, &pl)) != MPI_SUCCESS)
        goto parent_failed;
    if (pl.n > 0) {
        mrc = spawn_placed (m, sc, &pl, &inter, errcodes);
    } else {
        /* the mark a new process knows itself by (Open MPI's PMIX_ENVAR) */
        MPI_Info_create (&info);
        MPI_Info_set (info, "PMIX_ENVAR", GROW_ENV "=1");
        mrc =
            MPI_Comm_spawn (m->grow_cmd, m->grow_argv, k, info, 0, sc, &inter, errcodes);
        MPI_Info_free (&info);
    }
    m->grow_t_spawn = mono_now () - t0;
    if (mrc != MPI_SUCCESS) {
        /* the root alone may have seen it (Open MPI's connect/accept
         * returns there without telling the others): release them */
        ft_revoke (sc);
        inter = MPI_COMM_NULL;
        snprintf (why,
                  sizeof (why),
                  "MPI_Comm_spawn: %s",
                  ft_strerror (mrc, ebuf, sizeof (ebuf)));
    } else {
        MPI_Comm_set_errhandler (inter, MPI_ERRORS_RETURN);
        /* Open MPI 5.0.7's MPI_Intercomm_merge never returns when a
         * process of either side is dead (ompi_comm_nextcid), and a revoke
         * does not release it: merge only when the agreement, which
         * reports a failure uniformly, finds none, and the new processes
         * only when told to (they wait in a receive, which a revoke does
         * end) */
        recwatch_phase (m->watch, "growth: agreement before the merge");
        /* 1. every working rank returned from the spawn; 2. every one is
         * alive (a death now is found here, and the new processes, still
         * waiting for the word, see the revoke); 3. the word reached the
         * first new process.  A death after that blocks the merge: the
         * recovery watch and the new processes' join limit end it. */
        one = 1;
        if ((mrc = ft_agree (sc, &one)) == MPI_SUCCESS) {
            testhook_check (m->hooks, m->me, step, HOOK_GROW);
            mrc = ft_agree (sc, &one);
        }
        if (mrc == MPI_SUCCESS) {
            int go = 1, rank0;
            MPI_Comm_rank (sc, &rank0);
            if (rank0 == 0)
                one = MPI_Send (&go, 1, MPI_INT, 0, TAG_GROW_GO, inter) == MPI_SUCCESS;
            mrc = ft_agree (sc, &one);
        }
        if (mrc != MPI_SUCCESS || !one) {
            ft_revoke (inter);
            ft_free (&inter);
            if (mrc != MPI_SUCCESS)
                goto parent_failed;
            snprintf (why, sizeof (why), "a new process died before the merge");
        }
    }
    if (inter != MPI_COMM_NULL) {
        recwatch_phase (m->watch, "growth: MPI_Intercomm_merge");
        if ((mrc = MPI_Intercomm_merge (inter, 0, &merged)) != MPI_SUCCESS) {
            merged = MPI_COMM_NULL;
            snprintf (why,
                      sizeof (why),
                      "MPI_Intercomm_merge: %s",
                      ft_strerror (mrc, ebuf, sizeof (ebuf)));
        } else
            MPI_Comm_set_errhandler (merged, MPI_ERRORS_RETURN);
    }
    m->grow_t_merge = mono_now () - t0 - m->grow_t_spawn;
    recwatch_phase (m->watch, "growth: agreement on the merged communicator");
    /* every working rank has the merged communicator, or none uses it */
    ok = merged != MPI_COMM_NULL;
    if (ft_agree_robust (sc, &ok) != MPI_SUCCESS)
        ok = 0;
    if (ok) {
        /* the header: the numbering of the merged communicator */
        MPI_Comm_rank (merged, &rank);
        if (rank == 0) {
            int64_t *o = hdr + GROW_HDR_HEAD;
            MPI_Group wg, og;
            int *idx = malloc (np * sizeof (int));

            hdr[0] = GROW_MAGIC;
            hdr[1] = first + k;
            hdr[2] = total;
            hdr[3] = (int64_t)registry_signature (m->reg);
            hdr[4] = (int64_t)place_signature (m);
            hdr[5] = m->orig_nwork;
            hdr[6] = step;
            hdr[7] = preempt_offered (m->pre);
            hdr[8] = m->generation;
            hdr[9] = m->cfg.deadline;
            hdr[10] = launcher_slots ();
            for (size_t i = 0; i < NSETTINGS; i++)
                hdr[GROW_HDR_FIXED + i] =
                    *(const int *)((const char *)&m->cfg + int_settings[i]);
            if (!idx) {
                hdr[0] = 0; /* the others refuse it */
            } else {
                /* the world's ranks are the merged communicator's first */
                for (int i = 0; i < np; i++)
                    idx[i] = i;
                MPI_Comm_group (m->world, &wg);
                og = m->orig_group;
                MPI_Group_translate_ranks (wg, np, idx, og, idx);
                MPI_Group_free (&wg);
                for (int i = 0; i < np; i++)
                    o[i] = m->base_orig ? m->base_orig[idx[i]] : idx[i];
                for (int i = 0; i < k; i++)
                    o[np + i] = first + i;
                free (idx);
            }
        }
        mrc = MPI_Bcast (hdr, GROW_HDR_HEAD + total, MPI_INT64_T, 0, merged);
        ok = mrc == MPI_SUCCESS && hdr[0] == GROW_MAGIC;
        if (!ok)
            snprintf (why,
                      sizeof (why),
                      "the header to the new ranks: %s",
                      mrc != MPI_SUCCESS ? ft_strerror (mrc, ebuf, sizeof (ebuf))
                                         : "not made");
        /* the new ranks say whether they can join: all of it worked */
        if (ft_agree_robust (merged, &ok) != MPI_SUCCESS)
            ok = 0;
        if (!ok && !why[0])
            snprintf (why,
                      sizeof (why),
                      "a new rank could not join (it died, or its program or "
                      "settings differ from the job's)");
    }
    if (!ok) {
        if (merged != MPI_COMM_NULL) {
            ft_revoke (merged); /* a new rank still joining exits */
            ft_free (&merged);
        }
        ft_free (&inter);
        /* did a working rank fail meanwhile?  Then recover as from any
         * failure; a rank that missed it learns it from the revoke */
        one = 1;
        if (ft_agree (sc, &one) != MPI_SUCCESS)
            goto parent_failed;
        ft_free (&sc);
        recwatch_disarm (m->watch);
        give_up (m, k, why[0] ? why : "refused", step);
        free (errcodes);
        free (hdr);
        free (orig);
        return ELASTIC_OK;
    }
    /* the merged communicator is the world; the new ranks its idle spares */
    for (int i = 0; i < total; i++)
        orig[i] = (int)hdr[GROW_HDR_HEAD + i];
    {
        int me = m->me;
        if (set_base (m, merged, orig, first + k) < 0) {
            /* cannot happen without memory: end as a failure would */
            ft_revoke (merged);
            ft_free (&merged);
            ft_free (&inter);
            free (errcodes);
            free (hdr);
            goto parent_failed_free;
        }
        m->me = me;
    }
    orig = NULL; /* the manager's now */
    retired_add (m->retired, &m->world);
    m->world = merged;
    for (int i = 0; i < k; i++)
        m->spare[i] = m->grow_new[i];
    m->nspare = k;
    m->grow_backoff = 0;
    recwatch_disarm (m->watch); /* the growth event arms it again */
    ft_free (&inter);
    ft_free (&sc);
    free (errcodes);
    free (hdr);
    return ELASTIC_OK;

parent_failed:
    free (errcodes);
    free (hdr);
parent_failed_free:
    free (orig);
    recwatch_disarm (m->watch); /* the recovery arms it again */
    if (sc != MPI_COMM_NULL)
        ft_free (&sc);
    m->grow_nnew = 0;
    ft_revoke (m->work);
    return ELASTIC_ERR_PROC_FAILED;
}

/* A new process whose growth was rolled back: its work is over, and it
 * tells its supervisor so.  Before the merge it leaves through
 * MPI_Finalize (its only connection to the working ranks, the parent
 * intercommunicator, is not disconnected there: Open MPI disconnects
 * dynamic communicators in MPI_Finalize only when there are several), as
 * mpirun wants; after it, or when the merge failed, it leaves as a failed
 * process would, since the merged communicator's disconnect would wait for
 * the working ranks (their agreements and revokes count with a death). */
static void not_taken_in (MPI_Comm merged, int finalize, const char *why)
{
    el_log (EL_INFO, "started to grow the job, not taken in (%s): exiting", why);
    heartbeat_flag (ELASTIC_HEARTBEAT_ENDED);
    if (merged != MPI_COMM_NULL)
        ft_revoke (merged);
    fflush (NULL);
    if (finalize) {
        ft_skip_finalize_fence ();
        MPI_Finalize ();
        exit (0);
    }
    _exit (0);
}

/* A new process's join has a time limit: Open MPI 5.0.7 can block for ever
 * in the merge when a working rank died meanwhile (a revoke does not end
 * it), and the working ranks have then given the growth up.  A thread
 * ends the process, as not taken in, when the join has not completed
 * ELASTIC_GROW_JOIN_TIMEOUT seconds (default 60; 0: none) after it began. */
struct join_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    double limit;
    pthread_t thread;
    int started;
};

static struct join_watch jw = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void *join_watch_main (void *arg)
{
    struct timespec until;
    int timed_out = 0;

    (void)arg;
    clock_gettime (CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)jw.limit;
    until.tv_nsec += (long)((jw.limit - (double)(time_t)jw.limit) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock (&jw.mu);
    while (!jw.done && !timed_out)
        timed_out = pthread_cond_timedwait (&jw.cv, &jw.mu, &until) == ETIMEDOUT;
    pthread_mutex_unlock (&jw.mu);
    if (timed_out && !jw.done) {
        el_log (EL_WARN,
                "started to grow the job, not taken in within %g s "
                "(ELASTIC_GROW_JOIN_TIMEOUT): exiting",
                jw.limit);
        heartbeat_flag (ELASTIC_HEARTBEAT_ENDED);
        fflush (NULL);
        _exit (0);
    }
    return NULL;
}

static void join_watch_start (void)
{
    const char *s = getenv ("ELASTIC_GROW_JOIN_TIMEOUT");
    char *end;
    double v = 60;

    if (s && *s) {
        v = strtod (s, &end);
        if (*end != '\0' || !(v >= 0)) {
            el_log (EL_WARN,
                    "ELASTIC_GROW_JOIN_TIMEOUT: '%s' is invalid (expected seconds >= 0): "
                    "using 60",
                    s);
            v = 60;
        }
    }
    jw.limit = v;
    if (v > 0 && pthread_create (&jw.thread, NULL, join_watch_main, NULL) == 0)
        jw.started = 1;
}

static void join_watch_stop (void)
{
    pthread_mutex_lock (&jw.mu);
    jw.done = 1;
    pthread_cond_signal (&jw.cv);
    pthread_mutex_unlock (&jw.mu);
    if (jw.started)
        pthread_join (jw.thread, NULL);
    jw.started = 0;
}

int grow_join (struct elastic_manager *m, MPI_Comm comm, elastic_error_t *err)
{
    MPI_Comm parent = MPI_COMM_NULL, merged = MPI_COMM_NULL;
    int64_t head[GROW_HDR_HEAD], *hdr = NULL;
    int rank, total, ok, *orig = NULL, mrc;
    char ebuf[256];

    (void)err;
    join_watch_start ();
    MPI_Comm_get_parent (&parent);
    MPI_Comm_set_errhandler (parent, MPI_ERRORS_RETURN);
    /* the working ranks' word that they merge (grow_spawn): the first new
     * process receives it and tells the others */
    {
        MPI_Comm own = MPI_COMM_NULL;
        int go = 0, me;
        if (MPI_Comm_dup (comm, &own) != MPI_SUCCESS)
            not_taken_in (MPI_COMM_NULL, 1, "MPI_Comm_dup failed");
        MPI_Comm_set_errhandler (own, MPI_ERRORS_RETURN);
        MPI_Comm_rank (own, &me);
        if (me == 0 &&
            (mrc =
                 MPI_Recv (&go, 1, MPI_INT, 0, TAG_GROW_GO, parent, MPI_STATUS_IGNORE)) !=
                MPI_SUCCESS)
            go = 0;
        if (MPI_Bcast (&go, 1, MPI_INT, 0, own) != MPI_SUCCESS)
            go = 0;
        ft_free (&own);
        if (go != 1)
            not_taken_in (MPI_COMM_NULL, 1, "the working ranks did not merge");
    }
    if ((mrc = MPI_Intercomm_merge (parent, 1, &merged)) != MPI_SUCCESS)
        not_taken_in (MPI_COMM_NULL, 0, ft_strerror (mrc, ebuf, sizeof (ebuf)));
    MPI_Comm_set_errhandler (merged, MPI_ERRORS_RETURN);
    MPI_Comm_size (merged, &total);
    MPI_Comm_rank (merged, &rank);
    if (!(hdr = calloc (GROW_HDR_HEAD + total, sizeof (int64_t))) ||
        !(orig = malloc (total * sizeof (int))))
        not_taken_in (merged, 0, "out of memory");
    /* a failed header means the working ranks gave up: leave at once */
    if ((mrc = MPI_Bcast (hdr, GROW_HDR_HEAD + total, MPI_INT64_T, 0, merged)) !=
        MPI_SUCCESS)
        not_taken_in (merged, 0, ft_strerror (mrc, ebuf, sizeof (ebuf)));
    memcpy (head, hdr, sizeof (head));
    ok = head[0] == GROW_MAGIC && head[2] == total && head[1] >= total &&
         head[1] <= INT_MAX;
    if (ok) {
        /* the job's settings, whatever this process was given */
        elastic_error_t e;
        for (size_t i = 0; i < NSETTINGS; i++)
            *(int *)((char *)&m->cfg + int_settings[i]) = (int)hdr[GROW_HDR_FIXED + i];
        m->cfg.deadline = hdr[9];
        /* the launcher's slots: mpirun gives a spawn its own environment */
        if (launcher_slots () < 0 && hdr[10] >= 0 && hdr[10] <= INT_MAX)
            slots = (int)hdr[10];
        if (elastic_config_validate (&m->cfg, 0, &e) != ELASTIC_OK) {
            el_log (EL_ERROR, "started to grow the job: its settings: %s", e.text);
            ok = 0;
        }
    }
    if (ok) {
        for (int i = 0; i < total; i++)
            orig[i] = (int)hdr[GROW_HDR_HEAD + i];
        testhook_check (m->hooks, orig[rank], head[6], HOOK_JOIN);
    }
    free (hdr);
    if (ft_agree_robust (merged, &ok) != MPI_SUCCESS || !ok)
        not_taken_in (merged, 0, "the growth was rolled back");
    join_watch_stop (); /* taken in: from here on, a spare's life */
    if (set_base (m, merged, orig, (int)head[1]) < 0)
        not_taken_in (merged, 0, "out of memory");
    m->world = merged;
    m->me = orig[rank];
    m->myslot = -1;
    m->work = MPI_COMM_NULL;
    m->orig_nwork = (int)head[5];
    m->generation = (uint64_t)head[8];
    m->join_sig = (uint64_t)head[3];
    m->join_place = (uint64_t)head[4];
    m->join_offer = (int)head[7];
    m->joined = 1;
    el_log_set_rank (m->me);
    return ELASTIC_OK;
}

void grow_join_check (struct elastic_manager *m)
{
    if (place_signature (m) != m->join_place)
        el_log (EL_ERROR,
                "elastic_manager_start: this process was started to grow the job, but "
                "its snapshot directory '%s' or run id '%s' is not the job's "
                "(ELASTIC_SNAPSHOT_DIR, ELASTIC_RUN_ID: its launcher must give it the "
                "job's environment): exiting",
                m->snapshot_dir,
                m->run_id ? m->run_id : "");
    else if (registry_signature (m->reg) != m->join_sig)
        el_log (EL_ERROR,
                "elastic_manager_start: this process was started to grow the job, but "
                "registered different state than the job's ranks (every rank must "
                "register the same names and sizes in the same order): exiting");
    else
        return;
    ft_revoke (m->world);
    fflush (NULL);
    _exit (1);
}
