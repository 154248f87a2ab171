/* jobmap.c - the job's full map, learned by every member from its launcher */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"
#include "common/parse.h"
#include "jobmap.h"

extern char **environ;

/* ---- the environment ------------------------------------------------------ */

static const char *envget (char *const envp[], const char *name)
{
    size_t len = strlen (name);

    for (char *const *e = envp ? envp : environ; e && *e; e++)
        if (!strncmp (*e, name, len) && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

/* The first of two spellings that is set (b may be NULL); *which gets its
 * name. */
static const char *
envget2 (char *const envp[], const char *a, const char *b, const char **which)
{
    const char *v = envget (envp, a);

    *which = a;
    if (!v && b && (v = envget (envp, b)))
        *which = b;
    return v;
}

/* Integer variable `name` in [min, max]: 1 and *out if set, 0 if unset or
 * empty, -1 with err if it is not such a number. */
static int env_long (char *const envp[],
                     const char *name,
                     long min,
                     long max,
                     long *out,
                     elastic_error_t *err)
{
    const char *v = envget (envp, name);

    if (!v || !*v)
        return 0;
    if (parse_long (name, v, min, max, out, err) < 0)
        return -1;
    return 1;
}

/* A required integer variable; -1 with err when unset. */
static int env_need (char *const envp[],
                     const char *name,
                     long min,
                     long max,
                     long *out,
                     elastic_error_t *err)
{
    int rc = env_long (envp, name, min, max, out, err);

    if (rc == 0)
        return errprintf (err, "%s is not set (a Slurm task always has it)", name);
    return rc < 0 ? -1 : 0;
}

static int all_digits (const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit ((unsigned char)*s))
            return 0;
    return 1;
}

int jobmap_slurm_detect (char *const envp[])
{
    const char *which;

    return envget2 (envp, "SLURM_JOB_ID", "SLURM_JOBID", &which) &&
           envget2 (envp, "SLURM_STEP_ID", "SLURM_STEPID", &which);
}

/* ---- building a map ------------------------------------------------------- */

void jobmap_destroy (struct jobmap *m)
{
    int saved = errno;

    if (m) {
        for (int i = 0; m->node && i < m->nnodes; i++) {
            free (m->node[i].name);
            free (m->node[i].ranks);
        }
        free (m->node);
        free (m->rank_node);
        free (m->rank_local);
        free (m);
    }
    errno = saved;
}

static struct jobmap *map_alloc (int nnodes, elastic_error_t *err)
{
    struct jobmap *m = calloc (1, sizeof (*m));

    if (!m || !(m->node = calloc ((size_t)nnodes, sizeof (m->node[0])))) {
        free (m);
        errprintf (err, "out of memory building the job map");
        return NULL;
    }
    m->nnodes = nnodes;
    m->task_rank = -1;
    return m;
}

/* Place count[i] ranks on node i by the map's distribution (block: all of
 * a node's ranks before the next node's; cyclic: one per node in turn;
 * plane: m->plane per node in turn).  Returns 0, or -1 with err. */
static int place_ranks (struct jobmap *m, const int *count, elastic_error_t *err)
{
    long world = 0;
    int step, *left = NULL, rank = 0;

    for (int i = 0; i < m->nnodes; i++)
        world += count[i];
    if (world < 1 || world > JOBMAP_MAX_RANKS)
        return errprintf (
            err, "the job has %ld ranks (expected 1..%d)", world, JOBMAP_MAX_RANKS);
    m->world_size = (int)world;
    if (!(m->rank_node = calloc ((size_t)world, sizeof (int))) ||
        !(m->rank_local = calloc ((size_t)world, sizeof (int))) ||
        !(left = calloc ((size_t)m->nnodes, sizeof (int))))
        goto nomem;
    for (int i = 0; i < m->nnodes; i++) {
        m->node[i].nranks = count[i];
        left[i] = count[i];
        if (count[i] > 0 && !(m->node[i].ranks = calloc ((size_t)count[i], sizeof (int))))
            goto nomem;
    }
    step = m->dist == JOBMAP_CYCLIC ? 1 : m->dist == JOBMAP_PLANE ? m->plane : INT_MAX;
    while (rank < m->world_size) {
        for (int i = 0; i < m->nnodes && rank < m->world_size; i++) {
            struct jobmap_node *n = &m->node[i];
            int take = left[i] < step ? left[i] : step;
            for (int k = 0; k < take; k++) {
                int local = n->nranks - left[i];
                n->ranks[local] = rank;
                m->rank_node[rank] = i;
                m->rank_local[rank] = local;
                left[i]--;
                rank++;
            }
        }
    }
    free (left);
    return 0;
nomem:
    free (left);
    return errprintf (err, "out of memory building the job map");
}

static uint32_t fnv1a32 (const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

/* The deterministic port candidates of m->key. */
static int
hash_ports (struct jobmap *m, int base, int range, const char *what, elastic_error_t *err)
{
    uint32_t h;

    if (!base)
        base = JOBMAP_PORT_BASE;
    if (!range)
        range = JOBMAP_PORT_RANGE;
    if (base < 1024 || base > 65535 || range < 1 || (long)base + range - 1 > 65535)
        return errprintf (err,
                          "%s: mesh ports %d..%ld are not accepted (base 1024..65535, "
                          "range 1 or more, the last port at most 65535)",
                          what,
                          base,
                          (long)base + range - 1);
    h = fnv1a32 (m->key);
    m->nports = range < 4 ? range : 4;
    for (int k = 0; k < m->nports; k++)
        m->port[k] = base + (int)((h + (uint32_t)k) % (uint32_t)range);
    m->port_reserved = 0;
    return 0;
}

/* SLURM_STEP_RESV_PORTS "12000-12003" or "12000,12005-12006": the first
 * JOBMAP_MAX_PORTS ports.  Returns 0, or -1 with err. */
static int resv_ports (struct jobmap *m, const char *s, elastic_error_t *err)
{
    const char *p = s;

    m->nports = 0;
    while (*p) {
        char *end;
        long lo, hi;

        if (!isdigit ((unsigned char)*p))
            goto bad;
        lo = strtol (p, &end, 10);
        hi = lo;
        if (*end == '-') {
            if (!isdigit ((unsigned char)end[1]))
                goto bad;
            hi = strtol (end + 1, &end, 10);
        }
        if (lo < 1 || hi > 65535 || hi < lo)
            goto bad;
        for (long v = lo; v <= hi && m->nports < JOBMAP_MAX_PORTS; v++)
            m->port[m->nports++] = (int)v;
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            goto bad;
        p = end;
    }
    if (m->nports == 0)
        goto bad;
    m->port_reserved = 1;
    return 0;
bad:
    return errprintf (err,
                      "SLURM_STEP_RESV_PORTS='%s' is not a port list (expected e.g. "
                      "12000-12003 or 12000,12005)",
                      s);
}

/* ---- Slurm ---------------------------------------------------------------- */

/* The distribution of tasks over nodes (SLURM_DISTRIBUTION: its part
 * before ':' or ','). */
static int slurm_dist (struct jobmap *m, char *const envp[], elastic_error_t *err)
{
    const char *d = envget (envp, "SLURM_DISTRIBUTION");
    size_t len;
    long plane = 0;

    m->dist = JOBMAP_BLOCK;
    if (!d || !*d)
        return 0;
    len = strcspn (d, ":,");
    if ((len == 5 && !strncmp (d, "block", 5)) ||
        (len == 7 && !strncmp (d, "unknown", 7)))
        return 0;
    if (len == 6 && !strncmp (d, "cyclic", 6)) {
        m->dist = JOBMAP_CYCLIC;
        return 0;
    }
    if (!strncmp (d, "plane", 5) && (len == 5 || d[5] == '=')) {
        char buf[32];
        int rc;

        if (d[5] == '=') {
            snprintf (buf, sizeof (buf), "%.*s", (int)(len - 6), d + 6);
            if (parse_long ("SLURM_DISTRIBUTION plane size", buf, 1, 65535, &plane, err) <
                0)
                return -1;
        } else if ((rc = env_long (
                        envp, "SLURM_DIST_PLANESIZE", 1, 65535, &plane, err)) <= 0)
            return rc < 0 ? -1
                          : errprintf (err,
                                       "SLURM_DISTRIBUTION=%s needs SLURM_DIST_PLANESIZE",
                                       d);
        m->dist = JOBMAP_PLANE;
        m->plane = (int)plane;
        return 0;
    }
    return errprintf (err,
                      "SLURM_DISTRIBUTION=%s is not supported (expected block, cyclic or "
                      "plane=N; the part after ':' may be anything)",
                      d);
}

/* The step's nodes and their task counts into a new map. */
static struct jobmap *slurm_nodes (char *const envp[], int **counts, elastic_error_t *err)
{
    const char *list, *lvar, *tpn, *tvar;
    char **names = NULL;
    struct jobmap *m = NULL;
    long want;
    int n = 0, nc, rc;

    *counts = NULL;
    list = envget2 (envp, "SLURM_STEP_NODELIST", "SLURM_NODELIST", &lvar);
    if (!list)
        list = envget2 (envp, "SLURM_JOB_NODELIST", NULL, &lvar);
    if (!list)
        return errprintf (err, "SLURM_STEP_NODELIST is not set (nor SLURM_NODELIST)"),
               NULL;
    if ((n = hostlist_expand (list, JOBMAP_MAX_NODES, &names, err)) < 0) {
        errprefix (err, "%s", lvar);
        return NULL;
    }
    if ((rc = env_long (envp, "SLURM_STEP_NUM_NODES", 1, JOBMAP_MAX_NODES, &want, err)) <
            0 ||
        (rc > 0 && want != n)) {
        if (rc > 0)
            errprintf (err,
                       "SLURM_STEP_NUM_NODES=%ld but %s='%s' names %d node%s",
                       want,
                       lvar,
                       list,
                       n,
                       n == 1 ? "" : "s");
        goto error;
    }
    tpn = envget2 (envp, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", &tvar);
    if (!tpn) {
        errprintf (err,
                   "SLURM_STEP_TASKS_PER_NODE is not set (nor SLURM_TASKS_PER_NODE)");
        goto error;
    }
    if (!(*counts = calloc ((size_t)n, sizeof (int))) || !(m = map_alloc (n, err))) {
        errprintf (err, "out of memory building the job map");
        goto error;
    }
    if ((nc = slurm_expand_counts (tpn, *counts, n, err)) < 0) {
        errprefix (err, "%s", tvar);
        goto error;
    }
    if (nc != n) {
        errprintf (err,
                   "%s='%s' counts tasks on %d node%s but %s='%s' names %d",
                   tvar,
                   tpn,
                   nc,
                   nc == 1 ? "" : "s",
                   lvar,
                   list,
                   n);
        goto error;
    }
    for (int i = 0; i < n; i++) {
        if ((*counts)[i] < 1) {
            errprintf (err,
                       "%s='%s' gives node %d no task (expected 1 or more per node)",
                       tvar,
                       tpn,
                       i);
            goto error;
        }
        m->node[i].name = names[i];
        m->node[i].ntasks = (*counts)[i];
        names[i] = NULL;
    }
    free (names); /* every name moved into the map */
    return m;
error:
    /* names moved into the map are NULL here: free the others one by one
     * (hostlist_names_free stops at the first NULL) */
    for (int i = 0; names && i < n; i++)
        free (names[i]);
    free (names);
    jobmap_destroy (m);
    free (*counts);
    *counts = NULL;
    return NULL;
}

/* Job and step ids, and the key. */
static int slurm_ids (struct jobmap *m, char *const envp[], elastic_error_t *err)
{
    const char *wj, *ws;
    const char *job = envget2 (envp, "SLURM_JOB_ID", "SLURM_JOBID", &wj);
    const char *step = envget2 (envp, "SLURM_STEP_ID", "SLURM_STEPID", &ws);

    if (!job || !step)
        return errprintf (err,
                          "%s is not set: not a Slurm job step",
                          job ? "SLURM_STEP_ID" : "SLURM_JOB_ID");
    if (!all_digits (job) || strlen (job) >= sizeof (m->jobid))
        return errprintf (err, "%s=%s is not a job id (expected digits)", wj, job);
    if (!all_digits (step) || strlen (step) >= sizeof (m->stepid))
        return errprintf (err, "%s=%s is not a step id (expected digits)", ws, step);
    snprintf (m->jobid, sizeof (m->jobid), "%s", job);
    snprintf (m->stepid, sizeof (m->stepid), "%s", step);
    snprintf (m->key, sizeof (m->key), "slurm.%s.%s", job, step);
    return 0;
}

/* SLURM_GTIDS, when set: the global task ids of this node. */
static int
slurm_check_gtids (const struct jobmap *m, char *const envp[], elastic_error_t *err)
{
    const struct jobmap_node *n = &m->node[m->node_id];
    const char *g = envget (envp, "SLURM_GTIDS"), *p = g;

    if (!g || !*g)
        return 0;
    for (int k = 0; k < n->nranks; k++) {
        char *end;
        long v = strtol (p, &end, 10);
        if (end == p || v != n->ranks[k] || (*end != ',' && *end) ||
            (k + 1 < n->nranks) != (*end == ','))
            return errprintf (err,
                              "SLURM_GTIDS=%s is not what SLURM_DISTRIBUTION gives "
                              "node %d (%d ranks from %d)",
                              g,
                              m->node_id,
                              n->nranks,
                              n->ranks[0]);
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* Who this task is: node, local task, rank; checked against the map. */
static int slurm_self (struct jobmap *m, char *const envp[], elastic_error_t *err)
{
    long node, local = 0, procid = -1;
    const char *host;
    int rc;

    if (env_need (envp, "SLURM_NODEID", 0, INT_MAX, &node, err) < 0)
        return -1;
    if (node >= m->nnodes)
        return errprintf (err,
                          "SLURM_NODEID=%ld is not a node of this step (expected 0..%d)",
                          node,
                          m->nnodes - 1);
    m->node_id = (int)node;
    if ((rc = env_long (envp, "SLURM_LOCALID", 0, INT_MAX, &local, err)) < 0)
        return -1;
    if (local >= m->node[node].ntasks)
        return errprintf (err,
                          "SLURM_LOCALID=%ld is not a task of node %ld (it runs %d: "
                          "expected 0..%d)",
                          local,
                          node,
                          m->node[node].ntasks,
                          m->node[node].ntasks - 1);
    m->local_id = (int)local;
    m->leader = local == 0;
    host = envget (envp, "SLURMD_NODENAME");
    if (host && *host && strcmp (host, m->node[node].name))
        return errprintf (err,
                          "SLURMD_NODENAME=%s but node %ld (SLURM_NODEID) of the step's "
                          "node list is %s",
                          host,
                          node,
                          m->node[node].name);
    if ((rc = env_long (envp, "SLURM_PROCID", 0, INT_MAX, &procid, err)) < 0)
        return -1;
    if (m->nproc_per_node == 0) {
        int want = m->node[node].ranks[local];
        if (rc > 0 && procid != want)
            return errprintf (
                err,
                "SLURM_PROCID=%ld but %s distribution puts rank %d at task "
                "%ld of node %ld (set SLURM_DISTRIBUTION to how srun placed "
                "the tasks)",
                procid,
                m->dist == JOBMAP_CYCLIC  ? "cyclic"
                : m->dist == JOBMAP_PLANE ? "plane"
                                          : "block",
                want,
                local,
                node);
        m->task_rank = want;
        return slurm_check_gtids (m, envp, err);
    }
    if (rc > 0 && procid != node)
        return errprintf (err,
                          "SLURM_PROCID=%ld on node %ld: --nproc-per-node needs one task "
                          "per node, task i on node i",
                          procid,
                          node);
    return 0;
}

/* Shape N: one task per node, N ranks each, block. */
static int per_node_counts (struct jobmap *m, int *counts, elastic_error_t *err)
{
    for (int i = 0; i < m->nnodes; i++) {
        if (counts[i] != 1)
            return errprintf (err,
                              "SLURM_STEP_TASKS_PER_NODE: node %d (%s) runs %d tasks; "
                              "--nproc-per-node needs one task per node (srun "
                              "--ntasks-per-node=1)",
                              i,
                              m->node[i].name,
                              counts[i]);
        counts[i] = m->nproc_per_node;
    }
    m->dist = JOBMAP_BLOCK;
    return 0;
}

static int check_opts (const struct jobmap_opts *o, elastic_error_t *err)
{
    if (o->nproc_per_node < 0 || o->nproc_per_node > 65535)
        return errprintf (err,
                          "--nproc-per-node %d is not accepted for a job map (0..65535)",
                          o->nproc_per_node);
    return 0;
}

struct jobmap *jobmap_from_slurm (const struct jobmap_opts *opts,
                                  char *const envp[],
                                  elastic_error_t *err)
{
    struct jobmap_opts o = {0};
    struct jobmap *m = NULL;
    int *counts = NULL;
    long ntasks;
    const char *resv;
    int rc;

    if (opts)
        o = *opts;
    if (check_opts (&o, err) < 0)
        return NULL;
    if (!jobmap_slurm_detect (envp)) {
        errprintf (err,
                   "SLURM_JOB_ID and SLURM_STEP_ID are not set: not a Slurm job step");
        return NULL;
    }
    if (!(m = slurm_nodes (envp, &counts, err)))
        return NULL;
    m->source = JOBMAP_SLURM;
    m->nproc_per_node = o.nproc_per_node;
    if (slurm_ids (m, envp, err) < 0)
        goto error;
    if ((rc = env_long (
             envp, "SLURM_STEP_NUM_TASKS", 1, JOBMAP_MAX_RANKS, &ntasks, err)) < 0)
        goto error;
    if (rc > 0) {
        long sum = 0;
        for (int i = 0; i < m->nnodes; i++)
            sum += counts[i];
        if (sum != ntasks) {
            errprintf (err,
                       "SLURM_STEP_NUM_TASKS=%ld but the tasks per node add up to %ld",
                       ntasks,
                       sum);
            goto error;
        }
    }
    if (o.nproc_per_node > 0 ? per_node_counts (m, counts, err) < 0
                             : slurm_dist (m, envp, err) < 0)
        goto error;
    if (place_ranks (m, counts, err) < 0 || slurm_self (m, envp, err) < 0)
        goto error;
    if ((resv = envget (envp, "SLURM_STEP_RESV_PORTS")) && *resv) {
        if (resv_ports (m, resv, err) < 0)
            goto error;
    } else if (hash_ports (m, o.port_base, o.port_range, "mesh port", err) < 0)
        goto error;
    free (counts);
    return m;
error:
    free (counts);
    jobmap_destroy (m);
    return NULL;
}

/* ---- torchrun and one node ------------------------------------------------ */

int jobmap_parse_endpoint (const char *what,
                           const char *ep,
                           int default_port,
                           char *host,
                           size_t hostsz,
                           int *port,
                           elastic_error_t *err)
{
    const char *colon, *h = ep;
    size_t hlen;
    long p = default_port;

    if (!ep || !*ep)
        return errprintf (err, "%s: empty (expected HOST:PORT)", what);
    if (*ep == '[') {
        const char *rb = strchr (ep, ']');
        if (!rb || rb == ep + 1 || (rb[1] && rb[1] != ':'))
            return errprintf (err,
                              "%s '%s' is not [ADDRESS]:PORT (expected e.g. [::1]:29400)",
                              what,
                              ep);
        h = ep + 1;
        hlen = (size_t)(rb - h);
        colon = rb[1] ? rb + 1 : NULL;
    } else {
        colon = strrchr (ep, ':');
        if (colon && strchr (ep, ':') != colon)
            return errprintf (err,
                              "%s '%s': write an IPv6 address in brackets ([::1]:29400)",
                              what,
                              ep);
        hlen = colon ? (size_t)(colon - ep) : strlen (ep);
    }
    if (hlen == 0 || hlen >= hostsz)
        return errprintf (err,
                          "%s '%s' has no host or one longer than %zu characters",
                          what,
                          ep,
                          hostsz - 1);
    for (size_t i = 0; i < hlen; i++)
        if (!isalnum ((unsigned char)h[i]) && !strchr ("-._:%", h[i]))
            return errprintf (err, "%s '%s' is not a host name or address", what, ep);
    if (colon) {
        elastic_error_t e2;
        if (parse_long (what, colon + 1, 1, 65535, &p, &e2) < 0)
            return errprintf (err,
                              "%s '%s': port '%s' is not accepted (1..65535)",
                              what,
                              ep,
                              colon + 1);
    }
    memcpy (host, h, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return 0;
}

struct jobmap *jobmap_from_torchrun (const struct jobmap_torchrun *t,
                                     elastic_error_t *err)
{
    struct jobmap *m = NULL;
    const char *run_id = t && t->run_id && *t->run_id ? t->run_id : "none";
    int *counts = NULL;

    if (!t)
        return errprintf (err, "jobmap_from_torchrun: no flags"), NULL;
    if (t->nnodes < 1 || t->nnodes > JOBMAP_MAX_NODES)
        return errprintf (err,
                          "--nnodes %d is not accepted for a fixed job map (1..%d)",
                          t->nnodes,
                          JOBMAP_MAX_NODES),
               NULL;
    if (t->node_rank < 0 || t->node_rank >= t->nnodes)
        return errprintf (err,
                          "--node-rank %d is not accepted with --nnodes %d (0..%d)",
                          t->node_rank,
                          t->nnodes,
                          t->nnodes - 1),
               NULL;
    if (t->nproc_per_node < 1 || t->nproc_per_node > 65535 ||
        (long)t->nproc_per_node * t->nnodes > JOBMAP_MAX_RANKS)
        return errprintf (
                   err,
                   "--nproc-per-node %d is not accepted with --nnodes %d (1..65535, "
                   "at most %d ranks in all)",
                   t->nproc_per_node,
                   t->nnodes,
                   JOBMAP_MAX_RANKS),
               NULL;
    for (const char *p = run_id; *p; p++)
        if (!isalnum ((unsigned char)*p) && !strchr ("-._", *p))
            return errprintf (
                       err, "--rdzv-id '%s' is not accepted (A-Z a-z 0-9 - . _)", run_id),
                   NULL;
    if (!(m = map_alloc (t->nnodes, err)))
        return NULL;
    m->source = JOBMAP_TORCHRUN;
    m->nproc_per_node = t->nproc_per_node;
    if (jobmap_parse_endpoint ("--rdzv-endpoint",
                               t->rdzv_endpoint,
                               29400,
                               m->rdzv_host,
                               sizeof (m->rdzv_host),
                               &m->rdzv_port,
                               err) < 0)
        goto error;
    snprintf (m->jobid, sizeof (m->jobid), "%.63s", run_id);
    snprintf (m->key,
              sizeof (m->key),
              "torchrun.%.200s@%s:%d",
              run_id,
              m->rdzv_host,
              m->rdzv_port);
    if (!(counts = calloc ((size_t)t->nnodes, sizeof (int)))) {
        errprintf (err, "out of memory building the job map");
        goto error;
    }
    for (int i = 0; i < t->nnodes; i++) {
        counts[i] = t->nproc_per_node;
        m->node[i].ntasks = 1;
    }
    if (place_ranks (m, counts, err) < 0 ||
        hash_ports (m, t->port_base, t->port_range, "mesh port", err) < 0)
        goto error;
    m->node_id = t->node_rank;
    m->leader = 1;
    free (counts);
    return m;
error:
    free (counts);
    jobmap_destroy (m);
    return NULL;
}

struct jobmap *jobmap_single (int nranks, const char *host, elastic_error_t *err)
{
    struct jobmap *m;

    if (nranks < 1 || nranks > 65535)
        return errprintf (err, "ranks: %d is not accepted (1..65535)", nranks), NULL;
    if (!(m = map_alloc (1, err)))
        return NULL;
    m->source = JOBMAP_SINGLE;
    m->nproc_per_node = nranks;
    m->node[0].ntasks = 1;
    snprintf (m->key, sizeof (m->key), "single");
    if (place_ranks (m, &nranks, err) < 0 ||
        (host && jobmap_set_host (m, 0, host, err) < 0)) {
        jobmap_destroy (m);
        return NULL;
    }
    m->leader = 1;
    return m;
}

struct jobmap *jobmap_from_shape (const char *key,
                                  int nnodes,
                                  const char *const *names,
                                  const int *nranks,
                                  elastic_error_t *err)
{
    struct jobmap *m;

    if (!key || strlen (key) >= sizeof (m->key) || nnodes < 1 ||
        nnodes > JOBMAP_MAX_NODES)
        return errprintf (err,
                          "job shape: %d nodes of job '%s' (expected 1..%d nodes, a key "
                          "shorter than %zu bytes)",
                          nnodes,
                          key ? key : "",
                          JOBMAP_MAX_NODES,
                          sizeof (m->key)),
               NULL;
    for (int i = 0; i < nnodes; i++)
        if (nranks[i] < 1 || nranks[i] > 65535)
            return errprintf (err,
                              "job shape: node %d: %d ranks (expected 1..65535)",
                              i,
                              nranks[i]),
                   NULL;
    if (!(m = map_alloc (nnodes, err)))
        return NULL;
    m->source = JOBMAP_SLURM;
    snprintf (m->key, sizeof (m->key), "%s", key);
    for (int i = 0; i < nnodes; i++)
        m->node[i].ntasks = 1;
    if (place_ranks (m, nranks, err) < 0) {
        jobmap_destroy (m);
        return NULL;
    }
    for (int i = 0; i < nnodes; i++)
        if (jobmap_set_host (m, i, names[i], err) < 0) {
            jobmap_destroy (m);
            return NULL;
        }
    m->node_id = -1;
    m->task_rank = -1;
    return m;
}

int jobmap_ports (const char *key,
                  const char *resv,
                  int port[JOBMAP_MAX_PORTS],
                  elastic_error_t *err)
{
    struct jobmap m;

    memset (&m, 0, sizeof (m));
    snprintf (m.key, sizeof (m.key), "%s", key);
    if (resv && *resv ? resv_ports (&m, resv, err) < 0
                      : hash_ports (&m, 0, 0, "mesh port", err) < 0)
        return -1;
    memcpy (port, m.port, sizeof (m.port));
    return m.nports;
}

/* ---- queries -------------------------------------------------------------- */

int jobmap_set_host (struct jobmap *m, int node, const char *name, elastic_error_t *err)
{
    char *copy;

    if (!m || node < 0 || node >= m->nnodes)
        return errprintf (err,
                          "node %d is not in the job map (expected 0..%d)",
                          node,
                          m ? m->nnodes - 1 : -1);
    if (!name || !*name || strlen (name) > 255)
        return errprintf (
            err, "node %d: host name '%s' is not accepted", node, name ? name : "");
    if (!(copy = strdup (name)))
        return errprintf (err, "out of memory");
    free (m->node[node].name);
    m->node[node].name = copy;
    return 0;
}

int jobmap_hosts_known (const struct jobmap *m)
{
    for (int i = 0; m && i < m->nnodes; i++)
        if (!m->node[i].name)
            return 0;
    return m != NULL;
}

int jobmap_rank_node (const struct jobmap *m, int rank)
{
    return m && rank >= 0 && rank < m->world_size ? m->rank_node[rank] : -1;
}

int jobmap_local_rank (const struct jobmap *m, int rank)
{
    return m && rank >= 0 && rank < m->world_size ? m->rank_local[rank] : -1;
}

/* Append the ranks of node n as ranges ("0-1,4") to buf at *used. */
static void
describe_ranks (const struct jobmap_node *n, char *buf, size_t size, size_t *used)
{
    for (int k = 0; k < n->nranks && *used < size; k++) {
        int lo = n->ranks[k], j = k, w;
        while (j + 1 < n->nranks && n->ranks[j + 1] == n->ranks[j] + 1)
            j++;
        if (j > k)
            w = snprintf (
                buf + *used, size - *used, "%s%d-%d", k ? "," : "", lo, n->ranks[j]);
        else
            w = snprintf (buf + *used, size - *used, "%s%d", k ? "," : "", lo);
        *used += w > 0 ? (size_t)w : 0;
        k = j;
    }
}

void jobmap_describe (const struct jobmap *m, char *buf, size_t size)
{
    static const char *dist[] = {"block", "cyclic", "plane"};
    size_t used = 0;
    int w;

    if (!size)
        return;
    buf[0] = '\0';
    if (!m)
        return;
    w = snprintf (buf,
                  size,
                  "%s: %d node%s, %d rank%s (%s):",
                  m->key,
                  m->nnodes,
                  m->nnodes == 1 ? "" : "s",
                  m->world_size,
                  m->world_size == 1 ? "" : "s",
                  dist[m->dist]);
    used = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < m->nnodes && i < 16 && used < size; i++) {
        w = snprintf (
            buf + used, size - used, " %s[", m->node[i].name ? m->node[i].name : "?");
        used += w > 0 ? (size_t)w : 0;
        describe_ranks (&m->node[i], buf, size, &used);
        if (used < size) {
            w = snprintf (buf + used, size - used, "]");
            used += w > 0 ? (size_t)w : 0;
        }
    }
    if (m->nnodes > 16 && used < size) {
        w = snprintf (buf + used, size - used, " ...");
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < size) {
        w = snprintf (buf + used,
                      size - used,
                      "; this: node %d task %d%s, port%s",
                      m->node_id,
                      m->local_id,
                      m->leader ? " (leader)" : "",
                      m->nports == 1 ? "" : "s");
        used += w > 0 ? (size_t)w : 0;
    }
    for (int k = 0; k < m->nports && used < size; k++) {
        w = snprintf (buf + used, size - used, "%s%d", k ? "," : " ", m->port[k]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < size && m->port_reserved)
        snprintf (buf + used, size - used, " (reserved)");
    if (used >= size)
        buf[size - 1] = '\0';
}
