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
 *   4. the member runs (main.c): an agent with no workers of its own
 *      (spec->hosting) and the PMIx backend, whose mesh transport starts
 *      with the admitter's view (pmixhost_mesh_opts.admission); it keeps
 *      an empty contribution in the mesh's next fence, says its free
 *      slots, starts the processes the job spawns onto it
 *      (pmix/pmix_grow.c), and once every member that started with the
 *      job is done (pmixhost_mesh_job_ending) and its own processes are
 *      gone, ends as the members do (MESH_BCAST_DONE, meshjob_decide over
 *      the job's nodes).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

/* The node's other tasks of this step follow its leader (meshjob_follow). */
static int own_step (struct meshjob *mj, int nproc_per_node, elastic_error_t *err)
{
    struct jobmap_opts jo = {.nproc_per_node = nproc_per_node};
    const char *tmp = getenv ("TMPDIR");
    struct jobmap *own;

    if (!jobmap_slurm_detect (NULL)) {
        mj->free_slots = nproc_per_node > 0 ? nproc_per_node : 1;
        if (gethostname (mj->self_name, sizeof (mj->self_name)) < 0)
            snprintf (mj->self_name, sizeof (mj->self_name), "localhost");
        mj->self_name[sizeof (mj->self_name) - 1] = '\0';
        return 0;
    }
    if (!(own = jobmap_from_slurm (&jo, NULL, err)))
        return -1;
    mj->map = own; /* until admitted: the followers' map */
    mj->free_slots = own->node[own->node_id].nranks;
    snprintf (mj->self_name, sizeof (mj->self_name), "%s", own->node[own->node_id].name);
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

int meshjob_join_admit (const struct meshjob_join_opts *o,
                        struct meshjob **mjp,
                        int *status)
{
    struct target t = {0};
    struct meshjob *mj = calloc (1, sizeof (*mj));
    struct mesh_join_opts jo = {0};
    struct mesh_admission *a = NULL;
    elastic_error_t err = {{0}};
    char *info = NULL;
    int fd = -1, port = 0, rc;

    *mjp = NULL;
    *status = 2;
    if (!mj) {
        *status = refuse (NULL, "out of memory");
        return 0;
    }
    pthread_mutex_init (&mj->lock, NULL);
    mj->listen_fd = -1;
    if (meshjob_join_parse (
            o->target, t.job, sizeof (t.job), t.step, sizeof (t.step), &err) < 0 ||
        own_step (mj, o->nproc_per_node, &err) < 0) {
        *status = refuse (mj, err.text);
        return 0;
    }
    if (mj->map && !mj->map->leader) {
        *status = meshjob_follow (mj);
        meshjob_destroy (mj);
        return 0;
    }
    if ((mj->map && meshjob_lead (mj, &err) < 0) || !(a = calloc (1, sizeof (*a)))) {
        *status = refuse (mj, a ? err.text : "out of memory");
        return 0;
    }
    if (find_step (&t, &err) < 0 ||
        meshjob_auth (t.key,
                      1,
                      mj->key,
                      &mj->munge,
                      mj->munge_socket,
                      sizeof (mj->munge_socket),
                      &err) < 0 ||
        (fd = listen_port (&t, &port, &err)) < 0)
        goto refused;
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
    if ((rc = ask (&t, &jo, a, &info, &err)) != 1)
        goto refused;
    /* admitted: the job's map from its shape (none of its nodes is this
     * one: node_id -1), this member's slot */
    {
        struct jobmap *job = meshjob_shape_parse (info, &err);
        if (!job)
            goto refused;
        jobmap_destroy (mj->map);
        mj->map = job;
        job->leader = 1; /* this task hosts the member's PMIx server */
    }
    if (!(mj->join_ports = malloc ((size_t)t.nports * sizeof (int)))) {
        snprintf (err.text, sizeof (err.text), "out of memory");
        goto refused;
    }
    memcpy (mj->join_ports, t.port, (size_t)t.nports * sizeof (int));
    mj->njoin_ports = t.nports;
    mj->joined = 1;
    mj->member = a->slot;
    mj->admission = a;
    mj->nslots = a->n;
    mj->admit_info = info;
    mj->listen_fd = fd;
    mj->node_timeout = o->node_timeout > 0 ? o->node_timeout : 2.0;
    log_info ("joined job %s as member %u of %u slots (epoch %u): no ranks, room for %d",
              mj->map->key,
              a->slot,
              a->n,
              a->epoch,
              mj->free_slots);
    fprintf (stderr,
             "%s: joined job %s as member %u (no ranks; room for %d)\n",
             prog,
             mj->map->key,
             a->slot,
             mj->free_slots);
    target_free (&t);
    *mjp = mj;
    *status = 0;
    return 1;
refused:
    if (fd >= 0)
        close (fd);
    target_free (&t);
    if (a)
        mesh_admission_free (a);
    free (a);
    free (info);
    *status = refuse (mj, err.text);
    return 0;
}
