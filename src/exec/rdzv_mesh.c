/* rdzv_mesh.c - torchrun's elastic rendezvous over the mesh (rdzv_mesh.h)
 *
 * Threads: the mesh's callbacks (its thread) only record what happened
 * under the module's lock and wake the agent's loop through an eventfd the
 * agent watches; everything else runs on the agent's loop thread, which
 * waits for a round with elastic_agent_wait (the loop, signals and the
 * health server go on meanwhile).
 *
 * Wire formats (inside the mesh's authenticated messages):
 *   round blob   "rdzv 1 nproc=P port=Q round=N" or "rdzv 1 done round=N"
 *                (N: the round as its member numbers it; a member that
 *                joined the running job numbers its rounds on from the
 *                largest N of its first round)
 *   ROUND        "N" (the round a member started)
 *   CLOSE        "STATUS REASON" (the member's exit status, one line)
 *   DONE         "" (the member's workers succeeded: it is in its exit
 *                barrier)
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent_backend.h"
#include "common/clock.h"
#include "common/log.h"
#include "eventlog.h"
#include "jobmap.h"
#include "mesh/mesh.h"
#include "mesh/proto.h"
#include "mesh/tree.h"
#include "meshjob.h"
#include "rdzv_mesh.h"
#include "util.h"

#define BLOB_MAX 64

struct rdzv_mesh {
    struct meshjob *mj;
    const struct jobmap *map;
    struct mesh *mesh;
    int min_nodes;
    double join_timeout;
    int evfd;    /* the mesh thread wakes the agent's loop */
    int watched; /* evfd is in the agent's loop */
    elastic_agent_t *agent;
    int round;     /* rounds completed here (loop thread) */
    uint8_t *prev; /* [nnodes] the members of the last round (loop thread) */
    uint8_t *gone; /* [nnodes] scratch: members whose end was seen */
    uint8_t *now;  /* [nnodes] scratch: the members of this round */
    int success;   /* the exit barrier was reached (loop thread) */

    pthread_mutex_t lock; /* everything below */
    int requested;        /* the highest round any member started */
    uint32_t epoch;       /* the mesh's epoch (members lost so far) */
    uint32_t round_epoch; /* the epoch the last round's result was made in */
    uint8_t *lost;        /* [nnodes] */
    uint8_t *done;        /* [nnodes] said DONE */
    int nlost_new;        /* lost since the loop last logged them */
    uint32_t *lost_new;   /* [nnodes] */
    int njoined_new;      /* admitted since the loop last logged them */
    uint32_t *joined_new; /* [nnodes] */
    char **addr;          /* [nnodes] "host:port" of each member known here */
    int closed;           /* a member closed the rendezvous, or we fenced */
    int fenced_news;      /* we fenced: the loop emits the event */
    int closed_status;
    char closed_why[512];
    /* the pending round's result */
    int fence_pending, fence_done, fence_status;
    uint32_t res_count, res_epoch;
    uint32_t *res_member; /* [nnodes] */
    int *res_nproc;       /* [nnodes], -1: a done member */
    int *res_port;        /* [nnodes] */
    int res_round;        /* the largest round number in the result */
};

/* The number of the round just made here: the next, or the largest any
 * member gave it (a member that joined counts on from the others'). */
static int round_after (const struct rdzv_mesh *r)
{
    return r->res_round > r->round + 1 ? r->res_round : r->round + 1;
}

/* A member's name for log lines: its host (r->lock held or loop thread). */
static const char *name_of (struct rdzv_mesh *r, uint32_t member)
{
    const char *n = r->map->node[member].name;

    return n ? n : r->addr[member] ? r->addr[member] : "?";
}

static void wake (struct rdzv_mesh *r)
{
    uint64_t one = 1;

    if (write (r->evfd, &one, sizeof (one)) < 0) {
        /* the counter is full: the loop is awake anyway */
    }
}

/* ---- the mesh's callbacks (mesh thread) ------------------------------- */

static void
on_lost (void *arg, const uint32_t *members, size_t count, uint32_t epoch, uint32_t nlive)
{
    struct rdzv_mesh *r = arg;

    pthread_mutex_lock (&r->lock);
    for (size_t i = 0; i < count; i++)
        if (members[i] < (uint32_t)r->map->nnodes && !r->lost[members[i]]) {
            r->lost[members[i]] = 1;
            r->lost_new[r->nlost_new++] = members[i];
        }
    if (epoch > r->epoch)
        r->epoch = epoch;
    pthread_mutex_unlock (&r->lock);
    (void)nlive;
    wake (r);
}

static void on_admitted (void *arg,
                         const uint32_t *members,
                         const char *const *addrs,
                         size_t count,
                         uint32_t epoch,
                         uint32_t nlive)
{
    struct rdzv_mesh *r = arg;

    pthread_mutex_lock (&r->lock);
    for (size_t i = 0; i < count; i++) {
        uint32_t k = members[i];
        if (k >= (uint32_t)r->map->nnodes)
            continue;
        if (addrs && addrs[i] && !r->addr[k])
            r->addr[k] = strdup (addrs[i]);
        r->joined_new[r->njoined_new++] = k;
    }
    if (epoch > r->epoch)
        r->epoch = epoch; /* a node waiting: the next round takes it in */
    pthread_mutex_unlock (&r->lock);
    (void)nlive;
    wake (r);
}

static void
on_broadcast (void *arg, uint32_t origin, int kind, const void *data, size_t len)
{
    struct rdzv_mesh *r = arg;
    char text[600];

    if (origin >= (uint32_t)r->map->nnodes)
        return;
    snprintf (
        text, sizeof (text), "%.*s", (int)(len < 599 ? len : 599), (const char *)data);
    pthread_mutex_lock (&r->lock);
    if (kind == MESH_BCAST_ROUND) {
        char *end;
        long n = strtol (text, &end, 10);
        if (end != text && *end == '\0' && n > 0 && n < INT32_MAX && n > r->requested)
            r->requested = (int)n;
    } else if (kind == MESH_BCAST_CLOSE) {
        int status = 1, off = 0;
        if (sscanf (text, "%d %n", &status, &off) < 1 || status < 1 || status > 255)
            status = 1, off = 0;
        if (!r->closed) {
            r->closed = 1;
            r->closed_status = status;
            snprintf (r->closed_why,
                      sizeof (r->closed_why),
                      "node %s (member %u) closed the rendezvous: %s",
                      name_of (r, origin),
                      origin,
                      text + off);
        }
    } else if (kind == MESH_BCAST_DONE) {
        r->done[origin] = 1;
    }
    pthread_mutex_unlock (&r->lock);
    wake (r);
}

static void on_dmodex_request (
    void *arg, struct mesh_request *req, uint32_t origin, const void *data, size_t len)
{
    (void)arg, (void)origin, (void)data, (void)len;
    mesh_dmodex_respond (req, MESH_ELOST, NULL, 0); /* nothing to serve here */
}

static void on_self_fence (void *arg, const char *reason)
{
    struct rdzv_mesh *r = arg;

    pthread_mutex_lock (&r->lock);
    if (!r->closed) {
        r->closed = 1;
        r->closed_status = 1;
        snprintf (r->closed_why,
                  sizeof (r->closed_why),
                  "this node is cut off from the mesh (%s): it stops, the others go on",
                  reason ? reason : "fenced");
        r->fenced_news = 1;
    }
    pthread_mutex_unlock (&r->lock);
    wake (r);
}

/* "rdzv 1 nproc=P port=Q round=N" or "rdzv 1 done round=N"; -1 for
 * anything else. */
static int
parse_blob (const uint8_t *data, uint32_t len, int *nproc, int *port, int *round)
{
    char s[BLOB_MAX + 1];
    int n = 0;

    if (len == 0 || len > BLOB_MAX)
        return -1;
    memcpy (s, data, len);
    s[len] = '\0';
    if (sscanf (s, "rdzv 1 done round=%d%n", round, &n) == 1 && s[n] == '\0' &&
        *round >= 0) {
        *nproc = -1, *port = 0;
        return 0;
    }
    n = 0;
    if (sscanf (s, "rdzv 1 nproc=%d port=%d round=%d%n", nproc, port, round, &n) != 3 ||
        s[n] != '\0' || *nproc < 1 || *nproc > 65535 || *port < 1 || *port > 65535 ||
        *round < 0)
        return -1;
    return 0;
}

static void fence_done (void *arg, int status, const struct mesh_fence_result *res)
{
    struct rdzv_mesh *r = arg;

    pthread_mutex_lock (&r->lock);
    r->fence_status = status;
    r->res_count = 0;
    r->res_round = 0;
    if (status == MESH_OK && res) {
        r->res_epoch = res->epoch;
        for (uint32_t i = 0; i < res->count && i < (uint32_t)r->map->nnodes; i++) {
            int nproc, port, round;
            if (res->members[i] >= (uint32_t)r->map->nnodes ||
                parse_blob (res->data[i], res->len[i], &nproc, &port, &round) < 0) {
                log_warn ("rendezvous: member %u's contribution is malformed: left out",
                          res->members[i]);
                continue;
            }
            r->res_member[r->res_count] = res->members[i];
            r->res_nproc[r->res_count] = nproc;
            r->res_port[r->res_count] = port;
            r->res_count++;
            if (round > r->res_round)
                r->res_round = round;
        }
    }
    r->fence_pending = 0;
    r->fence_done = 1;
    pthread_mutex_unlock (&r->lock);
    wake (r);
}

/* ---- the agent's loop ----------------------------------------------------- */

/* Name member k, which joined, after its host; "HOST-k" when another node
 * of the job has that host (several "nodes" on one machine: meshjob.c
 * names those "HOST-i" too). */
static void name_joined (struct rdzv_mesh *r, uint32_t k, char *host, size_t size)
{
    size_t hl = strlen (host);
    int shared = 0;

    for (int i = 0; i < r->map->nnodes && !shared; i++) {
        const char *n = r->map->node[i].name;
        shared = (uint32_t)i != k && n && !strncmp (n, host, hl) &&
                 (n[hl] == '\0' || n[hl] == '-');
    }
    if (shared)
        snprintf (host + hl, size - hl, "-%u", k);
    (void)jobmap_set_host (r->mj->map, (int)k, host, NULL);
}

/* The loop woke on evfd: log and record the members lost meanwhile. */
static void on_wake (elastic_agent_t *agent, int fd, int revents, void *arg)
{
    struct rdzv_mesh *r = arg;
    uint32_t lost[64], joined[64];
    uint8_t finished[64];
    char *jname[64];
    int n = 0, nj = 0;
    uint64_t v;

    (void)revents;
    while (read (fd, &v, sizeof (v)) == sizeof (v))
        ;
    char why[sizeof (r->closed_why)] = "";

    pthread_mutex_lock (&r->lock);
    while (r->nlost_new > 0 && n < 64) {
        lost[n] = r->lost_new[--r->nlost_new];
        finished[n] = r->done[lost[n]];
        n++;
    }
    while (r->njoined_new > 0 && nj < 64) {
        joined[nj] = r->joined_new[--r->njoined_new];
        jname[nj] = r->addr[joined[nj]] ? strdup (r->addr[joined[nj]]) : NULL;
        nj++;
    }
    if (r->fenced_news) {
        r->fenced_news = 0;
        snprintf (why, sizeof (why), "%s", r->closed_why);
    }
    pthread_mutex_unlock (&r->lock);
    if (why[0]) {
        log_err ("rendezvous: %s", why);
        eventlog_emit (
            agent_eventlog (agent), "self_fence", json_pack ("{s:s}", "reason", why));
    }
    for (int i = nj - 1; i >= 0; i--) {
        char host[300];
        const char *colon = jname[i] ? strrchr (jname[i], ':') : NULL;

        snprintf (host,
                  sizeof (host),
                  "%.*s",
                  colon ? (int)(colon - jname[i]) : 1,
                  colon ? jname[i] : "?");
        if (!r->map->node[joined[i]].name && colon)
            name_joined (r, joined[i], host, sizeof (host));
        log_info ("rendezvous: node %s (member %u) joins the job: the next round takes "
                  "it in",
                  host,
                  joined[i]);
        eventlog_emit (agent_eventlog (agent),
                       "node_joined",
                       json_pack ("{s:i s:s}", "member", (int)joined[i], "node", host));
        free (jname[i]);
    }
    for (int i = 0; i < n; i++) {
        const char *name = name_of (r, lost[i]);
        if (finished[i]) {
            /* it said DONE (its workers succeeded, the exit barrier): its
             * bye is the end of the job, not a loss (seen in CI: a node
             * leaving first was logged lost by one still in its barrier) */
            log_info ("rendezvous: node %s (member %u) finished and left", name, lost[i]);
            continue;
        }
        log_warn ("rendezvous: node %s (member %u) is lost: the others re-rendezvous",
                  name,
                  lost[i]);
        eventlog_emit (agent_eventlog (agent),
                       "node_lost",
                       json_pack ("{s:i s:s}", "member", (int)lost[i], "node", name));
    }
}

static int watch (struct rdzv_mesh *r, elastic_agent_t *agent, elastic_error_t *err)
{
    if (r->watched)
        return 0;
    if (elastic_agent_watch (agent, r->evfd, on_wake, r) != ELASTIC_OK)
        return errprintf (err, "rendezvous: cannot watch the mesh's eventfd");
    r->watched = 1;
    r->agent = agent;
    return 0;
}

/* A port nobody listens on now, for MASTER_PORT when we are group rank 0
 * (0 when none could be had). */
static int free_port (void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl (INADDR_ANY)};
    socklen_t sl = sizeof (sa);
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 0;

    if (fd < 0)
        return 0;
    if (bind (fd, (struct sockaddr *)&sa, sizeof (sa)) == 0 &&
        getsockname (fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs (sa.sin_port);
    close (fd);
    return port;
}

static int fence_or_closed (elastic_agent_t *agent, void *arg)
{
    struct rdzv_mesh *r = arg;
    int done;

    pthread_mutex_lock (&r->lock);
    done = r->fence_done || r->closed;
    pthread_mutex_unlock (&r->lock);
    return done || agent_signal_received (agent);
}

static int closed_or_signal (elastic_agent_t *agent, void *arg)
{
    struct rdzv_mesh *r = arg;
    int closed;

    pthread_mutex_lock (&r->lock);
    closed = r->closed;
    pthread_mutex_unlock (&r->lock);
    return closed || agent_signal_received (agent);
}

/* Contribute blob to the next round and wait for it.  Returns 0 with the
 * result in r->res_*, or -1 with err. */
static int run_round (struct rdzv_mesh *r,
                      elastic_agent_t *agent,
                      const char *blob,
                      double timeout,
                      elastic_error_t *err)
{
    char num[32];
    int rc;

    pthread_mutex_lock (&r->lock);
    if (r->closed) {
        rc = errprintf (err, "rendezvous closed: %s", r->closed_why);
        pthread_mutex_unlock (&r->lock);
        return rc;
    }
    r->fence_done = 0;
    r->fence_pending = 1;
    if (r->requested < r->round + 1) {
        r->requested = r->round + 1;
        pthread_mutex_unlock (&r->lock);
        snprintf (num, sizeof (num), "%d", r->round + 1);
        if (mesh_broadcast (r->mesh, MESH_BCAST_ROUND, num, strlen (num)) < 0)
            log_debug (
                "rendezvous: round %d: broadcast: %s", r->round + 1, strerror (errno));
    } else
        pthread_mutex_unlock (&r->lock);
    if (mesh_fence (r->mesh, blob, strlen (blob), fence_done, r) < 0) {
        pthread_mutex_lock (&r->lock);
        r->fence_pending = 0;
        pthread_mutex_unlock (&r->lock);
        return errprintf (
            err, "rendezvous: the mesh refused the round: %s", strerror (errno));
    }
    rc = elastic_agent_wait (agent, timeout, fence_or_closed, r);
    pthread_mutex_lock (&r->lock);
    if (r->fence_done && r->fence_status == MESH_ECANCEL && !r->closed) {
        /* a mesh that fences itself cancels its fence first and tells us
         * why right after (mesh_self_fence): wait for the reason */
        pthread_mutex_unlock (&r->lock);
        elastic_agent_wait (agent, 2.0, closed_or_signal, r);
        pthread_mutex_lock (&r->lock);
    }
    if (r->fence_done && r->fence_status == MESH_OK) {
        r->round_epoch = r->res_epoch;
        /* a member that joined numbers its rounds as the others do */
        r->round = round_after (r);
        pthread_mutex_unlock (&r->lock);
        return 0;
    }
    if (r->closed) {
        rc = errprintf (err, "rendezvous closed: %s", r->closed_why);
        pthread_mutex_unlock (&r->lock);
        return rc;
    }
    pthread_mutex_unlock (&r->lock);
    if (agent_signal_received (agent))
        return errprintf (err,
                          "rendezvous round %d interrupted by %s",
                          r->round + 1,
                          signal_name (agent_signal_received (agent)));
    if (rc != ELASTIC_OK)
        return errprintf (
            err,
            "rendezvous round %d: the other nodes did not come within %.0f s",
            r->round + 1,
            timeout);
    return errprintf (err, "rendezvous round %d: the mesh stopped", r->round + 1);
}

/* The majority rule (tree_quorum): this round's members, done ones
 * included, must hold more than half of the last round's that were not
 * seen to end (a tie: the lowest of them), so that the two sides of a
 * network partition never both go on.  Then this round is the last. */
static int quorate (struct rdzv_mesh *r, elastic_error_t *err)
{
    uint32_t n = (uint32_t)r->map->nnodes, have = 0, base = 0;

    memset (r->now, 0, n);
    for (uint32_t i = 0; i < r->res_count; i++)
        r->now[r->res_member[i]] = 1;
    mesh_get_causes (r->mesh, r->gone, n);
    for (uint32_t i = 0; i < n; i++) {
        r->gone[i] = r->gone[i] == MESH_CAUSE_EOF || r->gone[i] == MESH_CAUSE_LEFT;
        base += r->prev[i] && !r->gone[i];
        have += r->prev[i] && !r->gone[i] && r->now[i];
    }
    if (!tree_quorum (n, r->prev, r->now, r->gone))
        return errprintf (err,
                          "rendezvous round %d: %u of the %u nodes of the last round "
                          "that were not seen to end are here, not a majority: this "
                          "side of a network partition stops (the other goes on)",
                          r->round,
                          have,
                          base);
    memcpy (r->prev, r->now, n);
    return 1;
}

static int next_rendezvous (elastic_agent_t *agent,
                            void *ctx,
                            struct elastic_agent_rdzv_info *info,
                            elastic_error_t *err)
{
    struct rdzv_mesh *r = ctx;
    char blob[BLOB_MAX];
    uint32_t self = (uint32_t)r->map->node_id;
    int nproc = r->map->node[r->map->node_id].nranks, port = free_port ();
    int me = -1, first = -1, members = 0, base = 0, world = 0;
    double t0 = mono_now ();
    const char *a, *colon;

    if (watch (r, agent, err) < 0)
        return ELASTIC_ERR_IO;
    if (port == 0)
        return errprintf (err, "rendezvous: no free port for MASTER_PORT here"),
               ELASTIC_ERR_IO;
    snprintf (blob,
              sizeof (blob),
              "rdzv 1 nproc=%d port=%d round=%d",
              nproc,
              port,
              r->round + 1);
    if (run_round (r, agent, blob, r->join_timeout, err) < 0)
        return ELASTIC_ERR_STATE;
    /* the group: the members with workers ("done" ones left out), in
     * member order */
    for (uint32_t i = 0; i < r->res_count; i++) {
        if (r->res_nproc[i] < 0)
            continue;
        if (first < 0)
            first = (int)i;
        if (r->res_member[i] == self)
            me = members, base = world;
        world += r->res_nproc[i];
        members++;
    }
    if (me < 0)
        return errprintf (err, "rendezvous round %d: this node is not in it", r->round),
               ELASTIC_ERR_STATE;
    if (!quorate (r, err))
        return ELASTIC_ERR_STATE;
    if (members < r->min_nodes)
        return errprintf (err,
                          "rendezvous round %d: %d node%s left, fewer than the %d "
                          "--nnodes asks for at least",
                          r->round,
                          members,
                          members == 1 ? "" : "s",
                          r->min_nodes),
               ELASTIC_ERR_STATE;
    info->group_rank = me;
    info->group_world_size = members;
    info->rank_base = base;
    info->world_size = world;
    info->local_rank_base = 0;
    info->node_local_size = nproc;
    pthread_mutex_lock (&r->lock);
    a = r->addr[r->res_member[first]];
    pthread_mutex_unlock (&r->lock);
    if (!a)
        return errprintf (err,
                          "rendezvous round %d: the address of member %u, the master, is "
                          "not known here",
                          r->round,
                          r->res_member[first]),
               ELASTIC_ERR_STATE;
    colon = strrchr (a, ':');
    snprintf (info->master_addr,
              sizeof (info->master_addr),
              "%.*s",
              (int)(colon ? colon - a : (long)strlen (a)),
              a);
    info->master_port = r->res_port[first];
    log_info ("rendezvous round %d: %d node%s, %d workers; this node is group rank %d "
              "(ranks %d..%d); master %s:%d (%.0f ms)",
              r->round,
              members,
              members == 1 ? "" : "s",
              world,
              me,
              base,
              base + nproc - 1,
              info->master_addr,
              info->master_port,
              (mono_now () - t0) * 1e3);
    return ELASTIC_OK;
}

static int num_nodes_waiting (elastic_agent_t *agent, void *ctx)
{
    struct rdzv_mesh *r = ctx;
    int n;

    (void)agent;
    pthread_mutex_lock (&r->lock);
    n = r->closed || r->requested > r->round || r->epoch > r->round_epoch;
    pthread_mutex_unlock (&r->lock);
    return n;
}

struct barrier_wait {
    struct rdzv_mesh *r;
    uint8_t *live;
};

static int all_done (elastic_agent_t *agent, void *arg)
{
    struct barrier_wait *b = arg;
    struct rdzv_mesh *r = b->r;
    int n = r->map->nnodes, pending = 0, round;
    char blob[BLOB_MAX];

    (void)agent;
    mesh_get_live (r->mesh, b->live, (uint32_t)n);
    pthread_mutex_lock (&r->lock);
    for (int i = 0; i < n; i++)
        pending += b->live[i] && !r->done[i] && !r->lost[i];
    round = r->requested > r->round && !r->fence_pending;
    if (round)
        r->fence_pending = 1;
    if (r->fence_done) {
        r->fence_done = 0;
        r->round = round_after (r);
    }
    snprintf (blob, sizeof (blob), "rdzv 1 done round=%d", r->round + 1);
    pthread_mutex_unlock (&r->lock);
    /* the others started a round while we wait: take part as done */
    if (round && mesh_fence (r->mesh, blob, strlen (blob), fence_done, r) < 0) {
        pthread_mutex_lock (&r->lock);
        r->fence_pending = 0;
        pthread_mutex_unlock (&r->lock);
    }
    return pending == 0 || r->closed;
}

static int exit_barrier (elastic_agent_t *agent, void *ctx, double timeout)
{
    struct rdzv_mesh *r = ctx;
    struct barrier_wait b = {.r = r};
    int rc;

    r->success = 1;
    if (!(b.live = calloc ((size_t)r->map->nnodes, 1)))
        return ELASTIC_ERR_NOMEM;
    pthread_mutex_lock (&r->lock);
    r->done[r->map->node_id] = 1;
    r->fence_done = 0;
    pthread_mutex_unlock (&r->lock);
    if (mesh_broadcast (r->mesh, MESH_BCAST_DONE, "", 0) < 0)
        log_debug ("rendezvous: DONE: %s", strerror (errno));
    rc = elastic_agent_wait (agent, timeout, all_done, &b);
    free (b.live);
    return rc;
}

static void destroy (void *ctx)
{
    struct rdzv_mesh *r = ctx;

    if (!r)
        return;
    if (r->mesh && !r->success) {
        /* the others must not go on without us: close the rendezvous */
        char text[300];
        int closed;
        pthread_mutex_lock (&r->lock);
        closed = r->closed;
        pthread_mutex_unlock (&r->lock);
        if (!closed) {
            snprintf (text,
                      sizeof (text),
                      "1 its agent ended without success (see node %s's log)",
                      name_of (r, (uint32_t)r->map->node_id));
            if (mesh_broadcast (r->mesh, MESH_BCAST_CLOSE, text, strlen (text)) < 0)
                log_debug ("rendezvous: CLOSE: %s", strerror (errno));
        }
    }
    rdzv_tcp_server_set_admit (r->mj->joins.server, NULL, NULL); /* no more joins */
    mesh_destroy (r->mesh); /* sends what is queued, then its byes */
    if (r->evfd >= 0)
        close (r->evfd);
    pthread_mutex_destroy (&r->lock);
    free (r->lost);
    free (r->lost_new);
    free (r->joined_new);
    free (r->prev);
    free (r->gone);
    free (r->now);
    for (int i = 0; r->addr && i < r->map->nnodes; i++)
        free (r->addr[i]);
    free (r->addr);
    free (r->done);
    free (r->res_member);
    free (r->res_nproc);
    free (r->res_port);
    free (r);
}

const struct elastic_agent_rdzv rdzv_mesh_ops = {
    .name = "elastic",
    .next_rendezvous = next_rendezvous,
    .num_nodes_waiting = num_nodes_waiting,
    .exit_barrier = exit_barrier,
    .destroy = destroy,
};

/* The endpoint's server asks (its thread): admit the node at addr. */
static int
admit (void *arg, const char *addr, struct rdzv_admission *a, char *why, size_t whysize)
{
    struct rdzv_mesh *r = arg;
    struct mesh_admission ma;
    struct mesh_stats st;

    _Static_assert((int)MESH_SLOT_LIVE == (int)RDZV_SLOT_LIVE &&
                       (int)MESH_SLOT_ABSENT == (int)RDZV_SLOT_ABSENT &&
                       (int)MESH_SLOT_LOST == (int)RDZV_SLOT_LOST,
                   "slot states");
    if (mesh_admit (r->mesh, addr, &ma) == 0) {
        a->slot = ma.slot;
        a->n = ma.n;
        a->base = ma.base;
        a->epoch = ma.epoch;
        a->states = ma.slots;
        a->addrs = ma.addrs;
        return 0;
    }
    mesh_get_stats (r->mesh, &st);
    switch (errno) {
        case ENOSPC:
            snprintf (why,
                      whysize,
                      "the job has %u nodes, the most --nnodes %d:%d allows: no room "
                      "for another",
                      st.nlive,
                      r->min_nodes,
                      r->mj->max_nodes);
            break;
        case EMLINK:
            snprintf (why,
                      whysize,
                      "the job has taken in all the nodes it can over its life (%d "
                      "member slots; a lost node's is not reused)",
                      r->map->nnodes);
            break;
        case ECANCELED:
            snprintf (why, whysize, "the node serving the endpoint is leaving the job");
            break;
        default:
            snprintf (why, whysize, "cannot admit %s: %s", addr, strerror (errno));
    }
    return -1;
}

void *rdzv_mesh_create (const struct rdzv_mesh_opts *o, elastic_error_t *err)
{
    struct meshjob *mj = o->mj;
    const struct jobmap *m = mj->map;
    struct mesh_config cfg = {0};
    struct rdzv_mesh *r = calloc (1, sizeof (*r));
    size_t n = (size_t)m->nnodes;

    if (!r) {
        errprintf (err, "out of memory");
        return NULL;
    }
    pthread_mutex_init (&r->lock, NULL);
    r->evfd = -1;
    if (!(r->lost = calloc (n, 1)) || !(r->done = calloc (n, 1)) ||
        !(r->lost_new = calloc (n, sizeof (*r->lost_new))) ||
        !(r->joined_new = calloc (n, sizeof (*r->joined_new))) ||
        !(r->prev = calloc (n, 1)) || !(r->gone = calloc (n, 1)) ||
        !(r->now = calloc (n, 1)) || !(r->addr = calloc (n, sizeof (*r->addr))) ||
        !(r->res_member = calloc (n, sizeof (*r->res_member))) ||
        !(r->res_nproc = calloc (n, sizeof (*r->res_nproc))) ||
        !(r->res_port = calloc (n, sizeof (*r->res_port)))) {
        errprintf (err, "out of memory");
        goto fail;
    }
    r->mj = mj;
    r->map = m;
    for (size_t i = 0; i < n; i++)
        if (mj->addrs[i] && !(r->addr[i] = strdup (mj->addrs[i]))) {
            errprintf (err, "out of memory");
            goto fail;
        }
    r->min_nodes = o->min_nodes > 0 ? o->min_nodes : m->nnodes;
    r->join_timeout = o->join_timeout > 0 ? o->join_timeout : 300;
    if ((r->evfd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        errprintf (err, "rendezvous: eventfd: %s", strerror (errno));
        goto fail;
    }
    cfg.nmembers = (uint32_t)m->nnodes;
    cfg.self = (uint32_t)m->node_id;
    cfg.addrs = (const char *const *)mj->addrs;
    cfg.listen_fd = mj->listen_fd;
    if (mj->listen_fd < 0) {
        cfg.ports = m->port;
        cfg.nports = (uint32_t)m->nports;
    }
    cfg.node_timeout = mj->node_timeout;
    cfg.join_timeout = 60;
    cfg.key = mj->key;
    cfg.auth = mj->munge ? MESH_AUTH_MUNGE : MESH_AUTH_SECRET;
    cfg.job = m->key;
    cfg.munge_socket = mj->munge_socket[0] ? mj->munge_socket : NULL;
    cfg.ops.lost = on_lost;
    cfg.ops.broadcast = on_broadcast;
    cfg.ops.dmodex_request = on_dmodex_request;
    cfg.ops.self_fence = on_self_fence;
    cfg.ops.admitted = on_admitted;
    cfg.slots = mj->joins.slots; /* NULL: no joins */
    cfg.base = mj->joins.base;
    cfg.max_live = mj->joins.slots ? (uint32_t)mj->max_nodes : 0;
    cfg.joining = mj->joins.late;
    cfg.arg = r;
    mj->listen_fd = -1; /* the mesh's now, whatever happens */
    if (!(r->mesh = mesh_create (&cfg, err)) || mesh_start (r->mesh, err) < 0)
        goto fail;
    rdzv_tcp_server_set_admit (mj->joins.server, admit, r);
    return r;
fail:
    r->success = 1; /* nothing to close */
    destroy (r);
    return NULL;
}
