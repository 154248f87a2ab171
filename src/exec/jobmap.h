/* jobmap.h - the job's full map, learned by every member from its launcher
 *
 * Every elastic-exec of a multi-node job (a mesh member, issue 14) needs
 * the same picture of the job: the nodes in order, which global ranks run
 * on which node, and who it is itself.  It is computed here from what the
 * launcher put in the environment, with no communication, so that every
 * member computes the same map; the PMIx servers register it
 * (pmix/pmix_jobinfo.c) and the mesh uses it to find its peers.
 *
 * Sources:
 *   Slurm     jobmap_from_slurm: SLURM_STEP_NODELIST (else SLURM_NODELIST,
 *             SLURM_JOB_NODELIST) in Slurm's compact form, the count list
 *             SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE),
 *             SLURM_STEP_NUM_NODES / SLURM_STEP_NUM_TASKS when set (checked),
 *             SLURM_NODEID, SLURM_LOCALID, SLURM_PROCID, SLURM_JOB_ID,
 *             SLURM_STEP_ID, SLURMD_NODENAME (checked), SLURM_GTIDS (checked
 *             when set), SLURM_DISTRIBUTION / SLURM_DIST_PLANESIZE,
 *             SLURM_STEP_RESV_PORTS.
 *   torchrun  jobmap_from_torchrun: --nnodes N --node-rank K
 *             --nproc-per-node P --rdzv-endpoint HOST:PORT.  Every node runs
 *             P ranks, rank = K * P + local rank; the host names are not in
 *             the flags: node[i].name stays NULL until the rendezvous tells
 *             it (jobmap_set_host).
 *   one node  jobmap_single: every rank here (today's elastic-exec).
 *
 * Launch shapes under Slurm (opts.nproc_per_node):
 *   0   `srun --ntasks-per-node=4 elastic-exec ./app`: one task per rank.
 *       A node's ranks must share one PMIx server, so ONE task per node is
 *       the node's mesh member (leader = 1): the task of SLURM_LOCALID 0.
 *       It hosts the PMIx server and the mesh connection for all the
 *       node's ranks; the node's other tasks (leader = 0) attach to it on
 *       the node and each starts and reaps its own rank (task_rank).
 *   N   `srun --ntasks-per-node=1 elastic-exec --nproc-per-node N ./app`:
 *       one task per node, the member, which starts N ranks: ranks
 *       node * N .. node * N + N - 1 (every task is a leader).
 *
 * Rank placement (shape 0) follows Slurm's task distribution over nodes:
 * block by default (the first node's count of ranks first, ...), cyclic
 * (SLURM_DISTRIBUTION=cyclic...: one rank per node in turn, skipping full
 * nodes) and plane=S (S ranks per node in turn); the socket-level part
 * after ':' does not change nodes.  arbitrary is refused.  The result is
 * checked against SLURM_PROCID (and SLURM_GTIDS when Slurm sets it).
 *
 * Mesh port: the candidates in port[0..nports-1], tried in order (a member
 * listens on the first it can bind; a peer connects to each in turn, and
 * authentication tells a stranger on a port from the member):
 *   - SLURM_STEP_RESV_PORTS ("12000-12003" or "12000,12007") when set: the
 *     ports Slurm reserved for the step on every node (port_reserved = 1);
 *   - otherwise base + (fnv1a32 (key) + k) % range for k = 0..3, with key
 *     "slurm.<jobid>.<stepid>" or "torchrun.<run id>@<endpoint>"; base
 *     and range default to JOBMAP_PORT_BASE and JOBMAP_PORT_RANGE (below
 *     Linux's ephemeral ports, 32768-60999).
 *
 * Errors: functions that can fail return -1 or NULL and write one line into
 * err naming the variable (or flag), its value and what is accepted.
 * Thread use: a map is not changed after it is built except by
 * jobmap_set_host; readers may share it.
 */
#ifndef ELASTIC_EXEC_JOBMAP_H
#define ELASTIC_EXEC_JOBMAP_H

#include <stddef.h>

#include "common/error.h"

#define JOBMAP_PORT_BASE  17000
#define JOBMAP_PORT_RANGE 8000
#define JOBMAP_MAX_PORTS  8
#define JOBMAP_MAX_NODES  65536
#define JOBMAP_MAX_RANKS  1048576

enum jobmap_source {
    JOBMAP_SINGLE = 0, /* one node, no launcher */
    JOBMAP_SLURM,
    JOBMAP_TORCHRUN,
};

enum jobmap_dist {
    JOBMAP_BLOCK = 0,
    JOBMAP_CYCLIC,
    JOBMAP_PLANE,
};

struct jobmap_node {
    char *name; /* host name; NULL while unknown (torchrun before the
                   rendezvous) */
    int nranks; /* ranks on this node (its PMIX_LOCAL_SIZE) */
    int *ranks; /* its global ranks, ascending (PMIX_LOCAL_PEERS) */
    int ntasks; /* launcher tasks on it (shape 0: nranks; else 1) */
};

struct jobmap {
    enum jobmap_source source;
    enum jobmap_dist dist;
    int plane;          /* JOBMAP_PLANE: ranks per node per turn */
    int nproc_per_node; /* the shape: 0 one task per rank, N > 0 */
    char jobid[64];     /* Slurm job id; torchrun: the run id */
    char stepid[32];    /* Slurm step id; "" otherwise */
    char key[512];      /* what identifies the job step among all on
                           these nodes: "slurm.<job>.<step>",
                           "torchrun.<run id>@<endpoint>" or "single" */
    int nnodes;
    struct jobmap_node *node; /* [nnodes], in the launcher's node order */
    int world_size;
    int *rank_node;  /* [world_size] node id of each rank (PMIX_NODEID) */
    int *rank_local; /* [world_size] its local rank on that node
                        (PMIX_LOCAL_RANK and PMIX_NODE_RANK) */
    /* this process */
    int node_id;   /* its node */
    int local_id;  /* its launcher task on the node (SLURM_LOCALID; 0) */
    int task_rank; /* shape 0: the rank this task starts; -1 otherwise */
    int leader;    /* 1: this process is its node's mesh member and hosts
                      the PMIx server of every rank of the node */
    /* mesh ports (see above) */
    int nports;
    int port[JOBMAP_MAX_PORTS];
    int port_reserved; /* 1: from SLURM_STEP_RESV_PORTS */
    /* torchrun's rendezvous endpoint; "" and 0 under Slurm */
    char rdzv_host[256];
    int rdzv_port;
};

struct jobmap_opts {
    int nproc_per_node; /* 0: one launcher task per rank; N: each task (one
                           per node) starts N ranks (1..65535) */
    int port_base;      /* 0: JOBMAP_PORT_BASE (1024..65535) */
    int port_range;     /* 0: JOBMAP_PORT_RANGE; base + range - 1 <= 65535 */
};

struct jobmap_torchrun {
    int nnodes;                /* --nnodes N (a fixed size), 1..65536 */
    int node_rank;             /* --node-rank K, 0..N-1 */
    int nproc_per_node;        /* --nproc-per-node P, 1..65535 */
    const char *rdzv_endpoint; /* --rdzv-endpoint HOST[:PORT] (PORT default
                                  29400, torchrun's); [v6addr]:PORT too */
    const char *run_id;        /* --rdzv-id; NULL or "": "none" */
    int port_base;             /* as in jobmap_opts */
    int port_range;
};

/* Whether envp (NULL: environ) is a Slurm job step's task environment:
 * SLURM_JOB_ID (or SLURM_JOBID) and SLURM_STEP_ID (or SLURM_STEPID) set.
 * Never fails. */
int jobmap_slurm_detect (char *const envp[]);

/* The map of the Slurm job step whose task environment is envp (NULL:
 * environ).  opts may be NULL (shape 0, default ports).  Returns NULL with
 * err when a variable is missing or inconsistent with the others. */
struct jobmap *jobmap_from_slurm (const struct jobmap_opts *opts,
                                  char *const envp[],
                                  elastic_error_t *err);

/* The map of a torchrun-style launch (every node alike; host names
 * unknown until jobmap_set_host).  Returns NULL with err on a bad value. */
struct jobmap *jobmap_from_torchrun (const struct jobmap_torchrun *t,
                                     elastic_error_t *err);

/* A one-node map of nranks ranks (1..65535) on host (NULL: unknown); this
 * process is the node's leader.  Returns NULL with err. */
struct jobmap *jobmap_single (int nranks, const char *host, elastic_error_t *err);

/* The map of a job told by its shape (elastic-exec --join learns the
 * running job's from the member that admits it): key, nnodes nodes named
 * names[i] with nranks[i] ranks each (1..65535), placed in blocks; this
 * process is on none of them (node_id -1).  Returns NULL with err. */
struct jobmap *jobmap_from_shape (const char *key,
                                  int nnodes,
                                  const char *const *names,
                                  const int *nranks,
                                  elastic_error_t *err);

/* The mesh port candidates of the job step whose key is key
 * ("slurm.<job>.<step>"): the ports of resv (SLURM_STEP_RESV_PORTS'
 * form) when non-empty, else the derived ones (above).  Returns how many
 * (port[0..n-1]), or -1 with err. */
int jobmap_ports (const char *key,
                  const char *resv,
                  int port[JOBMAP_MAX_PORTS],
                  elastic_error_t *err);

/* Free a map (NULL-safe, preserves errno). */
void jobmap_destroy (struct jobmap *m);

/* Name node `node` (what the rendezvous learned).  Returns 0, or -1 with
 * err for a bad node or an empty name. */
int jobmap_set_host (struct jobmap *m, int node, const char *name, elastic_error_t *err);

/* 1 if every node has a host name, else 0.  Never fails. */
int jobmap_hosts_known (const struct jobmap *m);

/* The node of `rank`, or -1 when out of range. */
int jobmap_rank_node (const struct jobmap *m, int rank);

/* The local rank of `rank` on its node, or -1 when out of range. */
int jobmap_local_rank (const struct jobmap *m, int rank);

/* Parse "HOST[:PORT]" / "[ADDR]:PORT" (default_port when there is none)
 * into host (size hostsz) and *port; what names the flag in errors.
 * Returns 0, or -1 with err. */
int jobmap_parse_endpoint (const char *what,
                           const char *ep,
                           int default_port,
                           char *host,
                           size_t hostsz,
                           int *port,
                           elastic_error_t *err);

/* One line for logs: "slurm.42.0: 3 nodes, 6 ranks (block): n1[0-1] ...;
 * this: node 1 task 0 (leader), ports 17345,...".  Never fails. */
void jobmap_describe (const struct jobmap *m, char *buf, size_t size);

#endif /* ELASTIC_EXEC_JOBMAP_H */
