/* pmix_backend.c - the PMIx-hosting backend: MPI ranks without mpirun
 *
 * `elastic-exec --nproc-per-node N ./mpi_app` (--wireup pmix) starts N
 * local workers that are the ranks of one PMIx namespace served by the
 * agent itself (pmix_host.h): no mpirun, no PRRTE.  This backend is the
 * local backend (local.c: fork, process groups, pidfds, output, binding)
 * plus the server:
 *
 *   start     the server on the first start; per attempt a namespace
 *             "elastic.<run id>.<agent pid>.<n>" (n counts every start),
 *             each worker's environment from it (PMIx's variables,
 *             OMPI_MCA_mpi_ft_enable=1, ob1, the --mpi-btl BTL, coll ^han,
 *             OMPI_MCA_mpi_add_procs_cutoff above the world size (every
 *             rank's record made at MPI_Init: ULFM's agreement otherwise
 *             waits for a never-contacted dead rank, doc/mesh.md), SIGPIPE
 *             ignored (a survivor's write to a dead peer);
 *             an outer launcher's PMIX_* but PMIX_MCA_* dropped), and
 *             descriptors >= 3 closed on exec (PMIx's accepted sockets
 *             are not close-on-exec);
 *   events    the server's descriptor is watched from the agent's loop:
 *             MPI_Init done (mpi_initialized event), MPI_Abort
 *             (elastic_agent_abort: every worker is killed, the run ends
 *             with the abort's code, no restart);
 *   exits     each reaped worker goes through pmixhost_job_exited first:
 *             a rank that died after MPI_Init was announced to the
 *             survivors, which go on (elastic_agent_worker_lost) under the
 *             in-place policy; a rank that died before every rank finished
 *             MPI_Init fails the group, which restarts in a new namespace
 *             (elastic_agent_worker_failed); under the group policy a
 *             failure stops the namespace first, so no survivor starts a
 *             recovery that is about to be killed;
 *   stop      pmixhost_job_stop before any signal, the namespace destroyed
 *             once every rank is reaped (PMIx then removes Open MPI's
 *             /dev/shm segments and the session directories);
 *   shutdown  the server goes with the agent's run.
 *
 * A program that never calls MPI_Init is not affected: it never connects,
 * its exits are reported as the local backend reports them, and its group
 * restarts like any group.  --init-timeout kills a rank (as a watchdog
 * does) when MPI_Init has not finished that long after the start; under
 * --hang-timeout, --start-timeout does once a rank entered MPI_Init (see
 * init_deadline): the group restarts, as it must for a rank lost before
 * MPI_Init completed.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include "common/log.h"
#include "common/shm.h"
#include "exec/agent_backend.h"
#include "exec/eventlog.h"
#include "exec/guardian.h"
#include "exec/local.h"
#include "exec/spec.h"
#include "exec/util.h"
#include "pmix_backend.h"
#include "pmix_host.h"
#if HAVE_SODIUM
#include "exec/jobmap.h"
#include "exec/meshjob.h"
#include "pmix_transport_mesh.h"
#endif

#include "pmix_backend_impl.h"

/* Worker index <-> global rank (the same without a map). */
static int rank_of (struct pmixb *pb, int i)
{
    return pb->rank_base + i;
}

static int index_of (struct pmixb *pb, int rank)
{
    int i = rank - pb->rank_base;
    return i >= 0 && i < pb->nranks ? i : -1;
}

/* ---- /dev/shm ---------------------------------------------------------------- */

/* Remember the /dev/shm files the live ranks map, by prefix: the name up
 * to its last '.', which holds the job's id in Open MPI's segment names
 * (sm_segment.<host>.<uid>.<job id>.<local rank>).  Names with fewer
 * fields are not per job (another job's could share the prefix). */
static void shm_sample (struct pmixb *pb)
{
    elastic_agent_t *agent = pb->agent;

    for (int i = 0; i < pb->nranks; i++) {
        const struct worker *w = agent_worker (agent, i);
        char path[64], line[1024];
        FILE *f;

        if (w->pid <= 0 || w->exited)
            continue;
        snprintf (path, sizeof (path), "/proc/%d/maps", (int)w->pid);
        if (!(f = fopen (path, "re")))
            continue;
        while (fgets (line, sizeof (line), f)) {
            char p[256];
            int known = 0;

            if (!shm_prefix_of_maps_line (line, p, sizeof (p)))
                continue;
            for (int k = 0; k < pb->nshm_prefix && !known; k++)
                known = !strcmp (pb->shm_prefix[k], p);
            if (!known && pb->nshm_prefix < SHM_MAX_PREFIX) {
                strcpy (pb->shm_prefix[pb->nshm_prefix++], p);
                /* removed by the guardian if the agent is killed */
                guardian_add_shm (local_guardian (pb->local), p);
            }
        }
        fclose (f);
    }
}

/* After the namespace is gone (PMIx ran Open MPI's cleanups): count the
 * files left under the sampled prefixes, and remove them. */
static int shm_sweep (struct pmixb *pb)
{
    DIR *d;
    struct dirent *de;
    int n = 0;

    if (pb->nshm_prefix == 0 || !(d = opendir ("/dev/shm")))
        return 0;
    while ((de = readdir (d))) {
        for (int k = 0; k < pb->nshm_prefix; k++) {
            if (strncmp (de->d_name, pb->shm_prefix[k], strlen (pb->shm_prefix[k])))
                continue;
            log_warn ("/dev/shm/%s was left behind by the ranks: removing it",
                      de->d_name);
            unlinkat (dirfd (d), de->d_name, 0);
            n++;
            break;
        }
    }
    closedir (d);
    return n;
}

/* ---- events from the server ----------------------------------------------- */

/* 1 if a rank of the attempt was killed on purpose (a watchdog, MPI_Init's
 * deadline) before every rank finished MPI_Init. */
static int killed_before_init (struct pmixb *pb)
{
    if (pb->initialized)
        return 0;
    for (int i = 0; i < pb->nranks; i++) {
        const struct worker *w = agent_worker (pb->agent, i);
        if (w->failed && w->fire_mono > 0)
            return 1;
    }
    return 0;
}

const char *pmixb_btl (const struct pmixb *pb)
{
    const struct elastic_agent_spec *spec = agent_spec (pb->agent);

    if (spec->mpi_btl)
        return spec->mpi_btl;
    return pb->map && pb->map->nnodes > 1 ? "sm,tcp" : "sm";
}

void pmixb_report_abort (struct pmixb *pb, int index, int code, const char *message)
{
    if (pb->abort_reported)
        return;
    /* a rank killed before MPI_Init completed makes the others' MPI_Init
     * fail, and Open MPI aborts them (MPI_ERR_UNKNOWN): the abort follows
     * from the kill, for which the group restarts (--max-restarts) */
    if (killed_before_init (pb)) {
        if (!pb->abort_ignored)
            log_info ("rank %d aborted (code %d) after a rank was killed inside or "
                      "before MPI_Init: the group restarts for the kill",
                      agent_worker (pb->agent, index)
                          ? agent_worker (pb->agent, index)->rank
                          : index,
                      code);
        pb->abort_ignored = 1;
        return;
    }
    pb->abort_reported = 1;
    elastic_agent_abort (pb->agent, index, code, message);
}

static void on_initialized (struct pmixb *pb, const struct pmixhost_event *ev)
{
    int total = 0, without = pmixhost_nodelay_check (pb->h, &total);
    double ms = (ev->time - pb->t_start) * 1e3;

    pb->initialized = 1;
    shm_sample (pb);
    log_info ("%s: every rank passed MPI_Init (%.1f ms after the start)",
              pmixhost_job_nspace (pb->job),
              ms);
    eventlog_emit (agent_eventlog (pb->agent),
                   "mpi_initialized",
                   json_pack ("{s:i s:s s:i s:f s:i s:i}",
                              "attempt",
                              agent_attempt (pb->agent),
                              "nspace",
                              pmixhost_job_nspace (pb->job),
                              "ranks",
                              pb->nranks,
                              "init_ms",
                              ms,
                              "clients",
                              total,
                              "clients_without_nodelay",
                              without));
}

/* Act on what the server queued (its events die with their namespace). */
static void drain_events (struct pmixb *pb)
{
    struct pmixhost_event ev;
    int i;

    if (!pb->h)
        return;
    while (pmixhost_next_event (pb->h, &ev)) {
        if (ev.type == PMIXHOST_EV_SPAWN) {
            if (ev.spawn)
                grow_queue (pb, ev.spawn);
            continue;
        }
        if (ev.type == PMIXHOST_EV_SPAWN_JOINED) {
            if (ev.spawn)
                grow_joined (pb, ev.spawn);
            continue;
        }
        if (pb->job && ev.job != pb->job) {
            grow_event (pb, &ev);
            continue;
        }
        if (!pb->job)
            continue;
        switch (ev.type) {
            case PMIXHOST_EV_CONNECTED:
                if ((i = index_of (pb, ev.rank)) >= 0 && !pb->connected[i]) {
                    pb->connected[i] = 1;
                    pb->nconnected++;
                }
                log_debug ("rank %d connected (entered MPI_Init)", ev.rank);
                break;
            case PMIXHOST_EV_INITIALIZED:
                on_initialized (pb, &ev);
                break;
            case PMIXHOST_EV_FINALIZED:
                log_debug ("rank %d called MPI_Finalize", ev.rank);
                break;
            case PMIXHOST_EV_LOST:
                log_debug ("PMIx lost rank %d's connection", ev.rank);
                break;
            case PMIXHOST_EV_ABORT:
                pmixb_report_abort (pb, ev.rank, ev.status, ev.message);
                break;
        }
    }
}

static void on_server_fd (elastic_agent_t *agent, int fd, int revents, void *arg)
{
    drain_events (arg);
    grow_run (arg);
}

/* ---- the local backend's hooks -------------------------------------------- */

static char *const *hook_env (void *arg, int i)
{
    struct pmixb *pb = arg;

    if (grow_is_spawned (pb, i))
        return grow_env (pb, i);
    return pb->job ? pmixhost_job_env (pb->job, rank_of (pb, i)) : NULL;
}

/* An outer launcher's PMIx identity would make the rank talk to the wrong
 * server; its MCA settings (PMIX_MCA_*) are kept. */
static int hook_drop (void *arg, const char *entry)
{
    struct pmixb *pb = arg;

    return !pb->disabled && strncmp (entry, "PMIX_", 5) == 0 &&
           strncmp (entry, "PMIX_MCA_", 9) != 0;
}

static void hook_started (void *arg, int i, pid_t pid)
{
    struct pmixb *pb = arg;

    if (grow_is_spawned (pb, i))
        grow_started (pb, i, pid);
    else if (pb->job)
        pmixhost_job_started (pb->job, rank_of (pb, i), pid);
}

/* A rank of the retired namespace, stopped in the background, was reaped:
 * its exit decides how the namespace can be destroyed. */
static void hook_drained (void *arg, int i, int wstatus)
{
    struct pmixb *pb = arg;

    if (pb->retired && i >= 0 && i < pb->nranks)
        pmixhost_job_exited (pb->retired, rank_of (pb, i), wstatus);
}

static void hook_reaped (void *arg, int i, int wstatus)
{
    struct pmixb *pb = arg;
    elastic_agent_t *agent = pb->agent;
    int sig = WIFSIGNALED (wstatus) ? WTERMSIG (wstatus) : 0;
    int code = WIFEXITED (wstatus) ? WEXITSTATUS (wstatus) : 0;
    struct pmixhost_job_info ji;
    int verdict, ended;

    /* what happened before the exit comes first (MPI_Abort, connections) */
    drain_events (pb);
    if (grow_is_spawned (pb, i)) {
        grow_reaped (pb, i, wstatus);
        return;
    }
    if (!pb->job) {
        elastic_agent_worker_exited (agent, i, code, sig);
        return;
    }
    /* a rank that had finished its work (elastic_progress_end) and then died
     * fails nothing: the others finish too */
    ended = worker_reported_end (agent_worker (agent, i)) && (sig || code == 0);
    /* the group restarts anyway: no survivor is to start a recovery */
    if (!pb->in_place && !ended && (sig || code != 0)) {
        pmixhost_job_stop (pb->job);
        pb->stuck |= pb->connected[i];
    }
    /* a watchdog killed it: the others probably wait for it, unless its
     * death is announced to them (in place, below) */
    if (agent_worker (agent, i)->failed && !pb->in_place)
        pb->stuck = 1;
    verdict = pmixhost_job_exited (pb->job, rank_of (pb, i), wstatus);
    if (pb->fenced && (sig || code != 0)) {
        elastic_agent_worker_failed (
            agent,
            i,
            code,
            sig,
            "killed: this node's elastic-exec was cut off from the mesh (self-fencing)");
        return;
    }
    log_debug ("rank %d: %s %d: %s",
               i,
               sig ? "signal" : "exit",
               sig ? sig : code,
               pmixhost_exit_name (verdict));
    switch (verdict) {
        case PMIXHOST_EXIT_ABORTED:
            if (!pb->abort_reported && pmixhost_job_info (pb->job, &ji) == 0 &&
                ji.aborted)
                pmixb_report_abort (pb, ji.abort_rank, ji.abort_status, ji.abort_message);
            elastic_agent_worker_exited (agent, i, code, sig);
            break;
        case PMIXHOST_EXIT_RECOVERABLE:
            if (!pb->in_place || (!sig && (code == ELASTIC_EXIT_SUSPENDED ||
                                           code == ELASTIC_EXIT_RELAUNCH)))
                /* the policy or the rank itself asks for the group's way */
                elastic_agent_worker_exited (agent, i, code, sig);
            else
                elastic_agent_worker_lost (
                    agent,
                    i,
                    code,
                    sig,
                    sig ? "recovered in place (died after MPI_Init)"
                        : "recovered in place (exited without MPI_Finalize)");
            break;
        case PMIXHOST_EXIT_RESTART:
            if (pb->nconnected > 0) {
                pb->stuck = 1; /* the others wait in an MPI_Init fence */
                eventlog_emit (agent_eventlog (agent),
                               "mpi_init_failed",
                               json_pack ("{s:i s:i s:s s:b s:i s:f}",
                                          "rank",
                                          i,
                                          "attempt",
                                          agent_attempt (agent),
                                          "nspace",
                                          pmixhost_job_nspace (pb->job),
                                          "in_mpi_init",
                                          pb->connected[i],
                                          "connected",
                                          pb->nconnected,
                                          "after_ms",
                                          (mono_now () - pb->t_start) * 1e3));
            }
            if (pb->connected[i])
                elastic_agent_worker_failed (
                    agent,
                    i,
                    code,
                    sig,
                    "inside MPI_Init, before every rank had finished it: no in-place "
                    "recovery is possible");
            else if (pb->nconnected > 0)
                elastic_agent_worker_failed (
                    agent,
                    i,
                    code,
                    sig,
                    "before MPI_Init while the other ranks waited in it: no in-place "
                    "recovery is possible");
            else
                /* nobody connected: maybe no MPI program at all */
                elastic_agent_worker_exited (agent, i, code, sig);
            break;
        default:
            elastic_agent_worker_exited (agent, i, code, sig);
            break;
    }
}

/* ---- namespaces -------------------------------------------------------------- */

/* The run id in namespace characters, and this agent's pid: two agents
 * with one run id on a node get different namespaces (Open MPI names its
 * /dev/shm segments after them). */
static void make_run_id (struct pmixb *pb)
{
    const char *id = agent_run_id (pb->agent);
    size_t n = 0;

#if HAVE_SODIUM
    /* every member registers the same namespace: the job step's key */
    if (pb->map)
        id = pb->map->key;
#endif
    for (; *id && n < 100; id++) {
        char c = *id;
        pb->run_id[n++] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')
                              ? c
                              : '_';
    }
    pb->run_id[n] = '\0';
    if (!pb->map)
        snprintf (pb->run_id + n,
                  sizeof (pb->run_id) - n,
                  "%s%d",
                  n ? "." : "",
                  (int)getpid ());
}

/* The pmix_job_end event's fields for a namespace's last counts (NULL if
 * out of memory). */
static json_t *
job_end_fields (int attempt, const char *nspace, const struct pmixhost_job_info *ji)
{
    return json_pack ("{s:i s:s s:i s:i s:i s:i s:i s:i s:b}",
                      "attempt",
                      attempt,
                      "nspace",
                      nspace,
                      "connected",
                      ji->connected,
                      "finalized",
                      ji->finalized,
                      "failed",
                      ji->failed,
                      "lost",
                      ji->lost,
                      "deregistered",
                      ji->deregistered,
                      "fences",
                      ji->fences,
                      "initialized",
                      ji->initialized);
}

/* End the current namespace: every rank was reaped (or is past help). */
static void end_job (struct pmixb *pb)
{
    struct pmixhost_job_info ji;
    char nspace[256];
    int info, leaked;

    if (!pb->job)
        return;
    drain_events (pb);
    grow_end (pb);
    info = pmixhost_job_info (pb->job, &ji);
    snprintf (nspace, sizeof (nspace), "%s", pmixhost_job_nspace (pb->job));
#if HAVE_SODIUM
    pmixhost_mesh_set_job (pb->tp, NULL);
#endif
    pmixhost_job_destroy (pb->job);
    pb->job = NULL;
    leaked = shm_sweep (pb);
    for (int k = 0; k < pb->nshm_prefix; k++)
        guardian_remove_shm (local_guardian (pb->local), pb->shm_prefix[k]);
    if (info == 0) {
        json_t *o = job_end_fields (agent_attempt (pb->agent), nspace, &ji);
        json_t *shm = json_array ();
        for (int k = 0; shm && k < pb->nshm_prefix; k++)
            json_array_append_new (shm, json_string (pb->shm_prefix[k]));
        if (o) {
            json_object_set_new (o, "shm_prefixes", json_integer (pb->nshm_prefix));
            json_object_set_new (o, "shm", shm ? shm : json_null ());
            json_object_set_new (o, "shm_leaked", json_integer (leaked));
        } else
            json_decref (shm);
        eventlog_emit (agent_eventlog (pb->agent), "pmix_job_end", o);
    }
    pb->nshm_prefix = 0;
}

/* Destroy the retired namespace once its ranks are all reaped (or now,
 * with force: the agent is going); they never connected, so nothing of
 * theirs is left to clean up. */
static void end_retired (struct pmixb *pb, int force)
{
    struct pmixhost_job_info ji;
    char nspace[256];
    int info;

    if (!pb->retired || (!force && local_draining (pb->local)))
        return;
    info = pmixhost_job_info (pb->retired, &ji);
    snprintf (nspace, sizeof (nspace), "%s", pmixhost_job_nspace (pb->retired));
    pmixhost_job_destroy (pb->retired);
    pb->retired = NULL;
    if (info == 0) {
        json_t *o = job_end_fields (pb->retired_attempt, nspace, &ji);
        if (o) {
            json_object_set_new (o, "shm_prefixes", json_integer (0));
            json_object_set_new (o, "shm_leaked", json_integer (0));
            json_object_set_new (o, "after_next_start", json_true ());
        }
        eventlog_emit (agent_eventlog (pb->agent), "pmix_job_end", o);
    }
}

#if HAVE_SODIUM
/* ---- the mesh (mesh mode) ------------------------------------------------- */

/* mesh thread: queue n for the agent's thread and wake it */
static void news_queue (struct pmixb *pb, struct mesh_news *n)
{
    pthread_mutex_lock (&pb->news_lock);
    *pb->news_tail = n;
    pb->news_tail = &n->next;
    pthread_mutex_unlock (&pb->news_lock);
    if (write (pb->mesh_pipe[1], "n", 1) < 0) {
        /* full: the agent has news to read anyway */
    }
}

static void news_push (struct pmixb *pb, int kind, int a, int b, const char *text)
{
    struct mesh_news *n = calloc (1, sizeof (*n));

    if (!n)
        return;
    n->kind = kind;
    n->a = a;
    n->b = b;
    snprintf (n->text, sizeof (n->text), "%s", text ? text : "");
    news_queue (pb, n);
}

static void on_mesh_self_fence (void *arg, const char *reason)
{
    news_push (arg, NEWS_FENCE, 0, 0, reason);
}

static void on_mesh_joined (void *arg)
{
    news_push (arg, NEWS_JOINED, 0, 0, NULL);
}

static void
on_mesh_lost (void *arg, const uint32_t *members, size_t count, uint32_t nlive)
{
    for (size_t i = 0; i < count; i++)
        news_push (arg, NEWS_LOST, (int)members[i], (int)nlive, NULL);
}

static void on_mesh_reported (void *arg, const char *nspace, int rank, int signaled)
{
    news_push (arg, NEWS_REPORTED, rank, signaled, nspace);
}

static void
on_mesh_broadcast (void *arg, uint32_t origin, int kind, const void *data, size_t len)
{
    struct pmixb *pb = arg;
    struct mesh_news *n = calloc (1, sizeof (*n));

    if (!n || !(n->data = malloc (len ? len : 1))) {
        free (n);
        return;
    }
    memcpy (n->data, data, len);
    n->len = len;
    n->kind = NEWS_BCAST;
    n->a = (int)origin;
    n->b = kind;
    news_queue (pb, n);
}

/* a member admitted by elastic-exec --join (meshjob.h): no ranks yet */
static void
on_mesh_admitted (void *arg, uint32_t member, const char *addr, uint32_t nlive)
{
    news_push (arg, NEWS_ADMITTED, (int)member, (int)nlive, addr);
}

/* Cut off from the mesh: the other nodes go on without this one, whose
 * ranks must not run a second half of the job. */
static void self_fence (struct pmixb *pb, const char *reason)
{
    elastic_agent_t *agent = pb->agent;

    if (pb->fenced)
        return;
    pb->fenced = 1;
    log_err ("this node was cut off from the job's mesh (%s): killing its ranks "
             "(self-fencing: the other nodes go on without them)",
             reason);
    eventlog_emit (
        agent_eventlog (agent),
        "self_fence",
        json_pack (
            "{s:s s:s}", "node", grow_member_name (pb, pb->self), "reason", reason));
    /* (the ranks spawned here too) */
    for (int i = 0; i < elastic_agent_worker_count (agent); i++) {
        const struct worker *w = agent_worker (agent, i);
        if (w->pid > 0 && !w->exited)
            agent_worker_kill (agent, i, SIGKILL, "self_fence", reason, NULL);
    }
}

static void on_mesh_pipe (elastic_agent_t *agent, int fd, int revents, void *arg)
{
    struct pmixb *pb = arg;
    struct mesh_news *n, *next;
    char buf[256];

    while (read (fd, buf, sizeof (buf)) > 0) {
    }
    pthread_mutex_lock (&pb->news_lock);
    n = pb->news;
    pb->news = NULL;
    pb->news_tail = &pb->news;
    pthread_mutex_unlock (&pb->news_lock);
    for (; n; n = next) {
        const struct jobmap *m = pb->map;
        next = n->next;
        switch (n->kind) {
            case NEWS_LOST:
                if (n->a >= m->nnodes) { /* joined by --join */
                    int k = grow_member_ranks (pb, n->a);
                    log_warn ("mesh: member %d (%s, joined by --join, %d spawned rank%s) "
                              "lost; %d members left",
                              n->a,
                              grow_member_name (pb, n->a),
                              k,
                              k == 1 ? "" : "s",
                              n->b);
                    eventlog_emit (agent_eventlog (agent),
                                   "node_lost",
                                   json_pack ("{s:i s:s s:i s:i}",
                                              "member",
                                              n->a,
                                              "node",
                                              grow_member_name (pb, n->a),
                                              "ranks",
                                              k,
                                              "live",
                                              n->b));
                    grow_member_lost (pb, n->a);
                    break;
                }
                log_warn ("mesh: node %s (member %d) lost; %d of %d members left",
                          n->a < m->nnodes ? m->node[n->a].name : "?",
                          n->a,
                          n->b,
                          m->nnodes);
                eventlog_emit (agent_eventlog (agent),
                               "node_lost",
                               json_pack ("{s:i s:s s:i s:i}",
                                          "member",
                                          n->a,
                                          "node",
                                          n->a < m->nnodes ? m->node[n->a].name : "?",
                                          "ranks",
                                          n->a < m->nnodes ? m->node[n->a].nranks : 0,
                                          "live",
                                          n->b));
                grow_member_lost (pb, n->a);
                break;
            case NEWS_REPORTED:
                if (n->text[0]) { /* a rank of a spawned namespace */
                    grow_remote_failed (pb, n->text, n->a, n->b);
                    break;
                }
                log_info ("mesh: rank %d (node %s) failed; told this node's ranks",
                          n->a,
                          m->node[jobmap_rank_node (m, n->a)].name);
                eventlog_emit (agent_eventlog (agent),
                               "rank_failed",
                               json_pack ("{s:i s:s s:b}",
                                          "rank",
                                          n->a,
                                          "node",
                                          m->node[jobmap_rank_node (m, n->a)].name,
                                          "signaled",
                                          n->b));
                break;
            case NEWS_JOINED: {
                /* the job's nodes, or more once members joined it */
                int live = (int)pmixhost_mesh_nlive (pb->tp);
                if (live < 1)
                    live = m->nnodes;
                log_info (
                    "mesh: joined (linked with its neighbours in the tree of %d members)",
                    live);
                eventlog_emit (
                    agent_eventlog (agent),
                    "member_joined",
                    json_pack ("{s:i s:i}", "members", live, "self", pb->self));
                break;
            }
            case NEWS_FENCE:
                self_fence (pb, n->text);
                break;
            case NEWS_BCAST:
                grow_mesh_broadcast (pb, n->a, n->b, n->data, n->len);
                break;
            case NEWS_ADMITTED:
                log_info ("mesh: member %d (%s) joined the job (elastic-exec --join); %d "
                          "members live; it has no ranks yet",
                          n->a,
                          n->text[0] ? n->text : "address not known here yet",
                          n->b);
                grow_member_admitted (pb, n->a, n->text);
                eventlog_emit (agent_eventlog (agent),
                               "member_joined",
                               json_pack ("{s:i s:s s:i s:i}",
                                          "member",
                                          n->a,
                                          "addr",
                                          n->text,
                                          "live",
                                          n->b,
                                          "ranks",
                                          0));
                break;
        }
        free (n->data);
        free (n);
    }
}

static int
mesh_transport (struct pmixb *pb, struct pmixhost_opts *o, elastic_error_t *err)
{
    struct meshjob *mj = agent_spec (pb->agent)->mesh;
    struct pmixhost_mesh_opts mo = {
        .map = pb->map,
        .addrs = (const char *const *)mj->addrs,
        .listen_fd = mj->listen_fd,
        .node_timeout = mj->node_timeout,
        .join_timeout = 60,
        .key = mj->key,
        .auth = mj->munge ? MESH_AUTH_MUNGE : MESH_AUTH_SECRET,
        .job = pb->map->key,
        .munge_socket = mj->munge_socket[0] ? mj->munge_socket : NULL,
        .self_fence = on_mesh_self_fence,
        .joined = on_mesh_joined,
        .lost = on_mesh_lost,
        .reported = on_mesh_reported,
        .broadcast = on_mesh_broadcast,
        .arg = pb,
        /* joins (elastic-exec --join, meshjob.h) */
        .nslots = mj->nslots,
        .admit_info = mj->admit_info,
        .admitted = on_mesh_admitted,
        /* this member joined by --join */
        .admission = mj->joined ? mj->admission : NULL,
        .ports = mj->join_ports,
        .nports = (uint32_t)mj->njoin_ports,
    };

    if (pipe2 (pb->mesh_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return errprintf (err, "mesh: pipe: %s", strerror (errno));
    if (elastic_agent_watch (pb->agent, pb->mesh_pipe[0], on_mesh_pipe, pb) != ELASTIC_OK)
        return errprintf (err, "mesh: cannot watch its pipe");
    mj->listen_fd = -1; /* the mesh's now, whatever happens */
    if (!(pb->tp = pmixhost_mesh_create (&mo, err)))
        return -1;
    o->transport = &pmixhost_transport_mesh;
    o->transport_ctx = pb->tp;
    return 0;
}

/* The end of the job on this member: tell the others what became of this
 * node's ranks, wait for theirs (taking part in their fences meanwhile),
 * and agree on the job's result (meshjob_decide). */
static void mesh_finish (struct pmixb *pb)
{
    elastic_agent_t *agent = pb->agent;
    struct meshjob *mj = agent_spec (agent)->mesh;
    struct pmixhost_mesh_outcomes out = {0};
    struct meshjob_member *mm;
    int status = 0, lost = 0, failed = 0, suspended = 0, agreed, n;
    char blob[256];
    elastic_error_t err = {{0}};
    double t0 = mono_now ();

    grow_finishing (pb);
    /* the ranks it started with and the ones spawned onto it */
    for (int i = 0; i < elastic_agent_worker_count (agent); i++) {
        const struct worker *w = agent_worker (agent, i);
        if (w->lost)
            lost++;
        else if (w->suspended)
            suspended++;
        else if ((w->failed || (w->exited && w->exitcode != 0)) && !w->after_end) {
            if (!failed++)
                status = w->exitcode > 0   ? w->exitcode
                         : w->exitcode < 0 ? 128 - w->exitcode
                                           : 1;
        }
    }
    if (pb->fenced)
        status = status ? status : 1, failed = failed ? failed : 1;
    else if (!failed && suspended)
        status = 75;
    meshjob_outcome (blob,
                     sizeof (blob),
                     status,
                     elastic_agent_worker_count (agent),
                     lost,
                     failed,
                     suspended);
    log_info ("mesh %d: this member's ranks are gone (%d lost, %d failed): telling the "
              "others, waiting for theirs",
              pb->self,
              lost,
              failed);
    agreed = pmixhost_mesh_finish (pb->tp,
                                   blob,
                                   strlen (blob),
                                   agent_spec (agent)->exit_barrier_timeout,
                                   &out,
                                   &err) == 0;
    if (!agreed)
        log_warn ("%s", err.text);
    n = out.n > pb->map->nnodes ? out.n : pb->map->nnodes;
    if (!(mm = calloc ((size_t)n, sizeof (*mm)))) {
        pmixhost_mesh_outcomes_free (&out);
        return;
    }
    for (int i = 0; i < n; i++) {
        mm[i].absent = i >= pb->map->nnodes;
        if (i >= out.n)
            continue;
        mm[i].outcome = out.blob[i];
        mm[i].lost = out.state[i] == PMIXHOST_MESH_LOST;
        mm[i].absent = out.state[i] == PMIXHOST_MESH_ABSENT;
        mm[i].spawned = grow_member_ranks (pb, i);
        mm[i].name = i >= pb->map->nnodes ? grow_member_name (pb, i) : NULL;
    }
    if (out.n == 0 && pb->self >= 0 && pb->self < n) /* out of memory: only our own */
        mm[pb->self].outcome = blob;
    meshjob_decide (mj, mm, n, agreed);
    eventlog_emit (agent_eventlog (agent),
                   "mesh_end",
                   json_pack ("{s:b s:i s:s s:f}",
                              "agreed",
                              mj->agreed,
                              "status",
                              mj->status,
                              "summary",
                              mj->summary,
                              "wait_ms",
                              (mono_now () - t0) * 1e3));
    pmixhost_mesh_outcomes_free (&out);
    free (mm);
}
#endif

static int signal_waits (void *arg)
{
    return agent_signal_pending (arg);
}

/* Before the first ranks start: wait until every member is up (the launch
 * barrier of pmix_transport_mesh.h), so that no node's ranks sit in
 * MPI_Init while the launcher is still starting another node's member.
 * A signal for the agent ends the wait: the ranks start and the agent's
 * loop acts on it at once. */
static void launch_barrier (struct pmixb *pb)
{
    const struct jobmap *m = pb->map;
    double t0 = mono_now (), ms;
    uint32_t members = 0;
    int r;

    pb->launched = 1;
    r = pmixhost_mesh_launch_barrier (pb->tp, signal_waits, pb->agent, &members);
    ms = (mono_now () - t0) * 1e3;
    if (r == 1)
        log_info ("mesh: %u of %d members up after %.1f ms: starting the ranks",
                  members,
                  m->nnodes,
                  ms);
    else if (r == 0)
        log_info ("mesh: a signal came while waiting for the other members (%.1f ms): "
                  "starting the ranks",
                  ms);
    else
        log_warn ("mesh: the launch barrier failed after %.1f ms (this member left the "
                  "mesh): starting the ranks",
                  ms);
    eventlog_emit (agent_eventlog (pb->agent),
                   "mesh_launch",
                   json_pack ("{s:s s:i s:i s:f}",
                              "result",
                              r == 1   ? "made"
                              : r == 0 ? "signal"
                                       : "failed",
                              "members",
                              (int)members,
                              "nnodes",
                              m->nnodes,
                              "duration_ms",
                              ms));
}

static int start_server (struct pmixb *pb, elastic_error_t *err)
{
    struct pmixhost_opts o = {0};

#if HAVE_SODIUM
    if (pb->map && pb->map->nnodes > 1 && mesh_transport (pb, &o, err) < 0) {
        errprefix (err, "hosted PMIx server");
        return ELASTIC_ERR_IO;
    }
#endif
    if (!(pb->h = pmixhost_create (&o, err))) {
        pb->tp = NULL; /* freed by pmixhost_create */
        errprefix (err, "hosted PMIx server");
        return ELASTIC_ERR_IO;
    }
#if HAVE_SODIUM
    if (pb->tp && pmixhost_mesh_start (pb->tp, err) < 0) {
        errprefix (err, "hosted PMIx server");
        pmixhost_destroy (pb->h);
        pb->h = NULL;
        pb->tp = NULL;
        return ELASTIC_ERR_IO;
    }
    if (pb->tp)
        meshjob_set_transport (agent_spec (pb->agent)->mesh, pb->tp);
#endif
    if (elastic_agent_watch (pb->agent, pmixhost_fd (pb->h), on_server_fd, pb) !=
        ELASTIC_OK) {
        errprintf (err, "hosted PMIx server: cannot watch it");
        pmixhost_destroy (pb->h);
        pb->h = NULL;
        return ELASTIC_ERR_IO;
    }
    pb->watching = 1;
    make_run_id (pb);
    log_info ("hosting the PMIx server of the ranks (%s)", pmixhost_dir (pb->h));
    eventlog_emit (agent_eventlog (pb->agent),
                   "pmix_server",
                   json_pack ("{s:s s:s}",
                              "dir",
                              pmixhost_dir (pb->h),
                              "restart_policy",
                              pb->in_place ? "in-place" : "group"));
    return ELASTIC_OK;
}

static void stop_server (struct pmixb *pb)
{
    end_retired (pb, 1);
    end_job (pb);
    if (pb->mesh_pipe[0] >= 0)
        elastic_agent_unwatch (pb->agent, pb->mesh_pipe[0]);
#if HAVE_SODIUM
    if (pb->tp)
        meshjob_set_transport (agent_spec (pb->agent)->mesh, NULL);
    pb->tp = NULL; /* destroyed with the server */
#endif
    if (pb->watching) {
        elastic_agent_unwatch (pb->agent, pmixhost_fd (pb->h));
        pb->watching = 0;
    }
    pmixhost_destroy (pb->h);
    pb->h = NULL;
}

/* ---- the backend ------------------------------------------------------------- */

static int pmix_start (elastic_agent_t *agent, void *ctx, elastic_error_t *err)
{
    struct pmixb *pb = ctx;
    const struct elastic_agent_spec *spec = agent_spec (agent);
    struct pmixhost_job_opts jo = {0};
    struct pmixhost_job_info ji;
    int rc;

    if (pb->disabled)
        return local_backend.start_workers (agent, pb->local, err);
    if (!pb->h && (rc = start_server (pb, err)) != ELASTIC_OK) {
        if (spec->wireup == WIREUP_PMIX)
            return rc; /* asked for: an error */
        /* the default: programs that are not MPI need no server */
        log_warn ("%s; the workers start without it (as with --wireup none)",
                  err ? err->text : "hosted PMIx server: cannot start");
        eventlog_emit (agent_eventlog (agent),
                       "pmix_server",
                       json_pack ("{s:s}", "error", err ? err->text : "cannot start"));
        pb->disabled = 1;
        return local_backend.start_workers (agent, pb->local, err);
    }
#if HAVE_SODIUM
    /* (a member that joined the running job starts nothing of its own) */
    if (pb->tp && !pb->launched && !spec->hosting)
        launch_barrier (pb);
#endif
    end_job (pb); /* a start without a stop before it */
    jo.run_id = pb->run_id;
    jo.attempt = pb->njobs;
    jo.nranks = pb->map ? 0 : pb->nranks;
    jo.map = pb->map;
    jo.btl = pmixb_btl (pb);
    jo.oversubscribed = spec->binding.oversubscribe ? 1 : -1;
    pb->t_start = mono_now ();
    if (!(pb->job = pmixhost_job_create (pb->h, &jo, err))) {
        errprefix (err, "hosted PMIx server");
        return ELASTIC_ERR_IO;
    }
    pb->njobs++;
#if HAVE_SODIUM
    pmixhost_mesh_set_job (pb->tp, pb->job);
#endif
    memset (pb->connected, 0, (size_t)pb->nranks * sizeof (*pb->connected));
    for (int i = 0; i < pb->nslots; i++)
        pb->slot_owner[i] = i < pb->nranks ? i : -1;
    pb->nconnected = 0;
    /* a member that joined the running job: its MPI_Init was long done */
    pb->initialized = spec->hosting;
    pb->abort_reported = 0;
    pb->abort_ignored = 0;
    pb->init_timeout_fired = 0;
    pb->stuck = 0;
    pb->nshm_prefix = 0;
    pmixhost_job_info (pb->job, &ji);
    eventlog_emit (agent_eventlog (agent),
                   "pmix_job",
                   json_pack ("{s:i s:s s:i s:s s:b}",
                              "attempt",
                              agent_attempt (agent),
                              "nspace",
                              pmixhost_job_nspace (pb->job),
                              "ranks",
                              pb->nranks,
                              "btl",
                              jo.btl,
                              "oversubscribed",
                              ji.oversubscribed));
    rc = local_backend.start_workers (agent, pb->local, err);
    end_retired (pb, 0);
    /* the server's directory goes with a killed agent (the guardian starts
     * with the first workers) */
    if (!pb->guarded && local_guardian (pb->local)) {
        guardian_add_dir (local_guardian (pb->local), pmixhost_dir (pb->h));
        pb->guarded = 1;
    }
    return rc;
}

/* The MPI_Init deadline of an attempt: --init-timeout; else, under
 * --hang-timeout, --start-timeout once a rank entered MPI_Init (the ranks
 * are MPI ranks, and those inside wait for the others; a program that is
 * not MPI never connects and is never judged by it).  0: none. */
static double init_deadline (struct pmixb *pb, int *derived)
{
    const struct elastic_agent_spec *spec = agent_spec (pb->agent);

    *derived = 0;
    if (spec->init_timeout > 0)
        return spec->init_timeout;
    if (spec->hang_timeout > 0 && spec->start_timeout > 0 && pb->nconnected > 0) {
        *derived = 1;
        return spec->start_timeout;
    }
    return 0;
}

/* The rank that keeps MPI_Init from finishing, best evidence first: a
 * stopped one that never connected, one that never connected, a stopped
 * one, rank 0.  -1 if none is alive. */
static int init_victim (struct pmixb *pb)
{
    elastic_agent_t *agent = pb->agent;

    for (int pass = 0; pass < 4; pass++) {
        for (int i = 0; i < pb->nranks; i++) {
            const struct worker *w = agent_worker (agent, i);
            if (w->pid <= 0 || w->exited)
                continue;
            if ((pass == 0 && !pb->connected[i] && proc_stopped (w->pid)) ||
                (pass == 1 && !pb->connected[i]) ||
                (pass == 2 && proc_stopped (w->pid)) || pass == 3)
                return i;
        }
    }
    return -1;
}

/* --init-timeout (or --start-timeout, see init_deadline): kill the rank
 * that keeps MPI_Init from finishing, as a watchdog would; a rank lost
 * before MPI_Init completed cannot be recovered in place, so the group
 * restarts (--max-restarts) or fails. */
static void check_init_timeout (struct pmixb *pb)
{
    elastic_agent_t *agent = pb->agent;
    int derived, victim;
    double timeout = init_deadline (pb, &derived);
    char reason[320];

    if (timeout <= 0 || !pb->job || pb->initialized || pb->init_timeout_fired ||
        pb->abort_reported || agent_stopping (agent) ||
        mono_now () - pb->t_start < timeout)
        return;
    /* a rank already killed (a watchdog's victim, stopped before it
     * attached) takes the attempt down: nobody else is to blame */
    for (int i = 0; i < pb->nranks; i++)
        if (agent_worker (agent, i)->failed)
            return;
    victim = init_victim (pb);
    pb->init_timeout_fired = 1;
    if (victim < 0)
        return;
    snprintf (reason,
              sizeof (reason),
              "MPI_Init did not finish within %.3g s (%d of %d ranks had entered it), "
              "%s: this one had%s entered it%s",
              timeout,
              pb->nconnected,
              pb->nranks,
              derived ? "start-timeout" : "init-timeout",
              pb->connected[victim] ? "" : " not",
              proc_stopped (agent_worker (agent, victim)->pid) ? " and is stopped" : "");
    agent_worker_kill (agent,
                       victim,
                       SIGKILL,
                       "mpi_init",
                       reason,
                       json_pack ("{s:f s:i s:s s:b}",
                                  "timeout_s",
                                  timeout,
                                  "connected",
                                  pb->nconnected,
                                  "setting",
                                  derived ? "start-timeout" : "init-timeout",
                                  "in_mpi_init",
                                  pb->connected[victim]));
}

static int pmix_monitor (elastic_agent_t *agent, void *ctx)
{
    struct pmixb *pb = ctx;
    int rc;

    drain_events (pb);
    rc = local_backend.monitor_workers (agent, pb->local);
    check_init_timeout (pb);
    end_retired (pb, 0);
    grow_run (pb);
    grow_check (pb);
#if HAVE_SODIUM
    /* a member that joined the running job ends with it */
    if (agent_spec (agent)->hosting &&
        (pb->fenced || pmixhost_mesh_job_ending (pb->tp) || !pb->tp))
        agent_hosting_ends (agent);
#endif
    return rc;
}

static int pmix_stop (elastic_agent_t *agent, void *ctx, struct elastic_agent_stop *req)
{
    struct pmixb *pb = ctx;
    struct elastic_agent_stop lreq = *req;
    int rc;

    /* MPI ranks left behind by a death nobody announced to them (group
     * policy, inside MPI_Init, a watchdog's kill) wait in MPI calls that
     * will never return, so a handled SIGTERM (libelastic's) would only
     * cost --shutdown-timeout: they are killed, unless --stop-signal says
     * otherwise.  Ranks that exit on their own (76) get the stop signal. */
    if ((req->flags & ELASTIC_AGENT_STOP_FAILURE) && pb->stuck &&
        !elastic_agent_spec_get (agent_spec (agent), "stop-signal")) {
        log_info ("killing the ranks left waiting for a dead rank");
        lreq.signum = SIGKILL;
    }
    drain_events (pb);
    if (pb->job) {
        pmixhost_job_stop (pb->job);
        /* only ranks that connected can have made MPI's segments (reading
         * the maps of a process with thousands of mappings, as a PyTorch
         * worker, costs milliseconds each) */
        if (pb->nconnected > 0)
            shm_sample (pb);
    }
    /* ranks that connected share the namespace (and its /dev/shm) with
     * the server until they are gone: wait for them; programs that never
     * connected (not MPI) may die in the background */
    end_retired (pb, 0);
    local_allow_detach (pb->local, pb->nconnected == 0 && !pb->retired);
    rc = local_backend.stop_workers (agent, pb->local, &lreq);
    req->detached = lreq.detached;
    local_allow_detach (pb->local, 1);
    if (req->detached > 0 && pb->job) {
        /* a restart that does not wait: neither does the namespace, which
         * goes once its ranks are reaped (pmix_monitor) */
        drain_events (pb);
        pb->retired = pb->job;
        pb->retired_attempt = agent_attempt (agent);
        pb->job = NULL;
        pb->nshm_prefix = 0;
    } else
        end_job (pb);
    return rc;
}

static void pmix_shutdown (elastic_agent_t *agent, void *ctx, int signum, double timeout)
{
    struct pmixb *pb = ctx;

    if (pb->job) {
        pmixhost_job_stop (pb->job);
        if (pb->nconnected > 0)
            shm_sample (pb);
    }
    /* the workers go, then the guardian: end the namespace in between so
     * that its segments are removed here and forgotten there */
    local_backend.stop_workers (
        agent,
        pb->local,
        &(struct elastic_agent_stop){.signum = signum, .timeout = timeout});
    end_job (pb);
#if HAVE_SODIUM
    if (pb->tp)
        mesh_finish (pb);
#endif
    if (pb->guarded) {
        guardian_remove_dir (local_guardian (pb->local), pmixhost_dir (pb->h));
        pb->guarded = 0;
    }
    local_backend.shutdown (agent, pb->local, signum, timeout);
    stop_server (pb);
}

static void pmix_child_event (elastic_agent_t *agent, void *ctx)
{
    struct pmixb *pb = ctx;

    local_backend.child_event (agent, pb->local);
}

static void pmix_destroy (void *ctx)
{
    struct pmixb *pb = ctx;

    if (!pb)
        return;
    if (pb->h)
        stop_server (pb);
    if (pb->local)
        local_backend.destroy (pb->local);
    if (pb->mesh_pipe[0] >= 0) {
        close (pb->mesh_pipe[0]);
        close (pb->mesh_pipe[1]);
    }
    while (pb->news) {
        struct mesh_news *n = pb->news;
        pb->news = n->next;
        free (n->data);
        free (n);
    }
    pthread_mutex_destroy (&pb->news_lock);
    grow_free (pb);
    free (pb->slot_owner);
    free (pb->connected);
    free (pb);
}

void *pmix_backend_create (elastic_agent_t *agent, elastic_error_t *err)
{
    struct pmixb *pb;
    struct local_wireup wu = {
        .env = hook_env,
        .drop = hook_drop,
        .started = hook_started,
        .reaped = hook_reaped,
        .close_fds = 1,
        .ignore_sigpipe = 1,
        .drained = hook_drained,
    };

    const struct elastic_agent_spec *spec = agent_spec (agent);
    int nw = elastic_agent_worker_count (agent);
    /* slots: the workers', or a joined member's room (meshjob.h) */
    int nslots = spec->hosting && spec->mesh ? spec->mesh->free_slots : nw;

    if (!(pb = calloc (1, sizeof (*pb))) ||
        !(pb->connected = calloc ((size_t)nw + 1, sizeof (*pb->connected))) ||
        !(pb->slot_owner = calloc ((size_t)nslots + 1, sizeof (*pb->slot_owner)))) {
        errprintf (err, "out of memory");
        if (pb)
            free (pb->connected);
        free (pb);
        return NULL;
    }
    pb->mesh_pipe[0] = pb->mesh_pipe[1] = -1;
    pb->last_capacity = -1;
    pthread_mutex_init (&pb->news_lock, NULL);
    pb->news_tail = &pb->news;
    if (!(pb->local = local_backend_create (agent, err))) {
        pmix_destroy (pb);
        return NULL;
    }
    pb->agent = agent;
    pb->nranks = nw;
    pb->nslots = nslots > nw ? nslots : nw;
    pb->in_place = spec_restart_policy (agent_spec (agent)) == RESTART_IN_PLACE;
#if HAVE_SODIUM
    if (agent_spec (agent)->mesh) {
        const struct jobmap *m = agent_spec (agent)->mesh->map;
        pb->map = m;
        pb->rank_base = m->node_id >= 0 ? m->node[m->node_id].ranks[0] : m->world_size;
        pb->self = m->node_id >= 0 ? m->node_id : (int)agent_spec (agent)->mesh->member;
    }
#endif
    wu.arg = pb;
    local_set_wireup (pb->local, &wu);
    return pb;
}

const struct elastic_agent_backend pmix_backend = {
    .abi = ELASTIC_AGENT_BACKEND_ABI,
    .name = "pmix",
    .start_workers = pmix_start,
    .monitor_workers = pmix_monitor,
    .stop_workers = pmix_stop,
    .shutdown = pmix_shutdown,
    .child_event = pmix_child_event,
    .destroy = pmix_destroy,
};
