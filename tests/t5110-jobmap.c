/* t5110-jobmap.c - the job map every mesh member computes from its launcher
 *
 * Synthetic Slurm task environments (both launch shapes: one task per
 * rank, one per node with --nproc-per-node), uneven and compressed count
 * lists, cyclic and plane distributions, reserved and hashed ports, bad
 * values (one line naming the variable and the value), torchrun's flags,
 * and Slurm's compact host lists (src/common/hostlist.c).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"
#include "exec/jobmap.h"
#include "lib/tap.h"

/* ---- host lists ------------------------------------------------------------ */

/* Expand list and join the names with ' ' into a static buffer; "ERR: text"
 * on error. */
static const char *expand (const char *list)
{
    static char out[4096];
    elastic_error_t err = {{0}};
    char **names;
    size_t used = 0;
    int n = hostlist_expand (list, 100, &names, &err);

    if (n < 0) {
        snprintf (out, sizeof (out), "ERR: %s", err.text);
        return out;
    }
    out[0] = '\0';
    for (int i = 0; i < n && used < sizeof (out); i++)
        used += (size_t)snprintf (
            out + used, sizeof (out) - used, "%s%s", i ? " " : "", names[i]);
    hostlist_names_free (names);
    return out;
}

static void test_hostlist (void)
{
    int c[16];
    elastic_error_t err = {{0}};

    is_str (expand ("n1"), "n1", "a single name");
    is_str (
        expand ("n[1-3,5],gpu07"), "n1 n2 n3 n5 gpu07", "ranges, a list, a plain name");
    is_str (expand ("n[08-11]"), "n08 n09 n10 n11", "zero padding is kept");
    is_str (expand ("rack[1-2]-n[1-2]"),
            "rack1-n1 rack1-n2 rack2-n1 rack2-n2",
            "two bracket groups: the last varies fastest");
    is_str (expand ("a,b,a"), "a b a", "order and repeats are kept");
    is_str (expand ("n[1-2].cluster,x"), "n1.cluster n2.cluster x", "a suffix after ']'");
    ok (!!strstr (expand ("n[1-3"), "'n[1-3' is not a Slurm host list ('[' without ']'"),
        "unclosed bracket: %s",
        expand ("n[1-3"));
    ok (!!strstr (expand ("n[5-3]"), "a range goes up"), "a downward range is refused");
    ok (!!strstr (expand ("n[a-b]"), "numbers"), "letters in a range are refused");
    ok (!!strstr (expand ("a,,b"), "an empty name"), "an empty name is refused");
    ok (!!strstr (expand ("a,"), "an empty name"), "a trailing comma is refused");
    ok (!!strstr (expand ("n]1"), "']' without '['"), "a stray ']' is refused");
    ok (!!strstr (expand ("n[]"), "empty brackets"), "empty brackets are refused");
    ok (!!strstr (expand ("n x"), "not in A-Z"), "a space is refused");
    ok (!!strstr (expand ("n[1-1000000]"), "more than 100 hosts"),
        "a huge range is refused at once: %s",
        expand ("n[1-1000000]"));
    ok (!!strstr (expand (""), "empty host list"), "an empty list is refused");

    is_int (slurm_expand_counts ("2(x3),1", c, 16, &err), 4, "2(x3),1: 4 counts");
    ok (c[0] == 2 && c[2] == 2 && c[3] == 1, "2(x3),1: 2 2 2 1");
    ok (slurm_expand_counts ("2,", c, 16, &err) < 0 && strstr (err.text, "'2,'"),
        "a trailing comma in a count list is refused");
    ok (slurm_expand_counts ("+2", c, 16, &err) < 0, "a sign in a count list is refused");
}

/* ---- Slurm ----------------------------------------------------------------- */

#define MAXENV 32

/* A task environment: the step's variables, then per-task overrides. */
struct env {
    char *v[MAXENV + 1];
    int n;
};

static void env_set (struct env *e, const char *kv)
{
    size_t klen = strcspn (kv, "=");

    for (int i = 0; i < e->n; i++)
        if (!strncmp (e->v[i], kv, klen) && e->v[i][klen] == '=') {
            e->v[i] = (char *)kv;
            return;
        }
    if (e->n < MAXENV)
        e->v[e->n++] = (char *)kv;
    e->v[e->n] = NULL;
}

static void env_unset (struct env *e, const char *name)
{
    size_t klen = strlen (name);

    for (int i = 0; i < e->n; i++)
        if (!strncmp (e->v[i], name, klen) && e->v[i][klen] == '=') {
            e->v[i] = e->v[--e->n];
            e->v[e->n] = NULL;
            return;
        }
}

/* srun -N3 --ntasks-per-node=2: task (node, local, procid). */
static void step_3x2 (struct env *e)
{
    memset (e, 0, sizeof (*e));
    env_set (e, "SLURM_JOB_ID=4242");
    env_set (e, "SLURM_STEP_ID=3");
    env_set (e, "SLURM_STEP_NODELIST=n[1-3]");
    env_set (e, "SLURM_STEP_NUM_NODES=3");
    env_set (e, "SLURM_STEP_NUM_TASKS=6");
    env_set (e, "SLURM_STEP_TASKS_PER_NODE=2(x3)");
    env_set (e, "SLURM_NODEID=1");
    env_set (e, "SLURM_LOCALID=1");
    env_set (e, "SLURM_PROCID=3");
    env_set (e, "SLURMD_NODENAME=n2");
    env_set (e, "SLURM_GTIDS=2,3");
}

static struct jobmap *slurm (struct env *e, int nproc, elastic_error_t *err)
{
    struct jobmap_opts o = {.nproc_per_node = nproc};

    memset (err, 0, sizeof (*err));
    return jobmap_from_slurm (&o, e->v, err);
}

/* A map must be refused with a message containing want. */
static void refused (struct env *e, int nproc, const char *want, const char *what)
{
    elastic_error_t err;
    struct jobmap *m = slurm (e, nproc, &err);

    ok (!m && strstr (err.text, want), "%s: refused", what);
    if (m || !strstr (err.text, want))
        diag ("want '%s', got '%s'", want, m ? "(a map)" : err.text);
    else
        diag ("%s", err.text);
    ok (!strchr (err.text, '\n'), "%s: one line", what);
    jobmap_destroy (m);
}

static void test_slurm_per_rank (void)
{
    struct env e;
    elastic_error_t err;
    struct jobmap *m;
    char line[1024];

    step_3x2 (&e);
    ok (jobmap_slurm_detect (e.v), "a Slurm step is detected");
    m = slurm (&e, 0, &err);
    ok (m != NULL, "srun -N3 --ntasks-per-node=2, task 3: a map (%s)", err.text);
    if (!m)
        return;
    is_int (m->source, JOBMAP_SLURM, "source slurm");
    is_int (m->nnodes, 3, "3 nodes");
    is_int (m->world_size, 6, "6 ranks");
    is_str (m->node[0].name, "n1", "node 0 is n1");
    is_str (m->node[2].name, "n3", "node 2 is n3");
    ok (m->node[1].nranks == 2 && m->node[1].ranks[0] == 2 && m->node[1].ranks[1] == 3,
        "block: node 1 holds ranks 2,3");
    is_int (jobmap_rank_node (m, 5), 2, "rank 5 is on node 2");
    is_int (jobmap_local_rank (m, 5), 1, "rank 5 is local rank 1");
    is_int (jobmap_rank_node (m, 6), -1, "rank 6 is out of range");
    ok (m->node_id == 1 && m->local_id == 1 && m->task_rank == 3 && !m->leader,
        "this task: node 1, local 1, rank 3, not the leader");
    is_str (m->key, "slurm.4242.3", "key slurm.<job>.<step>");
    ok (m->nports == 4 && !m->port_reserved && m->port[0] >= JOBMAP_PORT_BASE &&
            m->port[0] < JOBMAP_PORT_BASE + JOBMAP_PORT_RANGE,
        "4 hashed port candidates in the default range (first %d)",
        m->port[0]);
    ok (m->port[1] ==
            (m->port[0] + 1 - JOBMAP_PORT_BASE) % JOBMAP_PORT_RANGE + JOBMAP_PORT_BASE,
        "the next candidate is the next port of the range");
    ok (jobmap_hosts_known (m), "every host is known");
    jobmap_describe (m, line, sizeof (line));
    diag ("%s", line);
    ok (strstr (line, "n2[2-3]") && strstr (line, "node 1 task 1"), "describe");
    {
        /* another task of the same step computes the same map */
        struct jobmap *m0;
        int same = 1;
        env_set (&e, "SLURM_NODEID=0");
        env_set (&e, "SLURM_LOCALID=0");
        env_set (&e, "SLURM_PROCID=0");
        env_set (&e, "SLURMD_NODENAME=n1");
        env_set (&e, "SLURM_GTIDS=0,1");
        m0 = slurm (&e, 0, &err);
        ok (m0 && m0->leader && m0->task_rank == 0, "task 0: node 0's leader, rank 0");
        for (int r = 0; m0 && r < 6; r++)
            same &= m0->rank_node[r] == m->rank_node[r] &&
                    m0->rank_local[r] == m->rank_local[r];
        ok (m0 && same && m0->port[0] == m->port[0],
            "task 0 computes the same map and port");
        jobmap_destroy (m0);
    }
    jobmap_destroy (m);

    /* uneven: 3 on n1, 3 on gpu07... written 3(x2),1 */
    step_3x2 (&e);
    env_set (&e, "SLURM_STEP_NODELIST=n[1,3],gpu07");
    env_set (&e, "SLURM_STEP_TASKS_PER_NODE=3(x2),1");
    env_set (&e, "SLURM_STEP_NUM_TASKS=7");
    env_set (&e, "SLURM_NODEID=2");
    env_set (&e, "SLURM_LOCALID=0");
    env_set (&e, "SLURM_PROCID=6");
    env_set (&e, "SLURMD_NODENAME=gpu07");
    env_set (&e, "SLURM_GTIDS=6");
    env_set (&e, "SLURM_STEP_RESV_PORTS=12000-12001,12005");
    m = slurm (&e, 0, &err);
    ok (m && m->world_size == 7 && m->node[0].nranks == 3 && m->node[2].nranks == 1 &&
            m->node[2].ranks[0] == 6 && m->leader && m->task_rank == 6,
        "uneven 3(x2),1: node 2 (gpu07) holds rank 6 alone (%s)",
        err.text);
    ok (m && m->port_reserved && m->nports == 3 && m->port[0] == 12000 &&
            m->port[2] == 12005,
        "SLURM_STEP_RESV_PORTS gives the candidates 12000,12001,12005");
    jobmap_destroy (m);

    /* cyclic: ranks dealt one per node in turn, skipping full nodes */
    env_set (&e, "SLURM_DISTRIBUTION=cyclic:block");
    env_set (&e, "SLURM_NODEID=0");
    env_set (&e, "SLURM_LOCALID=2");
    env_set (&e, "SLURM_PROCID=5");
    env_set (&e, "SLURMD_NODENAME=n1");
    env_set (&e, "SLURM_GTIDS=0,3,5");
    m = slurm (&e, 0, &err);
    ok (m && m->node[0].ranks[1] == 3 && m->node[0].ranks[2] == 5 &&
            m->node[1].ranks[2] == 6 && m->node[2].ranks[0] == 2 && m->task_rank == 5,
        "cyclic 3,3,1: n1 0,3,5; n3 1,4,6; gpu07 2 (%s)",
        err.text);
    jobmap_destroy (m);
    env_set (&e, "SLURM_DISTRIBUTION=plane=2");
    env_unset (&e, "SLURM_GTIDS");
    env_set (&e, "SLURM_PROCID=5");
    m = slurm (&e, 0, &err);
    ok (m && m->node[0].ranks[0] == 0 && m->node[0].ranks[1] == 1 &&
            m->node[0].ranks[2] == 5 && m->node[1].ranks[2] == 6 &&
            m->node[2].ranks[0] == 4 && m->task_rank == 5,
        "plane=2 3,3,1: n1 0,1,5; n3 2,3,6; gpu07 4 (%s)",
        err.text);
    jobmap_destroy (m);
    env_set (&e, "SLURM_DISTRIBUTION=arbitrary");
    refused (&e, 0, "SLURM_DISTRIBUTION=arbitrary is not supported", "arbitrary");
}

static void test_slurm_per_node (void)
{
    struct env e;
    elastic_error_t err;
    struct jobmap *m;

    /* srun -N3 --ntasks-per-node=1 elastic-exec --nproc-per-node 4 */
    step_3x2 (&e);
    env_set (&e, "SLURM_STEP_TASKS_PER_NODE=1(x3)");
    env_set (&e, "SLURM_STEP_NUM_TASKS=3");
    env_set (&e, "SLURM_LOCALID=0");
    env_set (&e, "SLURM_PROCID=1");
    env_set (&e, "SLURM_GTIDS=1");
    m = slurm (&e, 4, &err);
    ok (m != NULL, "one task per node, --nproc-per-node 4: a map (%s)", err.text);
    if (m) {
        is_int (m->world_size, 12, "12 ranks");
        ok (m->node[1].nranks == 4 && m->node[1].ranks[0] == 4 &&
                m->node[1].ranks[3] == 7,
            "node 1 holds ranks 4-7");
        ok (m->leader && m->task_rank == -1 && m->node_id == 1,
            "this task leads node 1 and starts all its ranks");
        is_int (jobmap_local_rank (m, 7), 3, "rank 7 is node 1's local rank 3");
    }
    jobmap_destroy (m);
    env_set (&e, "SLURM_STEP_TASKS_PER_NODE=2,1(x2)");
    env_set (&e, "SLURM_STEP_NUM_TASKS=4");
    refused (&e,
             4,
             "node 0 (n1) runs 2 tasks; --nproc-per-node needs one task per node",
             "--nproc-per-node with 2 tasks on a node");
}

static void test_slurm_bad (void)
{
    struct env e;

    step_3x2 (&e);
    env_set (&e, "SLURM_STEP_TASKS_PER_NODE=2(y3)");
    refused (&e,
             0,
             "SLURM_STEP_TASKS_PER_NODE: '2(y3)' is not a Slurm count list",
             "a bad count list");
    step_3x2 (&e);
    env_set (&e, "SLURM_STEP_TASKS_PER_NODE=2(x2)");
    refused (&e,
             0,
             "SLURM_STEP_TASKS_PER_NODE='2(x2)' counts tasks on 2 nodes but "
             "SLURM_STEP_NODELIST='n[1-3]' names 3",
             "counts for fewer nodes than the list");
    step_3x2 (&e);
    env_set (&e, "SLURM_STEP_NODELIST=n[1-3");
    refused (&e,
             0,
             "SLURM_STEP_NODELIST: 'n[1-3' is not a Slurm host list",
             "a bad node list");
    step_3x2 (&e);
    env_set (&e, "SLURM_STEP_NUM_NODES=4");
    refused (&e,
             0,
             "SLURM_STEP_NUM_NODES=4 but SLURM_STEP_NODELIST='n[1-3]' names 3 nodes",
             "node count disagrees");
    step_3x2 (&e);
    env_set (&e, "SLURM_STEP_NUM_TASKS=7");
    refused (&e,
             0,
             "SLURM_STEP_NUM_TASKS=7 but the tasks per node add up to 6",
             "task count disagrees");
    step_3x2 (&e);
    env_set (&e, "SLURM_NODEID=3");
    refused (&e,
             0,
             "SLURM_NODEID=3 is not a node of this step (expected 0..2)",
             "node id out of range");
    step_3x2 (&e);
    env_set (&e, "SLURM_NODEID=x1");
    refused (&e, 0, "x1", "node id not a number");
    step_3x2 (&e);
    env_unset (&e, "SLURM_NODEID");
    refused (&e, 0, "SLURM_NODEID is not set", "node id missing");
    step_3x2 (&e);
    env_set (&e, "SLURM_LOCALID=2");
    refused (&e,
             0,
             "SLURM_LOCALID=2 is not a task of node 1 (it runs 2: expected 0..1)",
             "local id out of range");
    step_3x2 (&e);
    env_set (&e, "SLURM_PROCID=4");
    refused (&e,
             0,
             "SLURM_PROCID=4 but block distribution puts rank 3 at task 1 of node 1",
             "rank not where the distribution puts it");
    step_3x2 (&e);
    env_set (&e, "SLURMD_NODENAME=n9");
    refused (&e,
             0,
             "SLURMD_NODENAME=n9 but node 1 (SLURM_NODEID) of the step's node list "
             "is n2",
             "host name disagrees");
    step_3x2 (&e);
    env_set (&e, "SLURM_GTIDS=2,4");
    refused (&e,
             0,
             "SLURM_GTIDS=2,4 is not what SLURM_DISTRIBUTION gives node 1",
             "SLURM_GTIDS disagrees");
    step_3x2 (&e);
    env_set (&e, "SLURM_STEP_RESV_PORTS=12000-11000");
    refused (&e,
             0,
             "SLURM_STEP_RESV_PORTS='12000-11000' is not a port list",
             "bad reserved ports");
    step_3x2 (&e);
    env_set (&e, "SLURM_JOB_ID=42x");
    refused (&e, 0, "SLURM_JOB_ID=42x is not a job id", "bad job id");
    step_3x2 (&e);
    env_set (&e, "SLURM_STEP_TASKS_PER_NODE=2,0,2");
    env_set (&e, "SLURM_STEP_NUM_TASKS=4");
    refused (&e, 0, "gives node 1 no task", "a node without a task");
    step_3x2 (&e);
    env_unset (&e, "SLURM_STEP_ID");
    ok (!jobmap_slurm_detect (e.v), "no step id: not a Slurm step");
    refused (&e, 0, "not a Slurm job step", "outside a step");
    {
        /* the older spellings are read too */
        struct jobmap *m;
        elastic_error_t err;
        step_3x2 (&e);
        env_unset (&e, "SLURM_STEP_ID");
        env_unset (&e, "SLURM_STEP_NODELIST");
        env_unset (&e, "SLURM_STEP_TASKS_PER_NODE");
        env_set (&e, "SLURM_STEPID=3");
        env_set (&e, "SLURM_NODELIST=n[1-3]");
        env_set (&e, "SLURM_TASKS_PER_NODE=2(x3)");
        m = slurm (&e, 0, &err);
        ok (m && m->world_size == 6 && !strcmp (m->key, "slurm.4242.3"),
            "SLURM_STEPID, SLURM_NODELIST, SLURM_TASKS_PER_NODE (%s)",
            err.text);
        jobmap_destroy (m);
    }
}

/* ---- torchrun and one node -------------------------------------------------- */

static void test_torchrun (void)
{
    struct jobmap_torchrun t = {.nnodes = 3,
                                .node_rank = 2,
                                .nproc_per_node = 4,
                                .rdzv_endpoint = "head:29500",
                                .run_id = "job7"};
    elastic_error_t err = {{0}};
    struct jobmap *m = jobmap_from_torchrun (&t, &err), *m2;
    char host[256];
    int port;

    ok (m != NULL, "torchrun --nnodes 3 --node-rank 2 --nproc-per-node 4 (%s)", err.text);
    if (m) {
        ok (m->world_size == 12 && m->node[2].ranks[0] == 8 && m->node_id == 2 &&
                m->leader,
            "12 ranks; node 2 holds 8-11 and leads");
        ok (!jobmap_hosts_known (m) && m->node[0].name == NULL,
            "host names are unknown before the rendezvous");
        is_str (m->rdzv_host, "head", "rendezvous host");
        is_int (m->rdzv_port, 29500, "rendezvous port");
        is_str (m->key, "torchrun.job7@head:29500", "key");
        ok (jobmap_set_host (m, 0, "a", &err) == 0 &&
                jobmap_set_host (m, 1, "b", &err) == 0 &&
                jobmap_set_host (m, 2, "c", &err) == 0 && jobmap_hosts_known (m),
            "the rendezvous names the nodes");
        ok (jobmap_set_host (m, 3, "d", &err) < 0 && strstr (err.text, "node 3"),
            "a node out of range is refused");
        t.node_rank = 0;
        m2 = jobmap_from_torchrun (&t, &err);
        ok (m2 && m2->port[0] == m->port[0] && m2->node_id == 0,
            "node 0 computes the same port (%d)",
            m->port[0]);
        jobmap_destroy (m2);
    }
    jobmap_destroy (m);
    t.node_rank = 3;
    ok (!jobmap_from_torchrun (&t, &err) &&
            strstr (err.text, "--node-rank 3 is not accepted with --nnodes 3 (0..2)"),
        "a node rank out of range: %s",
        err.text);
    t.node_rank = 0;
    t.rdzv_endpoint = "head:99999";
    ok (!jobmap_from_torchrun (&t, &err) && strstr (err.text, "port '99999'"),
        "a bad port: %s",
        err.text);
    t.rdzv_endpoint = "fe80::1:29400";
    ok (!jobmap_from_torchrun (&t, &err) && strstr (err.text, "brackets"),
        "a bare IPv6 address: %s",
        err.text);
    t.rdzv_endpoint = "[fe80::1]:29401";
    m = jobmap_from_torchrun (&t, &err);
    ok (m && !strcmp (m->rdzv_host, "fe80::1") && m->rdzv_port == 29401,
        "[fe80::1]:29401 (%s)",
        err.text);
    jobmap_destroy (m);
    t.rdzv_endpoint = "head";
    t.run_id = NULL;
    m = jobmap_from_torchrun (&t, &err);
    ok (m && m->rdzv_port == 29400 && !strcmp (m->key, "torchrun.none@head:29400"),
        "no port: torchrun's 29400; no run id: 'none'");
    jobmap_destroy (m);
    t.port_base = 60000;
    t.port_range = 6000;
    ok (!jobmap_from_torchrun (&t, &err) && strstr (err.text, "60000..65999"),
        "a port range past 65535 is refused: %s",
        err.text);
    t.port_base = 0;
    t.port_range = 0;
    t.nproc_per_node = 0;
    ok (!jobmap_from_torchrun (&t, &err) && strstr (err.text, "--nproc-per-node 0"),
        "0 ranks per node are refused");
    ok (jobmap_parse_endpoint ("--x", "h:", 1, host, sizeof (host), &port, &err) < 0,
        "an empty port is refused");

    m = jobmap_single (3, "here", &err);
    ok (m && m->nnodes == 1 && m->world_size == 3 && m->node[0].ranks[2] == 2 &&
            !strcmp (m->node[0].name, "here") && m->leader,
        "one node: 3 ranks here");
    jobmap_destroy (m);
    ok (!jobmap_single (0, NULL, &err) && strstr (err.text, "ranks: 0"),
        "0 ranks are refused");
}

int main (void)
{
    test_hostlist ();
    test_slurm_per_rank ();
    test_slurm_per_node ();
    test_slurm_bad ();
    test_torchrun ();
    return done_testing ();
}
