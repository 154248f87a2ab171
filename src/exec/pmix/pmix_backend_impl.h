/* pmix_backend_impl.h - the PMIx-hosting backend's private header:
 * pmix_backend.c (the ranks of the job) and pmix_grow.c (processes
 * MPI_Comm_spawn adds to it)
 */
#ifndef ELASTIC_EXEC_PMIX_BACKEND_IMPL_H
#define ELASTIC_EXEC_PMIX_BACKEND_IMPL_H

#include <pthread.h>
#include <sys/types.h>

#include "exec/agent_backend.h"
#include "pmix_host.h"

struct bspawn;

#define SHM_MAX_PREFIX 8

struct pmixb {
    elastic_agent_t *agent;
    void *local; /* the local backend's context */
    struct pmixhost *h;
    int watching;
    struct pmixhost_job *job;     /* the current attempt's namespace */
    struct pmixhost_job *retired; /* the last one, when its ranks never connected
                                     and are dying in the background: destroyed
                                     once they are all reaped (their exits
                                     recorded: see pmixhost_job_destroy) */
    int retired_attempt;
    int njobs;        /* namespaces made so far */
    char run_id[160]; /* for namespace names */
    int in_place;     /* --restart-policy in-place */
    int disabled;     /* the server could not start and nobody asked
                         for it: the local backend alone */
    int guarded;      /* the guardian knows the server's directory */
    /* the current attempt */
    int nranks;
    int *connected;
    int nconnected;
    int initialized;
    int abort_reported;
    int abort_ignored; /* aborts that followed a kill before MPI_Init completed */
    int init_timeout_fired;
    int stuck;      /* ranks may wait for a dead one forever (it was not announced) */
    double t_start; /* CLOCK_MONOTONIC of the namespace's creation */
    /* the /dev/shm segments the ranks mapped, by name prefix */
    char shm_prefix[SHM_MAX_PREFIX][256];
    int nshm_prefix;
    /* mesh mode (spec->mesh): the job's map and the transport to the other
     * nodes' members; workers are this node's ranks of the map */
    const struct jobmap *map;
    int self;                 /* this member's slot in the mesh (the map's node
                                 id, or the slot a joined member took) */
    struct pmixhost_mesh *tp; /* owned by the server */
    int rank_base;            /* global rank of worker 0 */
    int mesh_pipe[2];         /* the mesh thread's news for the agent */
    pthread_mutex_t news_lock;
    struct mesh_news *news, **news_tail;
    int fenced;   /* cut off from the mesh: the ranks are killed */
    int launched; /* the launch barrier was made (or given up) */
    /* MPI_Comm_spawn (pmix_grow.c): workers nranks.. are spawned ones */
    struct bspawn *spawns;    /* this attempt's spawns, newest first */
    struct bspawn *queue;     /* requests not acted on yet */
    struct bspawn **extra_of; /* worker index - nranks -> its spawn */
    int *extra_rank;          /* ... and its rank in the spawn's namespace */
    int nextra, extra_cap;
    int *slot_owner;   /* per slot (worker 0..nranks-1's local rank, then
                          a joined member's room): the worker index in it,
                          -1 for none yet */
    int nslots;        /* nranks, or a joined member's room */
    int spawning;      /* a spawn is on its way: capacity 0 */
    int last_capacity; /* logged when it changes (-1: never) */
    int told_btl;      /* said once that --mpi-btl sm cannot grow */
    /* growth across the mesh (pmix_grow.c) */
    int nmembers;                 /* the mesh's member slots */
    int *room;                    /* [nmembers] free slots each member last said */
    unsigned long long *room_seq; /* [nmembers] the number of that saying */
    char **member_name;           /* [nmembers] the node names of joined members */
    int *member_ranks;            /* [nmembers] ranks spawned onto each that
                                     reached the job (kept past grow_end) */
    int room_said;                /* what this member last said (-1: nothing yet) */
    unsigned long long room_next; /* the number of its last saying */
    int next_global;              /* the global rank a spawn's first child gets */
    int finishing;                /* this member's ranks are gone: it takes none */
};

/* What the mesh thread tells the agent's thread (events, self-fencing). */
struct mesh_news {
    struct mesh_news *next;
    int kind;       /* NEWS_* */
    int a, b;       /* member and live count; rank and signaled; origin and
                       broadcast kind */
    char text[256]; /* a reason; a spawned namespace (NEWS_REPORTED) */
    void *data;     /* NEWS_BCAST: the broadcast's payload (owned) */
    size_t len;
};
enum {
    NEWS_LOST = 1,
    NEWS_REPORTED,
    NEWS_JOINED,
    NEWS_FENCE,
    NEWS_BCAST,
    NEWS_ADMITTED,
};

/* ---- pmix_backend.c ---- */

/* Worker index asked to end the job (MPI_Abort): end it, unless the abort
 * follows a kill before MPI_Init completed. */
void pmixb_report_abort (struct pmixb *pb, int index, int code, const char *message);

/* The ranks' Open MPI transport (--mpi-btl): as given, else sm,tcp across
 * nodes, else sm.  Ranks lost in place are replaced by spawned ones only
 * with tcp in it: Open MPI's sm BTL indexes its peers by their local rank
 * in their own job, so a spawned job reaches its parents over tcp
 * (loopback on one node; within a job sm is still used). */
const char *pmixb_btl (const struct pmixb *pb);

/* ---- pmix_grow.c: MPI_Comm_spawn --------------------------------------------
 * A spawn request is queued (grow_queue) and acted on from the loop
 * (grow_run): within the capacity (free slots: --nproc-per-node minus the
 * live workers, in place, one node, no spawn on its way) the children's
 * namespace is registered, a worker record added per child and each
 * started into a free slot; else refused.  A spawned worker is reported
 * like the others (grow_reaped); one that dies before its spawn joined,
 * or a spawn past --spawn-timeout, fails the spawn (the parents'
 * MPI_Comm_spawn returns an error) and its other children are killed. */

/* 1 if worker index i was spawned (i >= pb->nranks). */
int grow_is_spawned (struct pmixb *pb, int i);

/* Take a PMIXHOST_EV_SPAWN request. */
void grow_queue (struct pmixb *pb, struct pmixhost_spawn *sp);

/* Act on the queued requests (not from inside a reap: records move). */
void grow_run (struct pmixb *pb);

/* A spawn's children reached their parents (PMIXHOST_EV_SPAWN_JOINED). */
void grow_joined (struct pmixb *pb, struct pmixhost_spawn *sp);

/* An event of a spawned namespace (MPI_Abort, connections). */
void grow_event (struct pmixb *pb, const struct pmixhost_event *ev);

/* The hooks of local.c for a spawned worker i. */
char *const *grow_env (struct pmixb *pb, int i);
void grow_started (struct pmixb *pb, int i, pid_t pid);
void grow_reaped (struct pmixb *pb, int i, int wstatus);

/* Deadlines (--spawn-timeout) and the capacity in the heartbeat files. */
void grow_check (struct pmixb *pb);

/* The attempt ends (its workers all reaped): the spawned namespaces go. */
void grow_end (struct pmixb *pb);

/* Free what grow_* allocated (NULL-safe parts). */
void grow_free (struct pmixb *pb);

/* The mesh (agent's thread, from the mesh thread's news): another
 * member's MESH_BCAST_ROOM, _SPAWN or _SPAWN_END; a member lost; a rank
 * of a spawned namespace on another node reported failed; this member's
 * ranks are all gone (it takes no more). */
void grow_mesh_broadcast (
    struct pmixb *pb, int origin, int kind, const void *data, size_t len);
void grow_member_lost (struct pmixb *pb, int member);
void grow_remote_failed (struct pmixb *pb, const char *nspace, int rank, int signaled);
void grow_finishing (struct pmixb *pb);

/* A member admitted into the running job (elastic-exec --join; addr: its
 * "host:port", may be empty): its name until it says its own, and the
 * spawns this member asked for that still run, told again (the newcomer
 * registers their namespaces: its ranks will reach them). */
void grow_member_admitted (struct pmixb *pb, int member, const char *addr);

/* A member's node name (the map's, or what a joined member said), "?"
 * when not known; the ranks spawned onto it that still run. */
const char *grow_member_name (struct pmixb *pb, int member);
int grow_member_ranks (struct pmixb *pb, int member);

#endif /* ELASTIC_EXEC_PMIX_BACKEND_IMPL_H */
