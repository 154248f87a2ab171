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

struct bspawn {
    struct bspawn *next;
    struct pmixhost_spawn *sp;
    struct pmixhost_job *job; /* the children's namespace (NULL: none made) */
    int k;
    int *index;  /* worker index of child rank r (-1: not added) */
    char ***env; /* child r's variables: PMIx's, then the app's */
    int state;   /* enum pmixhost_spawn_state, as this side saw it */
    double t_start;
    double deadline;
};

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

/* ---- capacity ------------------------------------------------------------------- */

static int slot_free (struct pmixb *pb, int s)
{
    const struct worker *w = agent_worker (pb->agent, pb->slot_owner[s]);

    return !w || w->exited || w->pid <= 0;
}

/* Free slots, or 0 where no spawn can be served now. */
static int capacity (struct pmixb *pb)
{
    int n = 0;

    /* one node only: the mesh (several nodes) has no cross-node spawn */
    if (!pb->in_place || pb->map || pb->disabled || !pb->h || !pb->job ||
        !pb->initialized || pb->spawning || pb->abort_reported ||
        agent_stopping (pb->agent))
        return 0;
    for (int s = 0; s < pb->nranks; s++)
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

static void publish_capacity (struct pmixb *pb)
{
    int c = capacity (pb);

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

/* Register the children's namespace.  Returns 0, or -1 (logged). */
static int make_job (struct pmixb *pb, struct bspawn *bs)
{
    struct pmixhost_job_opts jo = {0};
    struct pmixhost_job_info ji;
    elastic_error_t err = {{0}};

    pmixhost_job_info (pb->job, &ji);
    jo.run_id = pb->run_id;
    jo.attempt = pb->njobs;
    jo.nranks = bs->k;
    jo.btl = pmixb_btl (pb);
    jo.oversubscribed = ji.oversubscribed;
    jo.spawned_by = bs->sp;
    if (!(bs->job = pmixhost_job_create (pb->h, &jo, &err))) {
        log_err ("MPI_Comm_spawn: hosted PMIx server: %s", err.text);
        return -1;
    }
    pb->njobs++;
    return 0;
}

/* Start child r into slot s.  Returns its worker index, or -1 (logged). */
static int start_child (struct pmixb *pb, struct bspawn *bs, int r, int s)
{
    const struct pmixhost_spawn_req *req = pmixhost_spawn_request (bs->sp);
    elastic_agent_t *agent = pb->agent;
    elastic_error_t err = {{0}};
    int i;

    if (!(bs->env[r] = child_env (bs->job, r, req->env))) {
        log_err ("MPI_Comm_spawn: out of memory");
        return -1;
    }
    if ((i = agent_worker_add (
             agent, agent_worker (agent, s)->local_rank, req->argv, &err)) < 0) {
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
    if (local_start_extra (pb->local, i, req->wdir, &err) != ELASTIC_OK) {
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

/* A pending spawn failed: MPI_Comm_spawn returns an error. */
static void
spawn_failed (struct pmixb *pb, struct bspawn *bs, int timed_out, const char *why)
{
    char ranks[256];
    int rk[64] = {0}, n = 0;

    if (bs->state != PMIXHOST_SPAWN_PENDING)
        return;
    bs->state = PMIXHOST_SPAWN_FAILED;
    pb->spawning = 0;
    pmixhost_spawn_fail (bs->sp, timed_out);
    for (int r = 0; r < bs->k && n < 64; r++)
        if (bs->index[r] >= 0)
            rk[n++] = agent_worker (pb->agent, bs->index[r])->rank;
    int_list (ranks, sizeof (ranks), rk, n);
    log_warn ("spawn of rank%s %s for %s failed: %s",
              n == 1 ? "" : "s",
              ranks,
              pmixhost_spawn_request (bs->sp)->requestor,
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
    publish_capacity (pb);
}

static void spawn_one (struct pmixb *pb, struct bspawn *bs)
{
    const struct pmixhost_spawn_req *req = pmixhost_spawn_request (bs->sp);
    const struct elastic_agent_spec *spec = agent_spec (pb->agent);
    int cap = capacity (pb), k = req->nprocs, started = 0;
    int *slots = NULL, *old = NULL, *ranks = NULL, *pids = NULL;
    char l_ranks[256], l_old[256];
    json_t *jr, *jp, *js, *jo;

    if (!pb->job || req->parent == NULL) {
        refuse (pb, bs, 0, "the job is ending");
        return;
    }
    if (k > cap) {
        refuse (pb,
                bs,
                cap,
                cap == 0 && pb->spawning    ? "a spawn is on its way"
                : cap == 0 && !pb->in_place ? "spawning needs --restart-policy in-place"
                                            : "more ranks than free slots");
        return;
    }
    bs->k = k;
    if (!(bs->index = malloc ((size_t)k * sizeof (int))) ||
        !(bs->env = calloc ((size_t)k, sizeof (char **))) ||
        !(slots = calloc ((size_t)k, sizeof (int))) ||
        !(old = calloc ((size_t)k, sizeof (int))) ||
        !(ranks = calloc ((size_t)k, sizeof (int))) ||
        !(pids = calloc ((size_t)k, sizeof (int)))) {
        refuse (pb, bs, cap, "out of memory");
        goto out;
    }
    for (int r = 0; r < k; r++)
        bs->index[r] = -1;
    for (int s = 0, n = 0; s < pb->nranks && n < k; s++) {
        if (slot_free (pb, s)) {
            old[n] = agent_worker (pb->agent, pb->slot_owner[s])->rank;
            slots[n++] = s;
        }
    }
    if (make_job (pb, bs) < 0) {
        refuse (pb, bs, cap, "the namespace could not be registered");
        goto out;
    }
    bs->t_start = mono_now ();
    bs->deadline = bs->t_start + (spec->spawn_timeout > 0 ? spec->spawn_timeout : 600.0);
    bs->state = PMIXHOST_SPAWN_PENDING;
    bs->next = pb->spawns;
    pb->spawns = bs;
    pb->spawning = 1;
    publish_capacity (pb); /* 0 from now until it joins or fails */
    for (int r = 0; r < k; r++) {
        int i = start_child (pb, bs, r, slots[r]);
        if (i < 0)
            break;
        ranks[r] = agent_worker (pb->agent, i)->rank;
        pids[r] = (int)agent_worker (pb->agent, i)->pid;
        started++;
    }
    int_list (l_ranks, sizeof (l_ranks), ranks, started);
    int_list (l_old, sizeof (l_old), old, k);
    if (started < k) {
        pmixhost_spawn_launched (bs->sp, bs->job);
        spawn_failed (pb, bs, 0, "a process could not be started");
        goto out;
    }
    log_info ("spawning %d rank%s (%s) into the slots of rank%s %s for %s",
              k,
              k == 1 ? "" : "s",
              l_ranks,
              k == 1 ? "" : "s",
              l_old,
              req->requestor);
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
                              req->requestor,
                              "nspace",
                              pmixhost_job_nspace (bs->job),
                              "command",
                              req->argv[0]));
    pmixhost_spawn_launched (bs->sp, bs->job);
out:
    free (slots);
    free (old);
    free (ranks);
    free (pids);
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
    bs->state = PMIXHOST_SPAWN_JOINED;
    pb->spawning = 0;
    for (int r = 0; r < bs->k && n < 64; r++)
        rk[n++] = agent_worker (pb->agent, bs->index[r])->rank;
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
        spawn_failed (pb, bs, 0, why);
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
        if (bs->state != PMIXHOST_SPAWN_PENDING || now < bs->deadline)
            continue;
        snprintf (why,
                  sizeof (why),
                  "its processes did not reach their parents within %.3g s "
                  "(--spawn-timeout)",
                  bs->deadline - bs->t_start);
        spawn_failed (pb, bs, 1, why);
    }
    publish_capacity (pb);
}

void grow_end (struct pmixb *pb)
{
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
    free (pb->extra_of);
    free (pb->extra_rank);
    pb->extra_of = NULL;
    pb->extra_rank = NULL;
    pb->nextra = pb->extra_cap = 0;
}
