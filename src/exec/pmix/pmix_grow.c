/* pmix_grow.c - MPI_Comm_spawn under the hosted PMIx server: new processes
 * into the slots of the ranks a job lost in place
 *
 * The capacity is the --nproc-per-node slots minus the live workers: a
 * worker that exited (lost in place, or done) frees its slot.  It is
 * offered only where the hosted server can serve a spawn: --restart-policy
 * in-place, one node (not the mesh), MPI_Init done, no spawn on its way,
 * nothing stopping; it is 0 otherwise, and written into every live
 * worker's heartbeat file (heartbeat.h, version 3) whenever it changes.
 *
 * A request within the capacity gets a namespace of its own (the next
 * "elastic.<run id>.<n>", PMIX_SPAWNED, PMIX_PARENT_ID), one worker record
 * per child (agent_worker_add: the global ranks after every rank started
 * so far, the local rank of the slot it takes), and each child is started
 * by the local backend like any worker (process group, output with its
 * rank's prefix, the slot's binding, the PMIx variables plus the app's
 * own, OMPI_PARENT_PORT among them, in PMIX_WDIR or the agent's
 * directory).  The spawn is pending until the requestor reads what a
 * child published (PMIXHOST_EV_SPAWN_JOINED); a child that dies before
 * that, or --spawn-timeout passing, fails it: the requestor's lookup
 * fails at once (MPI_Comm_spawn returns an error) and its other children
 * are killed.  From then on a spawned worker is a worker like the others:
 * its exit is judged by the hosted server's verdict and the core's rules
 * (lost in place, finished, MPI_Abort).
 *
 * In a mesh (several nodes, issue #15) the spawn may land on another node:
 *   room       each member says how many of its slots are free whenever
 *              that changes (MESH_BCAST_ROOM: a JSON object, numbered so a
 *              late one never overrides a newer); the capacity written
 *              into the heartbeat files is the most any live member has
 *              (a spawn's children all go to one node, so that their
 *              namespace's MPI_Init fences are that node's alone), 0 while
 *              a spawn is on its way anywhere or where this member could
 *              not serve one;
 *   placement  the requestor's member puts the children on the member
 *              with the most free slots (itself on a tie), registers the
 *              namespace and floods it (MESH_BCAST_SPAWN: node, size,
 *              first global rank, parent, program, arguments,
 *              environment, directory); every member registers it (ranks
 *              on another node: pmixhost_job_opts.remote_ranks) so that its
 *              ranks can reach the children (direct modex, job data,
 *              failures), and the chosen member starts them into its free
 *              slots;
 *   the end    the requestor's member decides: a child published
 *              (published data is handed to every member) or the spawn
 *              failed (out of time, a child died: the chosen member
 *              reports it); it floods MESH_BCAST_SPAWN_END, on which the
 *              chosen member kills the children of a failed spawn.
 *              A member lost with the children fails a pending spawn like
 *              a dead child; the requestor's member lost: its spawn's
 *              children find no parents and end by their own join limit.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/log.h"
#include "exec/eventlog.h"
#include "exec/local.h"
#include "exec/spec.h"
#include "exec/util.h"
#include "pmix_backend_impl.h"
#if HAVE_SODIUM
#include "exec/growmsg.h"
#include "exec/jobmap.h"
#include "exec/mesh/mesh.h"
#include "exec/meshjob.h"
#include "exec/mesh/proto.h"
#include "pmix_transport_mesh.h"
#endif

struct bspawn {
    struct bspawn *next;
    struct pmixhost_spawn *sp; /* the request (NULL: it came through the mesh) */
    struct pmixhost_job *job;  /* the children's namespace (NULL: none made) */
    int k;
    int *index;  /* worker index of child rank r (-1: not added) */
    char ***env; /* child r's variables: PMIx's, then the app's */
    int state;   /* enum pmixhost_spawn_state, as this side saw it */
    double t_start;
    double deadline;
    /* the mesh: the member the children run on (-1: no mesh), the
     * requestor's member, the global rank of child 0, and the request as
     * it came through the mesh (sp NULL) */
    int node;
    int origin;
    int base;
    char **argv, **app_env, *wdir;
    char requestor[300];
    /* the namespace's number and its parent (told again to a newcomer) */
    int attempt;
    char pns[256]; /* (growmsg.h's GROWMSG_NS_MAX + 1) */
    int prank;
};

static char *const *bs_argv (struct bspawn *bs)
{
    return bs->sp ? pmixhost_spawn_request (bs->sp)->argv : bs->argv;
}

static char **bs_app_env (struct bspawn *bs)
{
    return bs->sp ? pmixhost_spawn_request (bs->sp)->env : bs->app_env;
}

static const char *bs_wdir (struct bspawn *bs)
{
    return bs->sp ? pmixhost_spawn_request (bs->sp)->wdir : bs->wdir;
}

static const char *bs_requestor (struct bspawn *bs)
{
    return bs->sp ? pmixhost_spawn_request (bs->sp)->requestor : bs->requestor;
}

int grow_is_spawned (struct pmixb *pb, int i)
{
    return i >= pb->nranks && i - pb->nranks < pb->nextra;
}

static struct bspawn *spawn_of (struct pmixb *pb, int i, int *r)
{
    if (!grow_is_spawned (pb, i))
        return NULL;
    *r = pb->extra_rank[i - pb->nranks];
    return pb->extra_of[i - pb->nranks];
}

static void strv_free (char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free (v[i]);
    free (v);
}

/* ---- capacity ------------------------------------------------------------------- */

static int slot_free (struct pmixb *pb, int s)
{
    const struct worker *w;

    if (pb->slot_owner[s] < 0)
        return 1; /* a joined member's slot, never used */
    w = agent_worker (pb->agent, pb->slot_owner[s]);

    return !w || w->exited || w->pid <= 0;
}

/* Whether this member can serve a spawn now: in place, the job's
 * MPI_Init done, nothing ending. */
static int can_serve (struct pmixb *pb)
{
    return pb->in_place && !pb->disabled && pb->h && pb->job && pb->initialized &&
           !pb->abort_reported && !pb->fenced && !pb->finishing &&
           !agent_stopping (pb->agent);
}

/* This member's free slots (0 where it cannot serve a spawn). */
static int local_room (struct pmixb *pb)
{
    int n = 0;

    if (!can_serve (pb))
        return 0;
    for (int s = 0; s < pb->nslots; s++)
        n += slot_free (pb, s);
    /* and only where the transport reaches a spawned job (pmixb_btl) */
    if (n > 0 && !strstr (pmixb_btl (pb), "tcp")) {
        if (!pb->told_btl)
            log_info ("the slots of ranks lost in place stay empty: a job grows back "
                      "into new processes only with --mpi-btl sm,tcp");
        pb->told_btl = 1;
        return 0;
    }
    return n;
}

/* A spawn on its way (here, or anywhere in the mesh). */
static int spawn_pending (struct pmixb *pb)
{
    for (struct bspawn *bs = pb->spawns; bs; bs = bs->next)
        if (bs->state == PMIXHOST_SPAWN_PENDING)
            return 1;
    return pb->spawning;
}

/* The capacity: this node's free slots, or in a mesh the most any live
 * member has; 0 where no spawn can be served now. */
static int capacity (struct pmixb *pb)
{
    int c;

    if (spawn_pending (pb) || !can_serve (pb))
        return 0;
    c = local_room (pb);
    for (int m = 0; pb->map && pb->room && m < pb->nmembers; m++)
        if (m != pb->self && pb->room[m] > c)
            c = pb->room[m];
    return c;
}

#if HAVE_SODIUM
/* The per-member room table (a mesh only).  Returns 0 or -1. */
static int room_alloc (struct pmixb *pb)
{
    int n = (int)pmixhost_mesh_nmembers (pb->tp);

    if (pb->room)
        return 0;
    if (n < pb->map->nnodes)
        n = pb->map->nnodes;
    if (!(pb->room = calloc ((size_t)n, sizeof (*pb->room))) ||
        !(pb->room_seq = calloc ((size_t)n, sizeof (*pb->room_seq))) ||
        !(pb->member_name = calloc ((size_t)n, sizeof (*pb->member_name))) ||
        !(pb->member_ranks = calloc ((size_t)n, sizeof (*pb->member_ranks)))) {
        free (pb->room);
        free (pb->room_seq);
        free (pb->member_name);
        pb->room = NULL;
        pb->room_seq = NULL;
        pb->member_name = NULL;
        return -1;
    }
    pb->nmembers = n;
    if (pb->self >= pb->map->nnodes && pb->self < n) { /* joined: our own name */
        const char *me = meshjob_self_name (agent_spec (pb->agent)->mesh);
        pb->member_name[pb->self] = strdup (me[0] ? me : "?");
    }
    pb->room_said = -1;
    if (pb->next_global < pb->map->world_size)
        pb->next_global = pb->map->world_size;
    return 0;
}

/* A spawn reached its parents: count its ranks on the member that runs
 * them (the job's summary counts them with that member if it is lost). */
static void spawn_reached (struct pmixb *pb, struct bspawn *bs)
{
    bs->state = PMIXHOST_SPAWN_JOINED;
    if (pb->member_ranks && bs->node >= 0 && bs->node < pb->nmembers)
        pb->member_ranks[bs->node] += bs->k;
}

/* Tell the other members this one's room when it changed. */
static void say_room (struct pmixb *pb)
{
    int r = local_room (pb);
    char *msg;

    if (!pb->tp || room_alloc (pb) < 0 || r == pb->room_said)
        return;
    pb->room[pb->self] = r;
    /* a joined member names its node: the others' map does not have it */
    msg = growmsg_room_encode (
        ++pb->room_next,
        r,
        pb->self >= pb->map->nnodes ? grow_member_name (pb, pb->self) : NULL);
    if (msg &&
        pmixhost_mesh_broadcast (pb->tp, MESH_BCAST_ROOM, msg, strlen (msg)) == 0) {
        log_debug ("mesh: told the others %d free slot%s here", r, r == 1 ? "" : "s");
        pb->room_said = r;
    }
    free (msg);
}
#endif

static void publish_capacity (struct pmixb *pb)
{
    int c;

#if HAVE_SODIUM
    if (pb->map)
        say_room (pb);
#endif
    c = capacity (pb);
    if (c != pb->last_capacity) {
        log_debug ("spawn capacity %d", c);
        pb->last_capacity = c;
    }
    agent_capacity_set (pb->agent, c);
}

/* ---- requests ------------------------------------------------------------------- */

void grow_queue (struct pmixb *pb, struct pmixhost_spawn *sp)
{
    struct bspawn *bs = calloc (1, sizeof (*bs)), **pp;

    if (!bs) {
        pmixhost_spawn_refuse (sp, 0);
        pmixhost_spawn_release (sp);
        return;
    }
    bs->sp = sp;
    for (pp = &pb->queue; *pp; pp = &(*pp)->next)
        ;
    *pp = bs;
}

static void bspawn_free (struct bspawn *bs)
{
    strv_free (bs->argv);
    strv_free (bs->app_env);
    free (bs->wdir);
    for (int r = 0; bs->env && r < bs->k; r++) {
        for (size_t j = 0; bs->env[r] && bs->env[r][j]; j++)
            free (bs->env[r][j]);
        free (bs->env[r]);
    }
    free (bs->env);
    free (bs->index);
    free (bs);
}

/* Remember that worker index i is child r of bs.  Returns 0 or -1. */
static int map_extra (struct pmixb *pb, int i, struct bspawn *bs, int r)
{
    int e = i - pb->nranks;

    if (e != pb->nextra)
        return -1;
    if (pb->nextra == pb->extra_cap) {
        int cap = pb->extra_cap * 2 + 4;
        struct bspawn **of = realloc (pb->extra_of, (size_t)cap * sizeof (*of));
        if (!of)
            return -1;
        pb->extra_of = of;
        int *rk = realloc (pb->extra_rank, (size_t)cap * sizeof (*rk));
        if (!rk)
            return -1;
        pb->extra_rank = rk;
        pb->extra_cap = cap;
    }
    pb->extra_of[e] = bs;
    pb->extra_rank[e] = r;
    pb->nextra++;
    return 0;
}

/* Child r's variables: the namespace's (PMIx, Open MPI's MCA settings),
 * then the app's entries (OMPI_PARENT_PORT), which win. */
static char **child_env (struct pmixhost_job *job, int r, char **app)
{
    char *const *base = pmixhost_job_env (job, r);
    size_t n = 0, m = 0, k = 0;
    char **v;

    while (base && base[n])
        n++;
    while (app && app[m])
        m++;
    if (!(v = calloc (n + m + 1, sizeof (char *))))
        return NULL;
    for (size_t j = 0; j < n + m; j++) {
        const char *e = j < n ? base[j] : app[j - n];
        if (!(v[k++] = strdup (e))) {
            for (size_t q = 0; q < k; q++)
                free (v[q]);
            free (v);
            return NULL;
        }
    }
    return v;
}

/* "3, 5" of up to n ints (or the ranks of workers idx). */
static void int_list (char *buf, size_t size, const int *v, int n)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && len + 16 < size; i++)
        len += (size_t)snprintf (buf + len, size - len, "%s%d", i ? ", " : "", v[i]);
}

static void refuse (struct pmixb *pb, struct bspawn *bs, int cap, const char *why)
{
    const struct pmixhost_spawn_req *req = pmixhost_spawn_request (bs->sp);
    int live = 0;

    for (int i = 0; i < elastic_agent_worker_count (pb->agent); i++) {
        const struct worker *w = agent_worker (pb->agent, i);
        live += w->pid > 0 && !w->exited;
    }
    log_warn ("MPI_Comm_spawn of %d rank%s by %s refused: %s (capacity %d: %d slots, %d "
              "live workers%s)",
              req->nprocs,
              req->nprocs == 1 ? "" : "s",
              req->requestor,
              why,
              cap,
              pb->nranks,
              live,
              pb->spawning ? ", a spawn on its way" : "");
    eventlog_emit (agent_eventlog (pb->agent),
                   "workers_spawn_refused",
                   json_pack ("{s:i s:i s:s s:s}",
                              "ranks",
                              req->nprocs,
                              "capacity",
                              cap,
                              "requestor",
                              req->requestor,
                              "reason",
                              why));
    pmixhost_spawn_refuse (bs->sp, cap < req->nprocs);
    pmixhost_spawn_release (bs->sp);
    bspawn_free (bs);
}

/* Register the children's namespace (attempt: its number; parent: the
 * requestor where the request came through the mesh).  Returns 0, or -1
 * (logged). */
static int
make_job (struct pmixb *pb, struct bspawn *bs, int attempt, const char *pns, int prank)
{
    struct pmixhost_job_opts jo = {0};
    struct pmixhost_job_info ji = {0};
    elastic_error_t err = {{0}};

    if (pb->job)
        pmixhost_job_info (pb->job, &ji);
    jo.run_id = pb->run_id;
    jo.attempt = attempt;
    jo.nranks = bs->k;
    jo.btl = pmixb_btl (pb);
    jo.oversubscribed = ji.oversubscribed;
    jo.spawned_by = bs->sp;
    if (bs->node >= 0) {
        jo.spawn_node = bs->node;
        jo.spawn_host = grow_member_name (pb, bs->node);
        jo.remote_ranks = bs->node != pb->self;
        if (!bs->sp) {
            jo.parent_nspace = pns;
            jo.parent_rank = prank;
            jo.family = pb->job;
        }
    }
    if (!(bs->job = pmixhost_job_create (pb->h, &jo, &err))) {
        log_err ("MPI_Comm_spawn: hosted PMIx server: %s", err.text);
        return -1;
    }
    bs->attempt = attempt;
    if (bs->sp) {
        const struct pmixhost_spawn_req *req = pmixhost_spawn_request (bs->sp);
        pns = req->parent ? pmixhost_job_nspace (req->parent) : "";
        prank = req->parent_rank;
    }
    snprintf (bs->pns, sizeof (bs->pns), "%s", pns ? pns : "");
    bs->prank = prank;
    if (pb->njobs <= attempt)
        pb->njobs = attempt + 1;
#if HAVE_SODIUM
    if (bs->node >= 0 && pmixhost_mesh_add_spawn (pb->tp, bs->job, bs->node, bs->k) < 0) {
        log_err ("MPI_Comm_spawn: out of memory");
        pmixhost_job_destroy (bs->job);
        bs->job = NULL;
        return -1;
    }
#endif
    return 0;
}

/* Start child r into slot s.  Returns its worker index, or -1 (logged). */
static int start_child (struct pmixb *pb, struct bspawn *bs, int r, int s)
{
    elastic_agent_t *agent = pb->agent;
    elastic_error_t err = {{0}};
    int i;

    if (!(bs->env[r] = child_env (bs->job, r, bs_app_env (bs)))) {
        log_err ("MPI_Comm_spawn: out of memory");
        return -1;
    }
    if (bs->node >= 0)
        agent_next_rank_at_least (agent, bs->base + r);
    if ((i = agent_worker_add (agent,
                               pb->slot_owner[s] >= 0
                                   ? agent_worker (agent, pb->slot_owner[s])->local_rank
                                   : s,
                               bs_argv (bs),
                               &err)) < 0) {
        log_err ("MPI_Comm_spawn: %s", err.text);
        return -1;
    }
    if (map_extra (pb, i, bs, r) < 0) {
        log_err ("MPI_Comm_spawn: out of memory");
        elastic_agent_worker_failed (agent, i, 127, 0, "spawned: out of memory");
        return -1;
    }
    bs->index[r] = i;
    pb->slot_owner[s] = i;
    if (local_start_extra (pb->local, i, bs_wdir (bs), &err) != ELASTIC_OK) {
        log_err ("MPI_Comm_spawn: %s", err.text);
        elastic_agent_worker_lost (agent, i, 127, 0, "spawned: could not be started");
        return -1;
    }
    return i;
}

static void
kill_children (struct pmixb *pb, struct bspawn *bs, const char *kind, const char *why)
{
    for (int r = 0; r < bs->k; r++) {
        const struct worker *w;
        if (bs->index[r] < 0 || !(w = agent_worker (pb->agent, bs->index[r])) ||
            w->pid <= 0 || w->exited)
            continue;
        agent_worker_kill (pb->agent, bs->index[r], SIGKILL, kind, why, NULL);
    }
}

#if HAVE_SODIUM
/* Flood a spawn's end: joined (ok) or failed (why). */
static void tell_end (struct pmixb *pb, struct bspawn *bs, int ok, const char *why)
{
    char *msg;

    if (bs->node < 0 || !bs->job)
        return;
    msg = growmsg_end_encode (pmixhost_job_nspace (bs->job), ok, why);
    if (!msg ||
        pmixhost_mesh_broadcast (pb->tp, MESH_BCAST_SPAWN_END, msg, strlen (msg)) < 0)
        log_warn ("mesh: could not tell the other members that the spawn of %s %s",
                  pmixhost_job_nspace (bs->job),
                  ok ? "joined" : "failed");
    free (msg);
}
#endif

/* A pending spawn failed: MPI_Comm_spawn returns an error (where it was
 * asked for), its children here are killed, and (tell) the other members
 * of a mesh learn it. */
static void spawn_failed (
    struct pmixb *pb, struct bspawn *bs, int timed_out, const char *why, int tell)
{
    char ranks[256];
    int rk[64] = {0}, n = 0;

    if (bs->state != PMIXHOST_SPAWN_PENDING)
        return;
    bs->state = PMIXHOST_SPAWN_FAILED;
    if (!bs->sp && bs->node >= 0 && bs->node != pb->self) {
        publish_capacity (pb); /* neither asked nor started here */
        return;
    }
    if (bs->sp) {
        pb->spawning = 0;
        pmixhost_spawn_fail (bs->sp, timed_out);
    }
    for (int r = 0; r < bs->k && n < 64; r++)
        if (bs->index[r] >= 0)
            rk[n++] = agent_worker (pb->agent, bs->index[r])->rank;
    if (n == 0 && bs->node >= 0)
        for (int r = 0; r < bs->k && n < 64; r++)
            rk[n++] = bs->base + r;
    int_list (ranks, sizeof (ranks), rk, n);
    log_warn ("spawn of rank%s %s for %s failed: %s",
              n == 1 ? "" : "s",
              ranks,
              bs_requestor (bs),
              why);
    eventlog_emit (agent_eventlog (pb->agent),
                   "workers_spawn_failed",
                   json_pack ("{s:s s:s s:b s:f}",
                              "ranks",
                              ranks,
                              "reason",
                              why,
                              "timed_out",
                              timed_out,
                              "after_ms",
                              (mono_now () - bs->t_start) * 1e3));
    kill_children (pb, bs, "spawn", why);
#if HAVE_SODIUM
    if (tell)
        tell_end (pb, bs, 0, why);
#endif
    publish_capacity (pb);
}

/* Start the children of bs into this node's free slots, log and record
 * it.  Returns how many started (bs->k: all). */
static int launch_here (struct pmixb *pb, struct bspawn *bs)
{
    int k = bs->k, started = 0;
    int *slots = calloc ((size_t)k, sizeof (int)),
        *old = calloc ((size_t)k, sizeof (int));
    int *ranks = calloc ((size_t)k, sizeof (int)),
        *pids = calloc ((size_t)k, sizeof (int));
    char l_ranks[256], l_old[256];
    json_t *jr, *jp, *js, *jo;
    int n = 0;

    if (!slots || !old || !ranks || !pids)
        goto out;
    for (int s = 0; s < pb->nslots && n < k; s++) {
        if (slot_free (pb, s)) {
            old[n] = pb->slot_owner[s] >= 0
                         ? agent_worker (pb->agent, pb->slot_owner[s])->rank
                         : -1;
            slots[n++] = s;
        }
    }
    for (int r = 0; r < n; r++) {
        int i = start_child (pb, bs, r, slots[r]);
        if (i < 0)
            break;
        ranks[r] = agent_worker (pb->agent, i)->rank;
        pids[r] = (int)agent_worker (pb->agent, i)->pid;
        started++;
    }
    if (started < k)
        goto out;
    int_list (l_ranks, sizeof (l_ranks), ranks, started);
    int_list (l_old, sizeof (l_old), old, k);
    if (old[0] < 0) /* a joined member's slots */
        log_info ("spawning %d rank%s (%s) into this member's free slots for %s",
                  k,
                  k == 1 ? "" : "s",
                  l_ranks,
                  bs_requestor (bs));
    else
        log_info ("spawning %d rank%s (%s) into the slots of rank%s %s for %s",
                  k,
                  k == 1 ? "" : "s",
                  l_ranks,
                  k == 1 ? "" : "s",
                  l_old,
                  bs_requestor (bs));
    jr = json_array ();
    jp = json_array ();
    js = json_array ();
    jo = json_array ();
    for (int r = 0; r < k; r++) {
        json_array_append_new (jr, json_integer (ranks[r]));
        json_array_append_new (jp, json_integer (pids[r]));
        json_array_append_new (
            js, json_integer (agent_worker (pb->agent, bs->index[r])->local_rank));
        json_array_append_new (jo, json_integer (old[r]));
    }
    eventlog_emit (agent_eventlog (pb->agent),
                   "workers_spawned",
                   json_pack ("{s:i s:o s:o s:o s:o s:s s:s s:s}",
                              "attempt",
                              agent_attempt (pb->agent),
                              "ranks",
                              jr,
                              "pids",
                              jp,
                              "slots",
                              js,
                              "slots_of",
                              jo,
                              "requestor",
                              bs_requestor (bs),
                              "nspace",
                              pmixhost_job_nspace (bs->job),
                              "command",
                              bs_argv (bs)[0]));
out:
    free (slots);
    free (old);
    free (ranks);
    free (pids);
    return started;
}

/* Set bs up for k children.  Returns 0 or -1 (out of memory). */
static int bspawn_size (struct bspawn *bs, int k)
{
    bs->k = k;
    if (!(bs->index = malloc ((size_t)k * sizeof (int))) ||
        !(bs->env = calloc ((size_t)k, sizeof (char **))))
        return -1;
    for (int r = 0; r < k; r++)
        bs->index[r] = -1;
    return 0;
}

/* A request of this node's ranks is on its way (its namespace made): the
 * capacity is 0 until it joins or fails, which --spawn-timeout bounds. */
static void pending (struct pmixb *pb, struct bspawn *bs)
{
    const struct elastic_agent_spec *spec = agent_spec (pb->agent);

    bs->t_start = mono_now ();
    bs->deadline = bs->t_start + (spec->spawn_timeout > 0 ? spec->spawn_timeout : 600.0);
    bs->state = PMIXHOST_SPAWN_PENDING;
    bs->next = pb->spawns;
    pb->spawns = bs;
    pb->spawning = 1;
    publish_capacity (pb);
    pmixhost_spawn_launched (bs->sp, bs->job);
}

#if HAVE_SODIUM
static void mesh_spawn_one (struct pmixb *pb, struct bspawn *bs);
#endif

static void spawn_one (struct pmixb *pb, struct bspawn *bs)
{
    const struct pmixhost_spawn_req *req = pmixhost_spawn_request (bs->sp);
    int cap = capacity (pb), k = req->nprocs;

    bs->node = -1;
    if (!pb->job || req->parent == NULL) {
        refuse (pb, bs, 0, "the job is ending");
        return;
    }
#if HAVE_SODIUM
    if (pb->map) {
        mesh_spawn_one (pb, bs);
        return;
    }
#endif
    if (k > cap) {
        refuse (pb,
                bs,
                cap,
                cap == 0 && pb->spawning    ? "a spawn is on its way"
                : cap == 0 && !pb->in_place ? "spawning needs --restart-policy in-place"
                                            : "more ranks than free slots");
        return;
    }
    if (bspawn_size (bs, k) < 0) {
        refuse (pb, bs, cap, "out of memory");
        return;
    }
    if (make_job (pb, bs, pb->njobs, NULL, 0) < 0) {
        refuse (pb, bs, cap, "the namespace could not be registered");
        return;
    }
    pending (pb, bs);
    if (launch_here (pb, bs) < k)
        spawn_failed (pb, bs, 0, "a process could not be started", 1);
}

#if HAVE_SODIUM
/* ---- the mesh --------------------------------------------------------------------- */

/* The requestor's side: place the children on the member with the most
 * free slots, register their namespace, flood it, start them if here. */
static void mesh_spawn_one (struct pmixb *pb, struct bspawn *bs)
{
    const struct pmixhost_spawn_req *req = pmixhost_spawn_request (bs->sp);
    int k = req->nprocs, self = pb->self, best = self, most, attempt, pend;
    uint8_t *live = NULL;
    struct growmsg_spawn gm = {0};
    char *msg = NULL;

    if (room_alloc (pb) < 0 || !(live = calloc ((size_t)pb->nmembers, 1))) {
        refuse (pb, bs, 0, "out of memory");
        return;
    }
    most = local_room (pb);
    mesh_get_live (pmixhost_mesh_get (pb->tp), live, (uint32_t)pb->nmembers);
    for (int n = 0; n < pb->nmembers; n++)
        if (n != self && live[n] && pb->room[n] > most)
            most = pb->room[n], best = n;
    free (live);
    if ((pend = spawn_pending (pb)) || !can_serve (pb) || most < k) {
        refuse (pb,
                bs,
                pend ? 0 : most,
                pend              ? "a spawn is on its way"
                : !pb->in_place   ? "spawning needs --restart-policy in-place"
                : !can_serve (pb) ? "the job is not running here"
                                  : "more ranks than free slots on any one node");
        return;
    }
    bs->node = best;
    bs->origin = self;
    bs->base = pb->next_global;
    attempt = pb->njobs;
    if (bspawn_size (bs, k) < 0) {
        refuse (pb, bs, most, "out of memory");
        return;
    }
    gm.attempt = attempt;
    gm.node = best;
    gm.k = k;
    gm.base = bs->base;
    snprintf (gm.pns, sizeof (gm.pns), "%s", pmixhost_job_nspace (req->parent));
    gm.prank = req->parent_rank;
    gm.argv = req->argv;
    gm.env = req->env;
    snprintf (gm.requestor, sizeof (gm.requestor), "%s", req->requestor);
    gm.wdir = req->wdir;
    if (!(msg = growmsg_spawn_encode (&gm))) {
        refuse (pb, bs, most, "out of memory");
        return;
    }
    if (make_job (pb, bs, attempt, NULL, 0) < 0) {
        free (msg);
        refuse (pb, bs, most, "the namespace could not be registered");
        return;
    }
    pb->next_global += k;
    pending (pb, bs);
    if (pmixhost_mesh_broadcast (pb->tp, MESH_BCAST_SPAWN, msg, strlen (msg)) < 0) {
        free (msg);
        spawn_failed (pb, bs, 0, "the mesh could not carry the request (it stopped)", 0);
        return;
    }
    free (msg);
    if (best != self) {
        log_info (
            "spawning %d rank%s (%d..%d) on node %s (member %d, %d free slot%s) for "
            "%s",
            k,
            k == 1 ? "" : "s",
            bs->base,
            bs->base + k - 1,
            grow_member_name (pb, best),
            best,
            most,
            most == 1 ? "" : "s",
            req->requestor);
        eventlog_emit (agent_eventlog (pb->agent),
                       "workers_spawn_placed",
                       json_pack ("{s:i s:s s:i s:i s:s s:s}",
                                  "member",
                                  best,
                                  "node",
                                  grow_member_name (pb, best),
                                  "ranks",
                                  k,
                                  "first_rank",
                                  bs->base,
                                  "nspace",
                                  pmixhost_job_nspace (bs->job),
                                  "requestor",
                                  req->requestor));
    } else if (launch_here (pb, bs) < k)
        spawn_failed (pb, bs, 0, "a process could not be started", 1);
}

/* Another member's spawn: register its namespace; start it if it is
 * placed here. */
static struct bspawn *find_nspace (struct pmixb *pb, const char *nspace);
static void tell_running (struct pmixb *pb, int newcomer);

static void on_spawn (struct pmixb *pb, int origin, const void *data, size_t len)
{
    struct growmsg_spawn gm;
    struct bspawn *bs;
    char why[160], ns[GROWMSG_NS_MAX + 32];
    int node, k;

    if (room_alloc (pb) < 0 ||
        growmsg_spawn_decode (data, len, pb->nmembers, &gm, why, sizeof (why)) < 0) {
        log_warn ("mesh: member %d sent a spawn this member cannot read (%s)",
                  origin,
                  pb->room ? why : "out of memory");
        return;
    }
    node = gm.node;
    k = gm.k;
    /* told again for a member admitted since (grow_member_admitted): the
     * others know it already */
    snprintf (ns, sizeof (ns), "elastic.%s.%d", pb->run_id, gm.attempt);
    if (gm.joined && (find_nspace (pb, ns) || node == pb->self)) {
        growmsg_spawn_clear (&gm);
        return;
    }
    if (!(bs = calloc (1, sizeof (*bs))) || bspawn_size (bs, k) < 0) {
        log_err ("mesh: a spawn from member %d: out of memory", origin);
        if (bs)
            bspawn_free (bs);
        growmsg_spawn_clear (&gm);
        return;
    }
    bs->argv = gm.argv; /* taken */
    bs->app_env = gm.env;
    bs->wdir = gm.wdir;
    bs->node = node;
    bs->origin = origin;
    bs->base = gm.base;
    snprintf (bs->requestor, sizeof (bs->requestor), "%s", gm.requestor);
    if (pb->next_global < gm.base + k)
        pb->next_global = gm.base + k;
    bs->t_start = mono_now ();
    bs->state = PMIXHOST_SPAWN_PENDING;
    bs->next = pb->spawns;
    pb->spawns = bs;
    if (make_job (pb, bs, gm.attempt, gm.pns, gm.prank) < 0) {
        /* (the requestor's --spawn-timeout ends it: no namespace to name) */
        if (node == pb->self)
            spawn_failed (pb, bs, 0, "the namespace could not be registered", 1);
        bs->state = PMIXHOST_SPAWN_FAILED;
        publish_capacity (pb);
        return;
    }
    if (gm.joined) { /* running before this member joined */
        spawn_reached (pb, bs);
        log_debug ("mesh: ranks %d..%d (%s) run on node %s",
                   bs->base,
                   bs->base + k - 1,
                   pmixhost_job_nspace (bs->job),
                   grow_member_name (pb, node));
        return;
    }
    if (node != pb->self) {
        log_debug ("mesh: %s spawns %d rank%s on node %s",
                   bs->requestor,
                   k,
                   k == 1 ? "" : "s",
                   grow_member_name (pb, node));
        publish_capacity (pb);
        return;
    }
    if (local_room (pb) < k) {
        snprintf (why,
                  sizeof (why),
                  "node %s has %d free slot%s, not %d",
                  grow_member_name (pb, node),
                  local_room (pb),
                  local_room (pb) == 1 ? "" : "s",
                  k);
        spawn_failed (pb, bs, 0, why, 1);
        return;
    }
    publish_capacity (pb);
    if (launch_here (pb, bs) < k)
        spawn_failed (pb, bs, 0, "a process could not be started", 1);
}

static struct bspawn *find_nspace (struct pmixb *pb, const char *nspace)
{
    for (struct bspawn *bs = pb->spawns; bs; bs = bs->next)
        if (bs->job && !strcmp (pmixhost_job_nspace (bs->job), nspace))
            return bs;
    return NULL;
}

static void on_spawn_end (struct pmixb *pb, int origin, const void *data, size_t len)
{
    char ns[GROWMSG_NS_MAX + 1], failed[256], why[160];
    int ok;
    struct bspawn *bs;

    if (growmsg_end_decode (
            data, len, ns, sizeof (ns), &ok, failed, sizeof (failed), why, sizeof (why)) <
        0) {
        log_warn ("mesh: member %d sent a spawn's end this member cannot read (%s)",
                  origin,
                  why);
        return;
    }
    if (!(bs = find_nspace (pb, ns)) || bs->state != PMIXHOST_SPAWN_PENDING)
        return;
    if (!ok) {
        spawn_failed (pb, bs, 0, failed, 0);
        return;
    }
    spawn_reached (pb, bs);
    if (bs->node == pb->self)
        log_info ("spawned ranks %d..%d reached %s",
                  bs->base,
                  bs->base + bs->k - 1,
                  bs_requestor (bs));
    publish_capacity (pb);
}

static void on_room (struct pmixb *pb, int origin, const void *data, size_t len)
{
    unsigned long long seq;
    int free_slots;
    char why[160], host[GROWMSG_HOST_MAX + 1];
    int first;

    if (room_alloc (pb) < 0 || origin < 0 || origin >= pb->nmembers || origin == pb->self)
        return;
    if (growmsg_room_decode (
            data, len, &seq, &free_slots, host, sizeof (host), why, sizeof (why)) < 0) {
        log_warn ("mesh: member %d sent its room in a form this member cannot read (%s)",
                  origin,
                  why);
        return;
    }
    if (seq <= pb->room_seq[origin])
        return; /* an older saying, overtaken */
    first = pb->room_seq[origin] == 0;
    pb->room_seq[origin] = seq;
    pb->room[origin] = free_slots;
    if (host[0] && origin >= pb->map->nnodes &&
        (!pb->member_name[origin] || strcmp (pb->member_name[origin], host))) {
        char *h = strdup (host);
        if (h) {
            free (pb->member_name[origin]);
            pb->member_name[origin] = h;
        }
    }
    log_debug ("mesh: node %s (member %d) has %d free slot%s",
               grow_member_name (pb, origin),
               origin,
               free_slots,
               free_slots == 1 ? "" : "s");
    if (first && origin >= pb->map->nnodes) /* a joined member, linked now */
        tell_running (pb, origin);
    publish_capacity (pb);
}

void grow_mesh_broadcast (
    struct pmixb *pb, int origin, int kind, const void *data, size_t len)
{
    if (!pb->map)
        return;
    if (kind == MESH_BCAST_ROOM)
        on_room (pb, origin, data, len);
    else if (kind == MESH_BCAST_SPAWN && origin != pb->self)
        on_spawn (pb, origin, data, len);
    else if (kind == MESH_BCAST_SPAWN_END)
        on_spawn_end (pb, origin, data, len);
}

void grow_member_lost (struct pmixb *pb, int member)
{
    char why[160];

    if (!pb->map || room_alloc (pb) < 0 || member < 0 || member >= pb->nmembers)
        return;
    pb->room[member] = 0;
    snprintf (why,
              sizeof (why),
              "node %s (member %d), where its processes ran, was lost",
              grow_member_name (pb, member),
              member);
    for (struct bspawn *bs = pb->spawns; bs; bs = bs->next)
        if (bs->sp && bs->node == member)
            spawn_failed (pb, bs, 0, why, 1);
    /* a spawn whose requestor's member is gone never ends otherwise: its
     * children find no parents (they end by their own join limit) */
    snprintf (why,
              sizeof (why),
              "node %s (member %d), which asked for it, was lost",
              grow_member_name (pb, member),
              member);
    for (struct bspawn *bs = pb->spawns; bs; bs = bs->next)
        if (!bs->sp && bs->origin == member)
            spawn_failed (pb, bs, 0, why, 0);
    publish_capacity (pb);
}

/* Tell again the spawns whose processes run here and reached their
 * parents: a member admitted since (it just said its room for the first
 * time) registers their namespaces, so that the processes the job spawns
 * onto it reach them (direct modex, failures).  The member that runs a
 * spawn's processes tells it: if that member is lost, so are they. */
static void tell_running (struct pmixb *pb, int newcomer)
{
    int told = 0;

    for (struct bspawn *bs = pb->spawns; bs; bs = bs->next) {
        struct growmsg_spawn gm = {0};
        int alive = 0;
        char *msg;

        if (bs->node != pb->self || bs->state != PMIXHOST_SPAWN_JOINED || !bs->job)
            continue;
        for (int r = 0; r < bs->k; r++) {
            const struct worker *w =
                bs->index[r] >= 0 ? agent_worker (pb->agent, bs->index[r]) : NULL;
            alive += w && w->pid > 0 && !w->exited;
        }
        if (!alive || !bs->pns[0])
            continue;
        gm.attempt = bs->attempt;
        gm.node = bs->node;
        gm.k = bs->k;
        gm.base = bs->base;
        snprintf (gm.pns, sizeof (gm.pns), "%s", bs->pns);
        gm.prank = bs->prank;
        gm.argv = (char **)bs_argv (bs);
        gm.env = bs_app_env (bs);
        snprintf (gm.requestor, sizeof (gm.requestor), "%s", bs_requestor (bs));
        gm.wdir = (char *)bs_wdir (bs);
        gm.joined = 1;
        if (!(msg = growmsg_spawn_encode (&gm)) ||
            pmixhost_mesh_broadcast (pb->tp, MESH_BCAST_SPAWN, msg, strlen (msg)) < 0)
            log_warn ("mesh: could not tell member %d of ranks %d..%d (%s)",
                      newcomer,
                      bs->base,
                      bs->base + bs->k - 1,
                      pmixhost_job_nspace (bs->job));
        else
            told++;
        free (msg);
    }
    if (told)
        log_debug ("mesh: told member %d (%s) of %d running spawn%s",
                   newcomer,
                   grow_member_name (pb, newcomer),
                   told,
                   told == 1 ? "" : "s");
}

void grow_member_admitted (struct pmixb *pb, int member, const char *addr)
{
    size_t n;

    if (!pb->map || room_alloc (pb) < 0 || member < pb->map->nnodes ||
        member >= pb->nmembers || pb->member_name[member] || !addr || !addr[0])
        return;
    /* its address until it names its node ("host:port", "[v6]:port") */
    n = strcspn (addr, "]");
    if (addr[0] == '[' && addr[n] == ']')
        pb->member_name[member] = strndup (addr + 1, n - 1);
    else
        pb->member_name[member] = strndup (addr, strcspn (addr, ":"));
}

const char *grow_member_name (struct pmixb *pb, int member)
{
    if (pb->map && member >= 0 && member < pb->map->nnodes)
        return pb->map->node[member].name;
    if (room_alloc (pb) == 0 && member >= 0 && member < pb->nmembers &&
        pb->member_name[member])
        return pb->member_name[member];
    return "?";
}

int grow_member_ranks (struct pmixb *pb, int member)
{
    return pb->member_ranks && member >= 0 && member < pb->nmembers
               ? pb->member_ranks[member]
               : 0;
}

void grow_remote_failed (struct pmixb *pb, const char *nspace, int rank, int signaled)
{
    struct bspawn *bs = find_nspace (pb, nspace);
    char why[200];
    int global = bs ? bs->base + rank : rank;
    const char *node = bs && bs->node >= 0 ? grow_member_name (pb, bs->node) : "?";

    log_info ("mesh: spawned rank %d (%s:%d, node %s) failed; told this node's ranks",
              global,
              nspace,
              rank,
              node);
    eventlog_emit (agent_eventlog (pb->agent),
                   "rank_failed",
                   json_pack ("{s:i s:s s:b s:s}",
                              "rank",
                              global,
                              "node",
                              node,
                              "signaled",
                              signaled,
                              "nspace",
                              nspace));
    if (bs && bs->sp && bs->state == PMIXHOST_SPAWN_PENDING) {
        snprintf (why,
                  sizeof (why),
                  "rank %d on node %s %s before it reached its parents",
                  global,
                  node,
                  signaled ? "was killed" : "ended");
        spawn_failed (pb, bs, 0, why, 1);
    }
}
#else
void grow_mesh_broadcast (
    struct pmixb *pb, int origin, int kind, const void *data, size_t len)
{
}
void grow_member_lost (struct pmixb *pb, int member)
{
}
void grow_remote_failed (struct pmixb *pb, const char *nspace, int rank, int signaled)
{
}
void grow_member_admitted (struct pmixb *pb, int member, const char *addr)
{
}
const char *grow_member_name (struct pmixb *pb, int member)
{
    return "?";
}
int grow_member_ranks (struct pmixb *pb, int member)
{
    return 0;
}
#endif

void grow_finishing (struct pmixb *pb)
{
    pb->finishing = 1;
    publish_capacity (pb);
}

void grow_run (struct pmixb *pb)
{
    struct bspawn *bs;

    while ((bs = pb->queue)) {
        pb->queue = bs->next;
        bs->next = NULL;
        spawn_one (pb, bs);
    }
}

static struct bspawn *find_spawn (struct pmixb *pb, struct pmixhost_spawn *sp)
{
    for (struct bspawn *bs = pb->spawns; bs; bs = bs->next)
        if (bs->sp == sp)
            return bs;
    return NULL;
}

void grow_joined (struct pmixb *pb, struct pmixhost_spawn *sp)
{
    struct bspawn *bs = find_spawn (pb, sp);
    char ranks[256];
    int rk[64] = {0}, n = 0;

    if (!bs || bs->state != PMIXHOST_SPAWN_PENDING)
        return;
    spawn_reached (pb, bs);
    pb->spawning = 0;
    for (int r = 0; r < bs->k && n < 64; r++)
        rk[n++] = bs->index[r] >= 0 ? agent_worker (pb->agent, bs->index[r])->rank
                                    : bs->base + r;
    int_list (ranks, sizeof (ranks), rk, n);
    log_info ("spawned rank%s %s reached %s (%.1f ms after the spawn)",
              n == 1 ? "" : "s",
              ranks,
              pmixhost_spawn_request (sp)->requestor,
              (mono_now () - bs->t_start) * 1e3);
    eventlog_emit (
        agent_eventlog (pb->agent),
        "workers_joined",
        json_pack (
            "{s:s s:f}", "ranks", ranks, "after_ms", (mono_now () - bs->t_start) * 1e3));
#if HAVE_SODIUM
    tell_end (pb, bs, 1, NULL);
#endif
    publish_capacity (pb);
}

void grow_event (struct pmixb *pb, const struct pmixhost_event *ev)
{
    for (struct bspawn *bs = pb->spawns; bs; bs = bs->next) {
        if (bs->job != ev->job || ev->rank < 0 || ev->rank >= bs->k)
            continue;
        if (ev->type == PMIXHOST_EV_ABORT && bs->index[ev->rank] >= 0)
            pmixb_report_abort (pb, bs->index[ev->rank], ev->status, ev->message);
        else if (ev->type == PMIXHOST_EV_CONNECTED)
            log_debug ("spawned rank %d connected (entered MPI_Init)",
                       agent_worker (pb->agent, bs->index[ev->rank])->rank);
        return;
    }
}

char *const *grow_env (struct pmixb *pb, int i)
{
    int r;
    struct bspawn *bs = spawn_of (pb, i, &r);

    return bs ? bs->env[r] : NULL;
}

void grow_started (struct pmixb *pb, int i, pid_t pid)
{
    int r;
    struct bspawn *bs = spawn_of (pb, i, &r);

    if (bs && bs->job)
        pmixhost_job_started (bs->job, r, pid);
}

void grow_reaped (struct pmixb *pb, int i, int wstatus)
{
    elastic_agent_t *agent = pb->agent;
    int sig = WIFSIGNALED (wstatus) ? WTERMSIG (wstatus) : 0;
    int code = WIFEXITED (wstatus) ? WEXITSTATUS (wstatus) : 0;
    int r, verdict;
    struct bspawn *bs = spawn_of (pb, i, &r);
    char why[160];

    if (!bs || !bs->job) {
        elastic_agent_worker_exited (agent, i, code, sig);
        return;
    }
    verdict = pmixhost_job_exited (bs->job, r, wstatus);
    if (bs->state == PMIXHOST_SPAWN_PENDING) {
        snprintf (why,
                  sizeof (why),
                  "rank %d (pid %d) %s %d before it reached its parents",
                  agent_worker (agent, i)->rank,
                  (int)agent_worker (agent, i)->pid,
                  sig ? "died of signal" : "exited with",
                  sig ? sig : code);
        spawn_failed (pb, bs, 0, why, 1);
    }
    if (bs->state == PMIXHOST_SPAWN_FAILED) {
        /* its parents went on without it (MPI_Comm_spawn failed) */
        if (sig || code != 0)
            elastic_agent_worker_lost (
                agent, i, code, sig, "spawned, ended before it reached its parents");
        else
            elastic_agent_worker_exited (agent, i, code, sig);
        publish_capacity (pb);
        return;
    }
    switch (verdict) {
        case PMIXHOST_EXIT_RECOVERABLE:
        case PMIXHOST_EXIT_RESTART:
            /* a spawned rank never restarts the group: its relatives were
             * told (or never depended on it) and go on */
            elastic_agent_worker_lost (agent,
                                       i,
                                       code,
                                       sig,
                                       sig ? "recovered in place (a spawned rank died)"
                                           : "recovered in place (a spawned rank exited "
                                             "without MPI_Finalize)");
            break;
        default:
            elastic_agent_worker_exited (agent, i, code, sig);
            break;
    }
    publish_capacity (pb);
}

void grow_check (struct pmixb *pb)
{
    double now = mono_now ();
    char why[128];

    if (pb->h)
        pmixhost_expire (pb->h);
    for (struct bspawn *bs = pb->spawns; bs; bs = bs->next) {
        if (!bs->sp || bs->state != PMIXHOST_SPAWN_PENDING || now < bs->deadline)
            continue; /* (a spawn from another member: its requestor's to time) */
        snprintf (why,
                  sizeof (why),
                  "its processes did not reach their parents within %.3g s "
                  "(--spawn-timeout)",
                  bs->deadline - bs->t_start);
        spawn_failed (pb, bs, 1, why, 1);
    }
    publish_capacity (pb);
}

void grow_end (struct pmixb *pb)
{
#if HAVE_SODIUM
    pmixhost_mesh_clear_spawns (pb->tp);
#endif
    while (pb->queue) {
        struct bspawn *bs = pb->queue;
        pb->queue = bs->next;
        pmixhost_spawn_refuse (bs->sp, 0);
        pmixhost_spawn_release (bs->sp);
        bspawn_free (bs);
    }
    while (pb->spawns) {
        struct bspawn *bs = pb->spawns;
        pb->spawns = bs->next;
        pmixhost_job_destroy (bs->job);
        pmixhost_spawn_release (bs->sp);
        bspawn_free (bs);
    }
    pb->nextra = 0;
    pb->spawning = 0;
    pb->last_capacity = -1;
}

void grow_free (struct pmixb *pb)
{
    for (int i = 0; pb->member_name && i < pb->nmembers; i++)
        free (pb->member_name[i]);
    free (pb->member_name);
    pb->member_name = NULL;
    free (pb->member_ranks);
    pb->member_ranks = NULL;
    free (pb->room);
    free (pb->room_seq);
    pb->room = NULL;
    pb->room_seq = NULL;
    free (pb->extra_of);
    free (pb->extra_rank);
    pb->extra_of = NULL;
    pb->extra_rank = NULL;
    pb->nextra = pb->extra_cap = 0;
}
