/* meshjob.h - elastic-exec's mesh mode: one job across nodes (issue 14)
 *
 * Under a launcher that is not mpirun and starts several elastic-exec
 * tasks (srun), the tasks form one job: the leader task of every node
 * (jobmap.h: SLURM_LOCALID 0, or the only task of the node with
 * --nproc-per-node) hosts the PMIx server of all the node's ranks and is
 * the node's member of the mesh (mesh/mesh.h over
 * pmix/pmix_transport_mesh.h); the node's other tasks (one task per rank,
 * `srun --ntasks-per-node=4 elastic-exec ./app`) are followers: they start
 * nothing, wait for their leader and end with the job's result.
 *
 *   mj = meshjob_create (&opts, err);   map, member addresses, key
 *   follower: status = meshjob_follow (mj);
 *   leader:   meshjob_lead (mj, err);   the node directory for followers
 *             spec->mesh = mj; ... the agent runs (pmix_backend.c uses mj,
 *             and fills mj->agreed / status / summary at its end) ...
 *             meshjob_publish (mj, status, status_file);
 *   meshjob_destroy (mj);
 *
 * Member addresses: each node's name (the launcher's node list) resolved
 * by getaddrinfo, else Slurm's NodeAddr for it (one `scontrol show node`
 * for the names that do not resolve: an emulated cluster, nodes known to
 * Slurm only), with the map's first mesh port (SLURM_STEP_RESV_PORTS, or
 * the deterministic port of the job step).  Authentication: with
 * ELASTIC_MESH_SECRET or ELASTIC_MESH_SECRET_FILE, the key derived from it
 * and the map's key (mesh_auth_key_from_env); else, under Slurm, munge
 * (every connection carries a credential of this uid for this job: see
 * doc/mesh.md), on ELASTIC_MUNGE_SOCKET, else the socket= of AuthInfo in
 * $SLURM_CONF, else libmunge's default, when munged answers there; else
 * an error naming both ways.
 */
#ifndef ELASTIC_EXEC_MESHJOB_H
#define ELASTIC_EXEC_MESHJOB_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "common/error.h"
#include "rdzv_tcp.h"

struct jobmap;
struct pmixhost_mesh;

#define MESHJOB_KEY_SIZE 32

struct meshjob {
    struct jobmap *map;
    char **addrs; /* [nnodes] "address:port" */
    uint8_t key[MESHJOB_KEY_SIZE];
    int munge;                   /* 1: connections authenticated by munge */
    char munge_socket[PATH_MAX]; /* "" : libmunge's default */
    double node_timeout;
    int listen_fd; /* torchrun shape: the mesh's bound socket
                      (given to the mesh, then -1); else -1 */
    /* torchrun shape with joins (meshjob_torchrun_opts.joins): map and addrs
     * have a node per member slot; which are live, the nodes at the start,
     * and on the member serving the endpoint, its server */
    struct rdzv_tcp_joins joins;
    int max_nodes;          /* --nnodes MAX: at most this many live */
    char nodedir[PATH_MAX]; /* leader and followers of this node */
    int nfollowers;         /* the node's other tasks */
    /* the running transport, for /metrics (under lock; pmix_backend.c sets
     * it once the mesh runs and clears it before the mesh stops) */
    pthread_mutex_t lock;
    struct pmixhost_mesh *tp;
    /* the end of the job, agreed by the members (pmix_backend.c) */
    int agreed;  /* 1: every live member's outcome was heard */
    int decided; /* 1: status and summary are set (agreed or not) */
    int status;  /* the job's exit status */
    char summary[1024];
};

struct meshjob_opts {
    int nproc_per_node; /* 0: one task per rank; N: N ranks per task */
    double node_timeout;
};

/* 1 when envp (NULL: environ) is a task of a Slurm step of several tasks
 * not started by mpirun (mesh mode by default), else 0. */
int meshjob_detect (char *const envp[]);

/* The job's map, addresses and key from the environment (Slurm).  NULL
 * with one line in err naming what is missing or wrong. */
struct meshjob *meshjob_create (const struct meshjob_opts *opts, elastic_error_t *err);

/* torchrun's shape (--nnodes N or MIN:MAX [--node-rank K] --rdzv-endpoint
 * HOST:PORT --nproc-per-node P, any launcher): the map, the key
 * (ELASTIC_MESH_SECRET or ELASTIC_MESH_SECRET_FILE: required), a mesh
 * socket bound to a port the kernel picks, and every member's address
 * from the rendezvous at the endpoint (rdzv_tcp.h), waiting up to
 * join_timeout seconds; the map is the job's as it started (MIN..MAX
 * nodes, this node's place in it).  Every task is its node's leader.
 * NULL with one line in err. */
struct meshjob_torchrun_opts {
    int nnodes;    /* --nnodes N, or MIN:MAX's MAX */
    int min_nodes; /* MIN (0: N; the job may start with MIN..MAX nodes) */
    int node_rank; /* -1: none; the rendezvous places this node */
    int nproc_per_node;
    const char *endpoint;
    const char *run_id; /* NULL: "none" */
    double node_timeout;
    double join_timeout;
    double last_call; /* --rdzv-conf last_call_timeout (< 0: 30 s) */
    int joins;        /* 1: nodes may join after the start (up to MAX live):
                         the map gets MESHJOB_SLOTS (MAX) nodes, slots */
};

/* The member slots of a job that takes nodes after its start: MAX live at
 * a time, a lost node's slot never reused (so 3 MAX + 16 joins in all). */
#define MESHJOB_SLOTS(max) ((max)*4 + 16 < 65536 ? (max)*4 + 16 : 65536)
struct meshjob *meshjob_create_torchrun (const struct meshjob_torchrun_opts *o,
                                         elastic_error_t *err);

void meshjob_destroy (struct meshjob *mj);

/* 1 if this task is its node's leader. */
int meshjob_is_leader (const struct meshjob *mj);

/* Leader: make the node directory and tell the followers our pid.
 * Returns 0 or -1 with err. */
int meshjob_lead (struct meshjob *mj, elastic_error_t *err);

/* Leader, at the end: the result for the followers, and status_file (may
 * be NULL) with the agreed result.  Waits a little for the followers to
 * read it, then removes the node directory. */
void meshjob_publish (struct meshjob *mj, int status, const char *status_file);

/* Follower: wait for the leader's result; print its summary; return the
 * exit status (1 when the leader ended without one). */
int meshjob_follow (struct meshjob *mj);

/* The job's agreed result from each member's outcome line (mk_outcome's
 * format; NULL: the member was lost, or never answered when running[i]).
 * Fills mj->status, mj->summary, mj->decided. */
struct meshjob_member {
    const char *outcome; /* NULL if none */
    int lost;            /* the mesh lost it before it was done */
};
void meshjob_decide (struct meshjob *mj, const struct meshjob_member *m, int agreed);

/* The transport /metrics reads (NULL: none from now on). */
void meshjob_set_transport (struct meshjob *mj, struct pmixhost_mesh *tp);

/* The mesh's series for /metrics (Prometheus text, malloc'ed), or NULL
 * when no mesh runs: members alive, epoch, seconds since each tree
 * neighbour was heard from, fences, failures seen, self-fenced. */
char *meshjob_metrics (struct meshjob *mj);

/* This member's outcome line for the others: status and rank counts. */
void meshjob_outcome (
    char *buf, size_t size, int status, int ranks, int lost, int failed, int suspended);

#endif /* ELASTIC_EXEC_MESHJOB_H */
