/* pmix_transport_mesh.h - the hosted PMIx server's transport over the mesh
 *
 * The multi-node implementation of struct pmixhost_transport
 * (pmix_transport.h) over the elastic-exec mesh (exec/mesh/mesh.h): mesh
 * member i is the leader of node i of the job map (exec/jobmap.h).
 *
 *   fence         a fence of ranks of this node only completes here with
 *                 this node's data; one that involves every live node is a
 *                 mesh_fence of this node's PMIx contribution, and PMIx
 *                 gets the concatenation of every member's blob (what
 *                 PRRTE's daemons hand back: PMIx unpacks the servers'
 *                 buffers one after the other).  A fence that lost a
 *                 member completes over the survivors with PMIX_SUCCESS
 *                 and their data only: the lost node's ranks are reported
 *                 failed (below) and their keys are not found.  Any other
 *                 set of nodes is refused (PMIX_ERR_NOT_SUPPORTED).
 *   direct_modex  a mesh_dmodex to the member hosting the rank, answered
 *                 there by PMIx_server_dmodex_request; a rank of a lost
 *                 member is refused at once (PMIX_ERR_UNREACH).
 *   failure       mesh_broadcast_failure; every other member then calls
 *                 pmixhost_job_remote_failure for the rank (same code:
 *                 signaled or terminated without sync).
 *   lost member   every rank of its node gets pmixhost_job_remote_failure
 *                 (PMIX_ERR_PROC_TERM_WO_SYNC), once per rank.
 *   self-fence    opts.self_fence: the caller kills its ranks.
 *   notify        not forwarded yet (PMIX_OPERATION_SUCCEEDED: delivered
 *                 to the local ranks by PMIx only).
 *
 * Lifecycle (caller's thread):
 *     t = pmixhost_mesh_create (&opts, err);     the mesh, not started
 *     hopts.transport = &pmixhost_transport_mesh; hopts.transport_ctx = t;
 *     h = pmixhost_create (&hopts, err);         t is owned by h from now
 *     pmixhost_mesh_start (t, err);
 *     pmixhost_mesh_launch_barrier (t, stop, arg, &n);   before the first ranks
 *     per attempt: job = pmixhost_job_create (h, {.map = map}, err);
 *                  pmixhost_mesh_set_job (t, job);  ... ranks run ...
 *                  pmixhost_mesh_set_job (t, NULL); pmixhost_job_destroy (job);
 *     pmixhost_mesh_stop (t);  (optional: stops the mesh while PMIx is up,
 *                               so pending fences fail cleanly)
 *     pmixhost_destroy (h);    stops the mesh if still running and frees t
 *
 * Threads.  PMIx's upcalls come on PMIx's progress thread, the mesh's
 * callbacks on the mesh thread; neither blocks: they copy, call the
 * non-blocking mesh and PMIx functions and return.  The mesh thread reports
 * failures to the job under the transport's lock, which set_job takes too,
 * so a job is never used after set_job (t, NULL) returned.  opts callbacks
 * run on the mesh thread.
 */
#ifndef ELASTIC_EXEC_PMIX_TRANSPORT_MESH_H
#define ELASTIC_EXEC_PMIX_TRANSPORT_MESH_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "exec/mesh/mesh.h"

struct pmixhost_job;
struct pmixhost_mesh;
struct jobmap;

struct pmixhost_mesh_opts {
    const struct jobmap *map; /* borrowed, must outlive the transport; its
                                 nnodes members, this one = map->node_id */
    const char *const *addrs; /* "host:port" of every member (copied by
                                 the mesh) */
    int listen_fd;            /* as in struct mesh_config */
    uint32_t radix;
    double node_timeout;
    double join_timeout;
    const uint8_t *key;       /* MESH_KEY_SIZE bytes (secret mode) */
    int auth;                 /* MESH_AUTH_SECRET (key) or MESH_AUTH_MUNGE */
    const char *job;          /* munge: the job id credentials name */
    const char *munge_socket; /* munge: NULL for libmunge's default */
    /* mesh thread; may be NULL */
    void (*self_fence) (void *arg, const char *reason);
    void (*joined) (void *arg);
    void (*lost) (void *arg, const uint32_t *members, size_t count, uint32_t nlive);
    /* a rank of another node told to this node's ranks as failed (nspace:
     * NULL for the job's, else a spawned namespace's) */
    void (*reported) (void *arg, const char *nspace, int rank, int signaled);
    /* another member's MESH_BCAST_ROOM, _SPAWN or _SPAWN_END (pmix_grow.c) */
    void (*broadcast) (
        void *arg, uint32_t origin, int kind, const void *data, size_t len);
    void *arg;
    /* --- members joining the running job (elastic-exec --join, meshjob.h):
     * nslots > map->nnodes: the mesh has nslots member slots, the map's
     * nodes first, the rest absent (addrs has nslots entries, NULL there);
     * a newcomer that asks with the admission handshake is admitted into
     * one and told admit_info (a copy; NULL: no joins); admitted (mesh
     * thread, may be NULL) tells of each.  A joined member has no ranks:
     * fence_scope and the ranks' failures ignore it; it takes part in
     * fences (empty blobs) and the end of the job (pmixhost_mesh_finish
     * waits for its MESH_BCAST_DONE too, outcomes has nslots entries). */
    uint32_t nslots;
    const char *admit_info;
    void (*admitted) (void *arg, uint32_t member, const char *addr, uint32_t nlive);
    /* --- this member joined the running job itself (elastic-exec --join):
     * the admission it got (mesh_join_request: the slots, their base, its
     * slot, the live members' addresses; addrs and nslots are then not
     * used), the step's candidate ports (the members look for each other
     * there; listen_fd is bound on one).  map is the job's, with node_id -1
     * (none of its nodes).  Such a member has no ranks of the job: it keeps
     * an empty contribution pending in the mesh's next fence at all times
     * (the job's fences never wait for it), and the ranks spawned onto it
     * (pmixhost_mesh_add_spawn with its slot) are its own. */
    const struct mesh_admission *admission;
    const int *ports;
    uint32_t nports;
};

extern const struct pmixhost_transport pmixhost_transport_mesh;

/* Create the transport and its mesh (listening, no thread yet).  Returns
 * NULL with err. */
struct pmixhost_mesh *pmixhost_mesh_create (const struct pmixhost_mesh_opts *opts,
                                            elastic_error_t *err);

/* Start the mesh thread.  Returns 0 or -1 with err. */
int pmixhost_mesh_start (struct pmixhost_mesh *t, elastic_error_t *err);

/* The job whose ranks get the failures reported by other members (NULL:
 * none; failures reported meanwhile are dropped).  Never fails. */
/* The launch barrier: an empty fence of every member, made before the first
 * ranks start (as PRRTE starts a job's processes only once every daemon has
 * reported), so that the ranks of every node start together and MPI_Init
 * does not wait out the launcher's skew between nodes.  Blocks until the
 * fence is made among the live members (a member that never comes is lost
 * after the mesh's join timeout) or stop(arg) returns non-zero (looked at
 * every 50 ms).  Returns 1 (made; *members: how many were in it), 0
 * (stopped: the fence stays pending, so no other may follow: the caller is
 * ending) or -1 (the mesh failed it: cut off or stopped). */
int pmixhost_mesh_launch_barrier (struct pmixhost_mesh *t,
                                  int (*stop) (void *),
                                  void *arg,
                                  uint32_t *members);

void pmixhost_mesh_set_job (struct pmixhost_mesh *t, struct pmixhost_job *job);

/* This member's slot in the mesh (the map's node id, or the slot a
 * joined member was admitted into) and the number of slots. */
uint32_t pmixhost_mesh_self (const struct pmixhost_mesh *t);
uint32_t pmixhost_mesh_nmembers (const struct pmixhost_mesh *t);
/* Members live now (this one included).  Thread-safe. */
uint32_t pmixhost_mesh_nlive (struct pmixhost_mesh *t);

/* For a member that joined the running job (opts.admission): 1 when the
 * job is ending, that is every live member that started with the job
 * (the map's nodes) has said it is done (MESH_BCAST_DONE), or none of
 * them is live; else 0. */
int pmixhost_mesh_job_ending (struct pmixhost_mesh *t);

/* A namespace spawned into the mesh (registered on every member): its
 * nranks ranks all run on member `node`.  Fences of its ranks alone are
 * that node's, direct modex requests for them go there, and their
 * failures (a broadcast, the node's loss) are told to job.  Returns 0 or
 * -1 (ENOMEM).  pmixhost_mesh_clear_spawns forgets them all (before
 * their jobs are destroyed). */
int pmixhost_mesh_add_spawn (struct pmixhost_mesh *t,
                             struct pmixhost_job *job,
                             int node,
                             int nranks);
void pmixhost_mesh_clear_spawns (struct pmixhost_mesh *t);

/* mesh_broadcast of (kind, data) to every other live member.  Returns 0,
 * or -1 with errno (ECANCELED: the mesh is stopped). */
int pmixhost_mesh_broadcast (struct pmixhost_mesh *t,
                             int kind,
                             const void *data,
                             size_t len);

/* Stop the mesh (pending fences and requests fail; idempotent).  From the
 * caller's thread once the job's ranks are gone: PMIx's upcalls read the
 * mesh pointer without a lock. */
void pmixhost_mesh_stop (struct pmixhost_mesh *t);

/* The mesh (borrowed; NULL once stopped), for mesh_get_stats/live. */
struct mesh *pmixhost_mesh_get (struct pmixhost_mesh *t);

/* What the transport did (thread-safe snapshot). */
struct pmixhost_mesh_counts {
    unsigned fences_local;   /* fences of this node's ranks only */
    unsigned fences_mesh;    /* fences over the mesh completed */
    unsigned dmodex_asked;   /* direct modex requests sent to other members */
    unsigned dmodex_served;  /* requests of other members answered here */
    unsigned failures_sent;  /* local failures broadcast */
    unsigned reported;       /* other members' ranks reported to the job */
    unsigned published;      /* keys published here, handed to the others */
    unsigned published_peer; /* publications of other members stored here */
};
void pmixhost_mesh_counts (struct pmixhost_mesh *t, struct pmixhost_mesh_counts *c);

/* The end of the job.  A member whose ranks are all gone says so, with
 * blob (its outcome, any bytes), to every member (a MESH_BCAST_DONE
 * broadcast), then waits until every live member has done the same,
 * taking part meanwhile in the others' fences with an empty contribution
 * (their ranks may still be in MPI_Finalize's).  A member lost after it
 * was done is not reported failed: its ranks had ended.  Returns 0 when
 * every live member is done, or -1 with err (timeout seconds passed, or
 * this member was cut off); either way out holds, per member, its state
 * and blob (NUL-terminated copies; free with pmixhost_mesh_outcomes_free).
 * From the caller's thread, once no local rank is left. */
/* ABSENT: a slot for a member joining the running job that none took */
enum {
    PMIXHOST_MESH_DONE = 1,
    PMIXHOST_MESH_RUNNING,
    PMIXHOST_MESH_LOST,
    PMIXHOST_MESH_ABSENT
};
struct pmixhost_mesh_outcomes {
    int n;
    int *state;  /* [n] PMIXHOST_MESH_* */
    char **blob; /* [n] NULL unless done */
    size_t *len;
};
int pmixhost_mesh_finish (struct pmixhost_mesh *t,
                          const void *blob,
                          size_t len,
                          double timeout,
                          struct pmixhost_mesh_outcomes *out,
                          elastic_error_t *err);
void pmixhost_mesh_outcomes_free (struct pmixhost_mesh_outcomes *out);

/* Free a transport that was never given to pmixhost_create (NULL-safe). */
void pmixhost_mesh_destroy (struct pmixhost_mesh *t);

#endif /* ELASTIC_EXEC_PMIX_TRANSPORT_MESH_H */
