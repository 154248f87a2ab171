/* pmix_host.h - the PMIx server elastic-exec hosts for its local MPI ranks
 *
 * Open MPI 5 ranks started by the agent itself (no mpirun, no PRRTE) connect
 * to this server in MPI_Init.  When a rank dies after MPI_Init, the server
 * tells the survivors through the PMIx fault event ULFM listens to
 * (PMIX_ERR_PROC_ABORTED_BY_SIG or PMIX_ERR_PROC_TERM_WO_SYNC, source = the
 * dead rank, range namespace, one PMIX_EVENT_AFFECTED_PROC of type
 * PMIX_PROC), so they get MPIX_ERR_PROC_FAILED, shrink and go on in place.
 * A rank that dies before every rank finished MPI_Init cannot be recovered
 * in place (the survivors wait in the init fence): the verdict says so and
 * the caller restarts the group.  MPI_Abort ends the job: the caller kills
 * every rank, and no fault event is sent.
 *
 * Lifecycle (the caller owns the processes; this module never forks,
 * signals or reaps):
 *
 *     h = pmixhost_create (&opts, err, sizeof (err));        once per process
 *     job = pmixhost_job_create (h, &jopts, err, sizeof (err));  per attempt
 *     for each rank: build its environment from pmixhost_job_env (job,
 *         rank) before fork (PMIx's threads run: a child may not malloc),
 *         fork and exec; in the parent pmixhost_job_started (job, rank, pid)
 *     loop: pmixhost_fd (h) readable -> while (pmixhost_next_event (h, &ev)) ..
 *           waitpid -> pmixhost_job_exited (job, rank, wstatus) -> verdict
 *     pmixhost_job_stop (job)      before killing ranks on purpose
 *     pmixhost_job_destroy (job)   once every rank was reaped
 *     pmixhost_destroy (h)
 *
 * Threads.  PMIx runs its own progress and listener threads; its upcalls
 * only record state and queue events under a mutex, so the caller's loop
 * never blocks them.  Every function here is to be called from one thread
 * (the caller's loop).  pmixhost_create blocks every signal while PMIx
 * starts its threads, so signals (SIGCHLD for signalfd) still reach only
 * the caller's threads; write errors to a dead rank's socket then come back
 * as EPIPE, never as SIGPIPE.
 *
 * Pitfalls handled (see shared/PMIX-LAB.md): PMIx never sets TCP_NODELAY on
 * its sockets, so a small event message waited ~40 ms for a delayed ACK;
 * the server's listening socket gets TCP_NODELAY, which Linux copies to
 * every accepted client socket.  A dead rank's client is deregistered only
 * after PMIx reported the lost connection (or with the namespace at job
 * end), never earlier, or the survivors' MPI_Finalize fence hangs.
 * job_control answers "not supported" except for the cleanup registrations
 * the PMIx library handles itself, so Open MPI's /dev/shm segments are
 * removed even for killed ranks.  The job is marked oversubscribed when
 * ranks outnumber the usable cores (else ULFM's shrink takes 30-50 ms).
 * The server shares its hwloc topology (PMIX_SERVER_SHARE_TOPOLOGY), so
 * ranks do not probe the machine in MPI_Init.
 * Every fence reaches the server (PMIx's local-only fence shortcut is
 * turned off), so the multi-node seam (pmix_transport.h) sees all of them
 * and the server knows when MPI_Init is over.
 *
 * Several nodes: give pmixhost_job_opts.map the job's map (exec/jobmap.h),
 * the same on every node.  Each node's leader registers the namespace with
 * every node and rank of the job (pmix_jobinfo.c, as PRRTE does) and
 * registers as clients only its node's ranks; ranks are global ranks in
 * every call below.  Fences and direct modex requests then need a
 * cross-node transport (pmix_transport.h): the local one completes a fence
 * with this node's data only.
 *
 * In elastic-exec's backend (struct elastic_agent_backend): create the
 * server once (first start_workers); per attempt, pmixhost_job_create with
 * attempt = the restart count, then fork each worker with its env added;
 * watch pmixhost_fd with elastic_agent_watch (ABORT: stop the group and
 * report the code; RESTART verdicts: stop and restart the group with a new
 * attempt; RECOVERABLE: report the worker's exit but keep the group
 * running); stop_workers calls pmixhost_job_stop before signalling and
 * pmixhost_job_destroy once all are reaped; destroy the server last.
 * Children must not keep the server's sockets (PMIx's accepted sockets are
 * not close-on-exec): mark descriptors >= 3 close-on-exec in the child.
 *
 * Names: PMIx exports internal symbols named pmix_server_*; nothing here
 * may start with pmix_, hence the pmixhost_ prefix.  Do not put src/exec
 * on the include path of files that include PMIx's <pmix_server.h>.
 *
 * Errors: functions returning int return 0 (or a verdict) and -1 on error;
 * pointer functions return NULL.  Where an elastic_error_t *err is taken
 * (NULL allowed), one line says what failed, the value and what is
 * accepted.  Nothing here aborts.
 */
#ifndef ELASTIC_EXEC_PMIX_HOST_H
#define ELASTIC_EXEC_PMIX_HOST_H

#include <stddef.h>
#include <sys/types.h>

#include <elastic.h>

struct pmixhost;
struct pmixhost_job;
struct pmixhost_transport;
struct jobmap;

struct pmixhost_opts {
    /* Parent of the server's private directory (PMIx's rendezvous and
     * session directories); NULL: $TMPDIR, else /dev/shm (else /tmp).  The
     * directory is removed by pmixhost_destroy. */
    const char *tmpdir;
    /* How fences, direct modex requests and failure notices reach other
     * nodes; NULL: this node only (pmixhost_transport_local). */
    const struct pmixhost_transport *transport;
    void *transport_ctx; /* owned by the server from now on (destroy op) */
    int no_nodelay;      /* 1: leave PMIx's sockets as they are (only to
                            measure what TCP_NODELAY saves) */
};

/* Start this process's PMIx server (PMIx allows one per process).  Returns
 * NULL + err if one already runs, the directory cannot be made or PMIx
 * fails to start. */
struct pmixhost *pmixhost_create (const struct pmixhost_opts *opts, elastic_error_t *err);

/* Stop the server: destroys any job left, finalizes PMIx, removes the
 * server's directory (NULL-safe, preserves errno). */
void pmixhost_destroy (struct pmixhost *h);

/* A file descriptor that becomes readable when pmixhost_next_event has
 * something; watch it for POLLIN in the caller's loop.  Never fails. */
int pmixhost_fd (struct pmixhost *h);

/* The server's directory (borrowed). */
const char *pmixhost_dir (struct pmixhost *h);

/* How many established client sockets of this server lack TCP_NODELAY
 * (0 means every small message goes out at once); *total (may be NULL) gets
 * the number of client sockets.  Returns -1 if the listener was not found. */
int pmixhost_nodelay_check (struct pmixhost *h, int *total);

/* ---- events from the PMIx threads ---------------------------------------- */

enum pmixhost_event_type {
    PMIXHOST_EV_CONNECTED = 1, /* rank called PMIx_Init (entered MPI_Init) */
    PMIXHOST_EV_INITIALIZED,   /* every rank passed MPI_Init's fences: from now
                                  on a failure is recoverable in place */
    PMIXHOST_EV_FINALIZED,     /* rank called PMIx_Finalize */
    PMIXHOST_EV_LOST,          /* PMIx lost the rank's connection without a
                                  finalize (arrives late: use waitpid) */
    PMIXHOST_EV_ABORT,         /* rank called MPI_Abort: status = its code,
                                  message = its text; kill every rank of the
                                  job; no fault event is sent to anyone */
    PMIXHOST_EV_SPAWN,         /* rank called PMIx_Spawn (MPI_Comm_spawn):
                                  spawn = the request, to be answered with
                                  pmixhost_spawn_refuse or _launched */
    PMIXHOST_EV_SPAWN_JOINED,  /* spawn's processes published their side
                                  of the connect: PMIx_Spawn was answered */
};

struct pmixhost_event {
    int type;                     /* enum pmixhost_event_type */
    struct pmixhost_job *job;     /* borrowed; events die with their job */
    struct pmixhost_spawn *spawn; /* SPAWN, SPAWN_JOINED (borrowed) */
    int rank;                     /* -1 for job-wide events */
    int status;                   /* ABORT: the abort code */
    char message[256];            /* ABORT: the message ("" if none) */
    double time;                  /* CLOCK_MONOTONIC seconds when it happened */
};

/* Move the oldest pending event into *ev.  Returns 1 if one was moved, 0 if
 * none is pending.  Also deregisters dead ranks whose lost connection PMIx
 * has reported meanwhile (blocking PMIx calls belong to this thread). */
int pmixhost_next_event (struct pmixhost *h, struct pmixhost_event *ev);

/* ---- jobs (one namespace per attempt) ------------------------------------ */

struct pmixhost_job_opts {
    const char *run_id;                /* namespace is "elastic.<run_id>.<attempt>";
                                          [A-Za-z0-9_.-], at most 200 characters */
    int attempt;                       /* >= 0 */
    int nranks;                        /* 1..65535 ranks, all on this node; with a map:
                                          0 or the map's world size */
    const struct jobmap *map;          /* NULL: every rank here.  Else the job's
                                    map (exec/jobmap.h; read during
                                    pmixhost_job_create only): the namespace is
                                    registered with every node and rank of the job
                                    and this server hosts the ranks of
                                    map->node_id; every node needs its host name.
                                    Ranks are global ranks everywhere below; only
                                    this node's have an environment, are started
                                    and exit here.  A one-node map registers
                                    exactly what NULL does. */
    const char *btl;                   /* "sm" (self,sm: default), "tcp" (self,tcp) or
                                          "sm,tcp" (self,sm,tcp: sm within the node,
                                          tcp between nodes) */
    int oversubscribed;                /* -1: when nranks > usable cores; 0/1: forced */
    int init_fences;                   /* fences that make up MPI_Init; 0: Open MPI 5's 4
                                          (a modex and a barrier in ompi_mpi_instance_init,
                                          again in ompi_mpi_init) */
    struct pmixhost_spawn *spawned_by; /* the children of this spawn (one
                                 node only, no map): PMIX_SPAWNED and
                                 PMIX_PARENT_ID in the job data; a failure
                                 is announced to the parents' namespace
                                 too, and theirs to it */
    /* A namespace spawned into a mesh (no map; pmix_grow.c): its ranks all
     * run on node spawn_node (host spawn_host) of the parents' map, which
     * is their PMIX_NODEID; with remote_ranks they are another node's
     * (none here: registered so that this node's ranks reach them).  Where
     * the request came through the mesh (spawned_by NULL), parent is the
     * requestor (PMIX_PARENT_ID) and family the parents' job on this
     * server (failures are announced across both, as for spawned_by). */
    int spawn_node;
    const char *spawn_host; /* NULL: not spawned into a mesh */
    int remote_ranks;
    const char *parent_nspace; /* NULL: none */
    int parent_rank;
    struct pmixhost_job *family;
};

/* Register a namespace for opts->nranks ranks (or the map's): job, node
 * and rank data, the session directories, and each local rank's
 * environment.  Returns NULL + err on a bad option (naming it and the
 * accepted values), a map this server cannot host (not its node's leader,
 * a node without a host name), a namespace already in use, or a PMIx
 * failure. */
struct pmixhost_job *pmixhost_job_create (struct pmixhost *h,
                                          const struct pmixhost_job_opts *opts,
                                          elastic_error_t *err);

/* Deregister the namespace (PMIx then runs the cleanups the ranks
 * registered: Open MPI's /dev/shm segments), drop its pending events and
 * remove its session directory.  Call it once every rank was reaped
 * (NULL-safe, preserves errno). */
void pmixhost_job_destroy (struct pmixhost_job *job);

/* The namespace name (borrowed). */
const char *pmixhost_job_nspace (struct pmixhost_job *job);

/* The environment for `rank` as NULL-terminated "NAME=value" strings
 * (borrowed, valid until pmixhost_job_destroy): PMIx's variables from
 * PMIx_server_setup_fork plus OMPI_MCA_mpi_ft_enable=1, OMPI_MCA_pml=ob1,
 * OMPI_MCA_btl=self,sm|tcp, OMPI_MCA_coll=^han.  They override inherited
 * values.  NULL if rank is out of range or not on this node. */
char *const *pmixhost_job_env (struct pmixhost_job *job, int rank);

/* Record that `rank` runs as pid.  Returns -1 (EINVAL) for a bad rank or
 * one of another node. */
int pmixhost_job_started (struct pmixhost_job *job, int rank, pid_t pid);

/* What the death of a rank means (pmixhost_job_exited). */
enum pmixhost_exit {
    PMIXHOST_EXIT_DONE = 0,    /* finished: it finalized, or exited 0 without
                                  ever connecting (not a PMIx program) */
    PMIXHOST_EXIT_RECOVERABLE, /* failed after MPI_Init: the survivors were
                                  sent the fault event; keep them running */
    PMIXHOST_EXIT_RESTART,     /* failed before every rank finished MPI_Init:
                                  in-place recovery is impossible; stop the
                                  job and restart the group */
    PMIXHOST_EXIT_ABORTED,     /* exited while the job aborts (MPI_Abort) */
    PMIXHOST_EXIT_STOPPED,     /* exited while the caller stops the job */
};

/* Record the exit of `rank` (wstatus as from waitpid) and act on it:
 * notify the survivors when it is a recoverable failure.  Returns the
 * verdict (enum pmixhost_exit), or -1 (EINVAL) for a bad rank, a rank of
 * another node or a rank already reported. */
int pmixhost_job_exited (struct pmixhost_job *job, int rank, int wstatus);

/* The caller stops the job on purpose (restart, shutdown): later exits are
 * PMIXHOST_EXIT_STOPPED and send no fault event.  Never fails. */
void pmixhost_job_stop (struct pmixhost_job *job);

/* Tell this node's ranks that `rank` died on another node (called by a
 * transport when a peer server reports it; signaled selects
 * PMIX_ERR_PROC_ABORTED_BY_SIG over PMIX_ERR_PROC_TERM_WO_SYNC).  Returns -1
 * (EINVAL) for a bad rank, or if PMIx refuses the event. */
int pmixhost_job_remote_failure (struct pmixhost_job *job, int rank, int signaled);

/* A snapshot of a job's state. */
struct pmixhost_job_info {
    int nranks;       /* the job's ranks */
    int nlocal;       /* of which on this node */
    int nnodes;       /* the job's nodes (1 without a map) */
    int node;         /* this server's node */
    int connected;    /* ranks that ever connected */
    int finalized;    /* ranks that called PMIx_Finalize */
    int exited;       /* ranks reported with pmixhost_job_exited */
    int failed;       /* recoverable failures notified to survivors */
    int lost;         /* lost connections PMIx reported */
    int deregistered; /* dead ranks deregistered before job end */
    int fences;       /* fences completed */
    int initialized;  /* every rank passed MPI_Init */
    int oversubscribed;
    int aborted; /* MPI_Abort was called */
    int abort_rank;
    int abort_status;
    char abort_message[256];
    int restart_needed; /* a failure during MPI_Init */
    int restart_rank;   /* the first such rank */
    int stopping;
};

/* Fill *info.  Returns -1 (EINVAL) on NULL arguments. */
int pmixhost_job_info (struct pmixhost_job *job, struct pmixhost_job_info *info);

/* ---- spawns (MPI_Comm_spawn), publish and lookup ----------------------------
 *
 * Open MPI's MPI_Comm_spawn calls PMIx_Spawn at the parents' root, then the
 * root publishes "<port>:accept" and looks up "<port>:connect" (PMIX_WAIT,
 * a timeout of 600 s); the children publish ":connect", look up ":accept"
 * in MPI_Init, and everybody calls PMIx_Connect.  The server keeps the
 * published data (any range: one node, one session; PMIX_PERSIST_FIRST_READ
 * removes a value once read), answers a waiting lookup when its keys are
 * published or fails it at its PMIX_TIMEOUT (pmixhost_expire), and
 * completes connect and disconnect at once (every participant is on this
 * node) unless a participant is gone.
 *
 * A spawn request reaches the caller as PMIXHOST_EV_SPAWN; the caller
 * registers the children's namespace (pmixhost_job_create with spawned_by)
 * and starts them (pmixhost_spawn_launched: pending), or refuses
 * (pmixhost_spawn_refuse).  PMIx_Spawn is answered once a child published
 * its side of the connect (PMIXHOST_EV_SPAWN_JOINED): the parents' lookup
 * then finds it at once.  A child that dies before, or a spawn out of time,
 * is failed by the caller (pmixhost_spawn_fail): PMIx_Spawn returns an
 * error, which Open MPI gives every parent of the MPI_Comm_spawn (a failed
 * lookup would reach its root alone, and the others would wait in a
 * broadcast for ever).  The caller frees the request
 * (pmixhost_spawn_release) once its namespace ended. */

struct pmixhost_spawn;

struct pmixhost_spawn_req {
    char requestor[300];         /* "nspace:rank", for messages */
    struct pmixhost_job *parent; /* the requestor's job (borrowed) */
    int parent_rank;
    int nprocs;  /* processes asked for (every app's together) */
    char **argv; /* argv[0] is the command (the first app's) */
    char **env;  /* the app's "NAME=value" entries (OMPI_PARENT_PORT) */
    char *wdir;  /* PMIX_WDIR, NULL: none given */
};

enum pmixhost_spawn_state {
    PMIXHOST_SPAWN_NEW = 0, /* not answered yet */
    PMIXHOST_SPAWN_PENDING, /* launched, the children not joined yet */
    PMIXHOST_SPAWN_JOINED,  /* a child published: PMIx_Spawn answered */
    PMIXHOST_SPAWN_FAILED,  /* refused, or failed after the launch */
};

/* The request (borrowed, valid until pmixhost_spawn_release). */
const struct pmixhost_spawn_req *pmixhost_spawn_request (struct pmixhost_spawn *sp);

/* enum pmixhost_spawn_state.  Never fails. */
int pmixhost_spawn_state (struct pmixhost_spawn *sp);

/* Refuse a new request: no_resource 1 answers PMIX_ERR_OUT_OF_RESOURCE
 * (more than the capacity), else PMIX_ERR_NOT_SUPPORTED.  Returns -1
 * (EINVAL) if it was answered already. */
int pmixhost_spawn_refuse (struct pmixhost_spawn *sp, int no_resource);

/* The children of a new request run in child (made with
 * pmixhost_job_create and spawned_by = sp): the spawn is pending from now
 * on, answered when a child publishes.  Returns -1 (EINVAL) if it was
 * answered already. */
int pmixhost_spawn_launched (struct pmixhost_spawn *sp, struct pmixhost_job *child);

/* A new or pending spawn failed (a child died before it joined, or it ran
 * out of time: timed_out): PMIx_Spawn returns PMIX_ERR_TIMEOUT or
 * PMIX_ERR_LOST_CONNECTION, and so do the requestor's waiting lookups.
 * Does nothing once the spawn joined or failed. */
void pmixhost_spawn_fail (struct pmixhost_spawn *sp, int timed_out);

/* Free a request (NULL-safe); a new one is refused first. */
void pmixhost_spawn_release (struct pmixhost_spawn *sp);

/* Fail the waiting lookups whose PMIX_TIMEOUT passed (PMIX_ERR_TIMEOUT).
 * Call it now and then (the caller's loop).  Returns the seconds until the
 * next deadline, or -1 if none waits with one. */
double pmixhost_expire (struct pmixhost *h);

/* Name of a verdict ("recoverable"); "?" when out of range.  Never fails. */
const char *pmixhost_exit_name (int verdict);

#endif /* ELASTIC_EXEC_PMIX_HOST_H */
