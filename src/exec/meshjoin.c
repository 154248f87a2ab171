/* meshjoin.c - elastic-exec --join JOBID[.STEP]: a member joins a running
 * job's mesh (see meshjob.h)
 *
 *   1. the target step: `scontrol show step J.S` (running, its NodeList and
 *      ResvPorts), its nodes' addresses (meshjob_resolve), its candidate
 *      mesh ports (jobmap_ports of "slurm.J.S");
 *   2. authentication as the step's members do it (meshjob_auth: the
 *      secret when given, else munge; the credential names the step);
 *   3. a listening socket on the first of those ports free here (the
 *      members look for each other on them), then mesh_join_request to
 *      member 0, 1, ... on each candidate port until one answers: admitted
 *      (the slot, the view, the job's shape) or refused (one line, exit 2);
 *   4. the mesh, started with the admitter's view (mesh_config.joining);
 *      this member has no ranks: it keeps an empty contribution in the
 *      mesh's next fence, logs joins and losses, and once another member
 *      says the job is ending (MESH_BCAST_DONE) says so too and waits
 *      until every live member has, then decides the job's result as they
 *      do (meshjob_decide over the job's nodes) and exits with it.
 *
 * The node's other tasks of this step (one task per rank) follow the
 * leader as in mesh mode (meshjob_follow).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "jobmap.h"
#include "mesh/mesh.h"
#include "mesh/proto.h"
#include "meshjob.h"

static const char *const prog = "elastic-exec";

/* ---- the target step ------------------------------------------------------ */

struct target {
    char job[64], step[32], key[128];
    int nnodes;
    char **names;
    char (*addr)[64];
    int nports;
    int port[JOBMAP_MAX_PORTS];
};

static void target_free (struct target *t)
{
    for (int i = 0; t->names && i < t->nnodes; i++)
        free (t->names[i]);
    free (t->names);
    free (t->addr);
}

/* The value of "Field=" in line (one `scontrol -o` record), or "". */
static void field (const char *line, const char *name, char *buf, size_t size)
{
    size_t n = strlen (name);
    const char *p = line;

    buf[0] = '\0';
    while ((p = strstr (p, name))) {
        if ((p == line || p[-1] == ' ') && p[n] == '=') {
            p += n + 1;
            snprintf (buf, size, "%.*s", (int)strcspn (p, " \n"), p);
            return;
        }
        p += n;
    }
}

/* The step's record, its state, nodes and reserved ports.  Returns 0, or
 * -1 with err (one line: no such step, not running). */
static int find_step (struct target *t, elastic_error_t *err)
{
    char cmd[256], line[16384] = "", state[64], nodes[8192], resv[256], name[256];
    FILE *f;
    int found = 0;

    snprintf (cmd, sizeof (cmd), "scontrol show step -o '%s.%s' 2>&1", t->job, t->step);
    if (!(f = popen (cmd, "r")))
        return errprintf (err,
                          "--join %s.%s: cannot run scontrol: %s",
                          t->job,
                          t->step,
                          strerror (errno));
    while (!found && fgets (line, sizeof (line), f)) {
        char id[128];
        field (line, "StepId", id, sizeof (id));
        snprintf (name, sizeof (name), "%s.%s", t->job, t->step);
        found = !strcmp (id, name);
    }
    pclose (f);
    if (!found) {
        line[strcspn (line, "\n")] = '\0';
        return errprintf (err,
                          "--join %s.%s: no such running job step (scontrol: %s)",
                          t->job,
                          t->step,
                          line[0] ? line : "nothing");
    }
    field (line, "State", state, sizeof (state));
    field (line, "NodeList", nodes, sizeof (nodes));
    field (line, "ResvPorts", resv, sizeof (resv));
    if (strcmp (state, "RUNNING") != 0)
        return errprintf (
            err, "--join %s.%s: the step is %s, not running", t->job, t->step, state);
    if (!nodes[0] || !strcmp (nodes, "(null)"))
        return errprintf (err, "--join %s.%s: the step has no nodes", t->job, t->step);
    if (!strcmp (resv, "(null)"))
        resv[0] = '\0';
    snprintf (t->key, sizeof (t->key), "slurm.%s.%s", t->job, t->step);
    if ((t->nports = jobmap_ports (t->key, resv, t->port, err)) < 0)
        return -1;
    /* the node names, in the step's order (member i = node i) */
    snprintf (cmd, sizeof (cmd), "scontrol show hostnames '%.200s' 2>/dev/null", nodes);
    if (!(f = popen (cmd, "r")))
        return errprintf (err, "--join: cannot run scontrol: %s", strerror (errno));
    while (fgets (name, sizeof (name), f)) {
        char **grown = realloc (t->names, (size_t)(t->nnodes + 1) * sizeof (*grown));
        name[strcspn (name, "\n")] = '\0';
        if (!name[0])
            continue;
        if (!grown || !(grown[t->nnodes] = strdup (name))) {
            t->names = grown ? grown : t->names;
            pclose (f);
            return errprintf (err, "out of memory");
        }
        t->names = grown;
        t->nnodes++;
    }
    pclose (f);
    if (t->nnodes < 1)
        return errprintf (
            err, "--join %s.%s: scontrol named no nodes in '%s'", t->job, t->step, nodes);
    if (!(t->addr = calloc ((size_t)t->nnodes, sizeof (*t->addr))))
        return errprintf (err, "out of memory");
    return meshjob_resolve ((const char *const *)t->names, t->nnodes, t->addr, err);
}

/* Listen on the first of the step's candidate ports free here. */
static int listen_port (const struct target *t, int *port, elastic_error_t *err)
{
    for (int k = 0; k < t->nports; k++) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons ((uint16_t)t->port[k]),
                                 .sin_addr.s_addr = htonl (INADDR_ANY)};
        int one = 1, fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 &&
            setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one)) == 0 &&
            bind (fd, (struct sockaddr *)&sa, sizeof (sa)) == 0 &&
            listen (fd, 128) == 0) {
            *port = t->port[k];
            return fd;
        }
        if (fd >= 0)
            close (fd);
    }
    return errprintf (
        err,
        "--join %s.%s: every candidate mesh port of the step is in use here "
        "(%d from %d)",
        t->job,
        t->step,
        t->nports,
        t->port[0]);
}

/* ---- the joined member ---------------------------------------------------- */

struct joiner {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint32_t n;
    uint8_t *done;    /* [n] the member said the job ends for it */
    char **done_blob; /* [n] */
    int fenced;       /* cut off */
    char fence_why[256];
    int idle_fence; /* our empty contribution is pending */
    int news;       /* something to look at */
};

static void
on_lost (void *arg, const uint32_t *members, size_t count, uint32_t epoch, uint32_t nlive)
{
    struct joiner *j = arg;

    for (size_t i = 0; i < count; i++)
        log_warn (
            "mesh: member %u lost; %u members live (epoch %u)", members[i], nlive, epoch);
    pthread_mutex_lock (&j->lock);
    pthread_cond_broadcast (&j->cond);
    pthread_mutex_unlock (&j->lock);
}

static void on_admitted (void *arg,
                         const uint32_t *members,
                         const char *const *addrs,
                         size_t count,
                         uint32_t epoch,
                         uint32_t nlive)
{
    (void)arg;
    for (size_t i = 0; i < count; i++)
        log_info ("mesh: member %u (%s) joined the job (elastic-exec --join); %u members "
                  "live (epoch %u)",
                  members[i],
                  addrs && addrs[i] ? addrs[i] : "address not known here yet",
                  nlive,
                  epoch);
}

static void
on_broadcast (void *arg, uint32_t origin, int kind, const void *data, size_t len)
{
    struct joiner *j = arg;
    char *copy;

    if (kind != MESH_BCAST_DONE || origin >= j->n || !(copy = malloc (len + 1)))
        return;
    memcpy (copy, data, len);
    copy[len] = '\0';
    pthread_mutex_lock (&j->lock);
    if (!j->done[origin]) {
        j->done[origin] = 1;
        j->done_blob[origin] = copy;
        copy = NULL;
    }
    j->news = 1;
    pthread_cond_broadcast (&j->cond);
    pthread_mutex_unlock (&j->lock);
    free (copy);
}

static void on_self_fence (void *arg, const char *reason)
{
    struct joiner *j = arg;

    pthread_mutex_lock (&j->lock);
    j->fenced = 1;
    snprintf (j->fence_why, sizeof (j->fence_why), "%s", reason);
    pthread_cond_broadcast (&j->cond);
    pthread_mutex_unlock (&j->lock);
}

static void idle_fence_done (void *arg, int status, const struct mesh_fence_result *res)
{
    struct joiner *j = arg;

    (void)status;
    (void)res;
    pthread_mutex_lock (&j->lock);
    j->idle_fence = 0;
    pthread_cond_broadcast (&j->cond);
    pthread_mutex_unlock (&j->lock);
}

static volatile sig_atomic_t got_signal;

static void on_signal (int sig)
{
    got_signal = sig;
}

/* Ask the step's members in turn.  Returns 1 admitted, 0 refused (err
 * says why), -1 when none answered (err says what was seen). */
static int ask (const struct target *t,
                const struct mesh_join_opts *base,
                struct mesh_admission *a,
                char **info,
                elastic_error_t *err)
{
    int refused_conn = 0, tries = 0;
    elastic_error_t last = {{0}}, seen = {{0}}; /* seen: the last that was not refused */

    for (int i = 0; i < t->nnodes; i++)
        for (int k = 0; k < t->nports; k++) {
            struct mesh_join_opts o = *base;
            char addr[96];
            size_t len;
            int status, rc;

            snprintf (addr, sizeof (addr), "%s:%d", t->addr[i], t->port[k]);
            o.addr = addr;
            o.member = (uint32_t)i;
            tries++;
            rc = mesh_join_request (&o, a, info, &len, &status, &last);
            if (rc == 1)
                return 1;
            if (rc == 0)
                return errprintf (err,
                                  "--join %s.%s: refused by node %s (member %d): %s",
                                  t->job,
                                  t->step,
                                  t->names[i],
                                  i,
                                  mesh_admit_status_text ((uint32_t)status));
            if (strstr (last.text, "Connection refused"))
                refused_conn++;
            else
                seen = last;
            log_info ("--join: %s", last.text);
        }
    if (refused_conn == tries)
        return errprintf (
                   err,
                   "--join %s.%s: no member of the step listens on its nodes (%d "
                   "nodes, ports %d..): it does not run elastic-exec in mesh mode, "
                   "or its members have ended",
                   t->job,
                   t->step,
                   t->nnodes,
                   t->port[0]),
               -1;
    return errprintf (err,
                      "--join %s.%s: no member of the step admitted this one (another "
                      "user's job, another ELASTIC_MESH_SECRET, or not elastic-exec in "
                      "mesh mode); last: %s",
                      t->job,
                      t->step,
                      seen.text),
           -1;
}

/* Wait for the job to end, taking part in its fences.  Returns 0 when
 * every live member is done (*agreed 1), 1 when cut off, -1 at a timeout
 * or signal after the job began ending.  live gets the live set. */
static int run_member (
    struct mesh *m, struct joiner *j, uint32_t self, double exit_timeout, uint8_t *live)
{
    char blob[256];
    int sent = 0;
    double deadline = 0;

    meshjob_outcome (blob, sizeof (blob), 0, 0, 0, 0, 0);
    for (;;) {
        struct timespec ts;
        int busy, fenced, others_done = 0, all_done = 1;

        mesh_get_live (m, live, j->n);
        pthread_mutex_lock (&j->lock);
        busy = j->idle_fence;
        fenced = j->fenced;
        for (uint32_t i = 0; i < j->n; i++) {
            others_done |= i != self && j->done[i];
            if (live[i] && !j->done[i] && i != self)
                all_done = 0;
        }
        pthread_mutex_unlock (&j->lock);
        if (fenced)
            return 1;
        if (others_done && !sent) {
            /* the job is ending: this member, with no ranks, is done too */
            if (mesh_broadcast (m, MESH_BCAST_DONE, blob, strlen (blob)) == 0) {
                pthread_mutex_lock (&j->lock);
                j->done[self] = 1;
                j->done_blob[self] = strdup (blob);
                pthread_mutex_unlock (&j->lock);
            }
            sent = 1;
            deadline = mono_now () + exit_timeout;
            log_info ("mesh: the job is ending; this member (no ranks) is done");
        }
        if (sent && all_done)
            return 0;
        if (sent && mono_now () > deadline) {
            log_warn ("mesh: not every member finished within %.0f s", exit_timeout);
            return -1;
        }
        if (got_signal) {
            log_warn ("%s: leaving the job", strsignal (got_signal));
            return -1;
        }
        if (!busy) {
            pthread_mutex_lock (&j->lock);
            j->idle_fence = 1;
            pthread_mutex_unlock (&j->lock);
            if (mesh_fence (m, "", 0, idle_fence_done, j) < 0) {
                pthread_mutex_lock (&j->lock);
                j->idle_fence = 0;
                pthread_mutex_unlock (&j->lock);
            }
        }
        clock_gettime (CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_mutex_lock (&j->lock);
        if (!j->news && !j->fenced)
            pthread_cond_timedwait (&j->cond, &j->lock, &ts);
        j->news = 0;
        pthread_mutex_unlock (&j->lock);
    }
}

/* The node's other tasks of this step follow its leader (meshjob_follow). */
static int own_step (struct meshjob *mj, int nproc_per_node, elastic_error_t *err)
{
    struct jobmap_opts jo = {.nproc_per_node = nproc_per_node};
    const char *tmp = getenv ("TMPDIR");
    struct jobmap *own;

    if (!jobmap_slurm_detect (NULL)) {
        mj->free_slots = nproc_per_node > 0 ? nproc_per_node : 1;
        return 0;
    }
    if (!(own = jobmap_from_slurm (&jo, NULL, err)))
        return -1;
    mj->map = own; /* until admitted: the followers' map */
    mj->free_slots = own->node[own->node_id].nranks;
    mj->nfollowers = own->node[own->node_id].ntasks - 1;
    if (!tmp || tmp[0] != '/')
        tmp = "/tmp";
    snprintf (mj->nodedir,
              sizeof (mj->nodedir),
              "%s/elastic-%d.%s.%s",
              tmp,
              (int)getuid (),
              own->key,
              own->node[own->node_id].name);
    return 0;
}

static int refuse (struct meshjob *mj, const char *text)
{
    fprintf (stderr, "%s: %s\n", prog, text);
    if (mj && mj->map && mj->nfollowers > 0) {
        snprintf (mj->summary, sizeof (mj->summary), "--join refused: %s", text);
        meshjob_publish (mj, 2, NULL);
    }
    meshjob_destroy (mj);
    return 2;
}

int meshjob_join_run (const struct meshjob_join_opts *o)
{
    struct target t = {0};
    struct meshjob *mj = calloc (1, sizeof (*mj));
    struct mesh_join_opts jo = {0};
    struct mesh_admission a = {0};
    struct joiner j = {0};
    struct mesh_config cfg = {0};
    struct meshjob_member *mm = NULL;
    elastic_error_t err = {{0}};
    char *info = NULL;
    struct mesh *m = NULL;
    uint8_t *live = NULL;
    int fd = -1, port = 0, rc, status = 1;

    if (!mj)
        return refuse (NULL, "out of memory");
    pthread_mutex_init (&mj->lock, NULL);
    mj->listen_fd = -1;
    if (meshjob_join_parse (
            o->target, t.job, sizeof (t.job), t.step, sizeof (t.step), &err) < 0 ||
        own_step (mj, o->nproc_per_node, &err) < 0)
        return refuse (mj, err.text);
    if (mj->map && !mj->map->leader) {
        status = meshjob_follow (mj);
        meshjob_destroy (mj);
        return status;
    }
    if (mj->map && meshjob_lead (mj, &err) < 0)
        return refuse (mj, err.text);
    if (find_step (&t, &err) < 0 ||
        meshjob_auth (t.key,
                      1,
                      mj->key,
                      &mj->munge,
                      mj->munge_socket,
                      sizeof (mj->munge_socket),
                      &err) < 0 ||
        (fd = listen_port (&t, &port, &err)) < 0) {
        target_free (&t);
        return refuse (mj, err.text);
    }
    jo.listen_port = port;
    jo.auth = mj->munge ? MESH_AUTH_MUNGE : MESH_AUTH_SECRET;
    jo.key = mj->key;
    jo.job = t.key;
    jo.munge_socket = mj->munge_socket[0] ? mj->munge_socket : NULL;
    jo.timeout = 5;
    log_info (
        "--join %s.%s: asking its members (%d nodes, ports %d..; this member listens "
        "on port %d)",
        t.job,
        t.step,
        t.nnodes,
        t.port[0],
        port);
    if ((rc = ask (&t, &jo, &a, &info, &err)) != 1) {
        close (fd);
        target_free (&t);
        return refuse (mj, err.text);
    }
    /* admitted: the job's map from its shape, this member's slot */
    {
        struct jobmap *job = meshjob_shape_parse (info, &err);
        if (!job) {
            close (fd);
            target_free (&t);
            mesh_admission_free (&a);
            free (info);
            return refuse (mj, err.text);
        }
        jobmap_destroy (mj->map);
        mj->map = job;
    }
    mj->joined = 1;
    mj->member = a.slot;
    mj->node_timeout = o->node_timeout > 0 ? o->node_timeout : 2.0;
    log_info ("joined job %s as member %u of %u slots (epoch %u): no ranks, room for %d",
              mj->map->key,
              a.slot,
              a.n,
              a.epoch,
              mj->free_slots);
    fprintf (stderr,
             "%s: joined job %s as member %u (no ranks; room for %d)\n",
             prog,
             mj->map->key,
             a.slot,
             mj->free_slots);
    pthread_mutex_init (&j.lock, NULL);
    pthread_cond_init (&j.cond, NULL);
    j.n = a.n;
    if (!(j.done = calloc (a.n, 1)) || !(j.done_blob = calloc (a.n, sizeof (char *))) ||
        !(live = calloc (a.n, 1)) ||
        !(mm = calloc ((size_t)mj->map->nnodes, sizeof (*mm)))) {
        close (fd);
        status = refuse (NULL, "out of memory");
        goto out;
    }
    cfg.nmembers = a.n;
    cfg.self = a.slot;
    cfg.addrs = (const char *const *)a.addrs;
    cfg.slots = a.slots;
    cfg.base = a.base;
    cfg.joining = 1;
    cfg.admit_info = info; /* it admits newcomers too */
    cfg.admit_info_len = strlen (info);
    cfg.listen_fd = fd;
    cfg.ports = t.port;
    cfg.nports = (uint32_t)t.nports;
    cfg.node_timeout = mj->node_timeout;
    cfg.join_timeout = 60;
    cfg.key = mj->key;
    cfg.auth = jo.auth;
    cfg.job = t.key;
    cfg.munge_socket = jo.munge_socket;
    cfg.ops.lost = on_lost;
    cfg.ops.admitted = on_admitted;
    cfg.ops.broadcast = on_broadcast;
    cfg.ops.self_fence = on_self_fence;
    cfg.arg = &j;
    if (!(m = mesh_create (&cfg, &err)) || mesh_start (m, &err) < 0) {
        if (!m)
            close (fd);
        fprintf (stderr, "%s: %s\n", prog, err.text);
        status = 1;
        goto out;
    }
    signal (SIGTERM, on_signal);
    signal (SIGINT, on_signal);
    rc = run_member (m, &j, a.slot, o->exit_timeout > 0 ? o->exit_timeout : 300, live);
    if (rc == 1) {
        fprintf (stderr,
                 "%s: this member was cut off from the job's mesh (%s)\n",
                 prog,
                 j.fence_why);
        snprintf (mj->summary,
                  sizeof (mj->summary),
                  "job %s: this member was cut off from the job's mesh (exit 1)",
                  mj->map->key);
        status = 1;
    } else {
        mesh_get_live (m, live, a.n);
        pthread_mutex_lock (&j.lock);
        for (int i = 0; i < mj->map->nnodes && (uint32_t)i < a.n; i++) {
            mm[i].outcome = j.done_blob[i];
            mm[i].lost = !live[i] && !j.done[i];
        }
        pthread_mutex_unlock (&j.lock);
        meshjob_decide (mj, mm, rc == 0);
        status = mj->status;
    }
    fprintf (stderr, "%s: %s\n", prog, mj->summary);
    meshjob_publish (mj, status, mj->agreed ? o->status_file : NULL);
out:
    mesh_destroy (m);
    for (uint32_t i = 0; j.done_blob && i < j.n; i++)
        free (j.done_blob[i]);
    free (j.done_blob);
    free (j.done);
    free (live);
    free (mm);
    free (info);
    mesh_admission_free (&a);
    target_free (&t);
    meshjob_destroy (mj);
    return status;
}
