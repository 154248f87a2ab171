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
struct mesh_admission;
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
    /* members joining the running job (elastic-exec --join, meshjoin.c):
     * under srun the mesh has nslots member slots, the map's nodes first
     * (addrs has nslots entries, NULL past the map's), and admit_info is
     * what a newcomer is told: the job's shape (meshjob_shape_parse) */
    uint32_t nslots;
    char *admit_info;
    /* this member joined a running job (meshjob_joined): its slot, and the
     * ranks it could run (--nproc-per-node, or its own step's tasks on its
     * node); map is then the running job's (node_id -1: none of its nodes) */
    int joined;
    uint32_t member;
    int free_slots;
    struct mesh_admission *admission; /* what the admitter said (owned) */
    int *join_ports;                  /* the step's candidate mesh ports */
    int njoin_ports;
    char self_name[256]; /* this node's name (its own step's, else the host's) */
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

/* The job's agreed result from each member's outcome line (meshjob_outcome's
 * format; NULL: the member was lost, never answered, or never joined).
 * m[0..n-1] by mesh slot: the job's nodes first (the map's), then the
 * members that joined the running job (elastic-exec --join).  A lost
 * member's ranks count as lost: its nodes' ranks of the start and the
 * ones spawned onto it.  Fills mj->status, mj->summary, mj->decided. */
struct meshjob_member {
    const char *outcome; /* NULL if none */
    int lost;            /* the mesh lost it before it was done */
    int absent;          /* a slot past the map's nodes no member took */
    int spawned;         /* ranks spawned onto it that reached the job */
    const char *name;    /* a joined member's node (NULL: "?") */
};
void meshjob_decide (struct meshjob *mj,
                     const struct meshjob_member *m,
                     int n,
                     int agreed);

/* The transport /metrics reads (NULL: none from now on). */
void meshjob_set_transport (struct meshjob *mj, struct pmixhost_mesh *tp);

/* The mesh's series for /metrics (Prometheus text, malloc'ed), or NULL
 * when no mesh runs: members alive, epoch, seconds since each tree
 * neighbour was heard from, fences, failures seen, self-fenced. */
char *meshjob_metrics (struct meshjob *mj);

/* ---- members joining the running job (elastic-exec --join) ----------------
 *
 * `srun --jobid J -w n3 elastic-exec --join J.0 [--nproc-per-node N] ...`
 * (or any process of the job's user that can reach its nodes) finds the
 * step's members (scontrol: its nodes, their NodeAddr, the step's
 * candidate ports), asks them in turn with the mesh's admission handshake
 * (mesh_join_request: munge naming the step's key, or the secret), is
 * admitted into the lowest absent slot and runs a member with no ranks of
 * the job: it takes part in the mesh's fences (empty blobs), offers its
 * free slots to the job's growth (the processes MPI_Comm_spawn starts
 * there, pmix/pmix_grow.c), and takes part in the end of the job
 * (MESH_BCAST_DONE, meshjob_decide), prints the job's summary and exits
 * with its result.  An srun mesh has MESHJOB_JOIN_SLOTS absent
 * member slots (ELASTIC_MESH_JOIN_SLOTS for the step: another count):
 * that many members can join it over its life. */

/* Absent member slots of an srun mesh by default: 3 per node + 16. */
#define MESHJOB_JOIN_SLOTS(nnodes) ((nnodes)*3 + 16)

/* 1 when this member joined a running job (elastic-exec --join), with its
 * slot in the mesh and the ranks it could host (*free_slots): it has none
 * (yet).  0 for a member that started with the job.  Either out may be
 * NULL.  For the PMIx side (ranks placed on a joined member). */
int meshjob_joined (const struct meshjob *mj, uint32_t *member, int *free_slots);

/* This node's name as a joined member says it ("" if not known). */
const char *meshjob_self_name (const struct meshjob *mj);

/* Parse --join's value: "JOBID" or "JOBID.STEP" (digits; STEP default 0)
 * into job and step.  Returns 0, or -1 with err naming the value and the
 * accepted form. */
int meshjob_join_parse (const char *s,
                        char *job,
                        size_t jobsz,
                        char *step,
                        size_t stepsz,
                        elastic_error_t *err);

/* What elastic-exec --join does first (meshjoin.c): find the step, ask its
 * members, be admitted.  Returns 1 with *mjp (this task leads its node:
 * spec->mesh = *mjp, spec->hosting, the agent runs with no workers of
 * its own), or 0 with *status, the exit status: 2 after a one-line
 * refusal on stderr, or the node's leader's result for a follower. */
struct meshjob_join_opts {
    const char *target;  /* --join's value */
    int nproc_per_node;  /* 0: this step's tasks on this node (1 outside Slurm) */
    double node_timeout; /* 0: 2 s */
};
int meshjob_join_admit (const struct meshjob_join_opts *o,
                        struct meshjob **mjp,
                        int *status);

/* The job's shape for a newcomer (malloc'ed text) and back: "elastic-join
 * 1", "job KEY", "world N", then "node NAME NRANKS" per node.  parse
 * returns the map (jobmap_from_shape) or NULL with err. */
char *meshjob_shape (const struct jobmap *m);
struct jobmap *meshjob_shape_parse (const char *text, elastic_error_t *err);

/* Addresses of names[0..n-1] (getaddrinfo, else Slurm's NodeAddr) into
 * addr[i].  Returns 0, or -1 with err naming a name without one. */
int meshjob_resolve (const char *const *names,
                     int n,
                     char (*addr)[64],
                     elastic_error_t *err);

/* How this job's members authenticate (job: the step's key): the key from
 * ELASTIC_MESH_SECRET(_FILE) when set (*munge 0), else munge when munged
 * answers (*munge 1, its socket in sock, "" for the default).  Returns 0,
 * or -1 with err. */
int meshjob_auth (const char *job,
                  int slurm,
                  uint8_t key[MESHJOB_KEY_SIZE],
                  int *munge,
                  char *sock,
                  size_t socksz,
                  elastic_error_t *err);

/* This member's outcome line for the others: status and rank counts. */
void meshjob_outcome (
    char *buf, size_t size, int status, int ranks, int lost, int failed, int suspended);

#endif /* ELASTIC_EXEC_MESHJOB_H */
