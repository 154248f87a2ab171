/* manager.h - the elastic manager's state, shared by its source files (internal)
 *
 * Processes are named by their original rank (in the communicator given to
 * elastic_manager_create).  The replicated part (membership, counters,
 * snapshot metadata) is identical on every working rank after each
 * committed change; spares receive it when an event needs them.
 */
#ifndef ELASTIC_MANAGER_H
#define ELASTIC_MANAGER_H

#include <stdint.h>
#include <mpi.h>
#include <elastic.h>

#include "common/clock.h"
#include "common/error.h"
#include "registry.h"
#include "snapshot.h"
#include "testhook.h"

struct gpu_state;
struct l3_file;
struct preempt;
struct retired;

/* Message tags on the manager's own communicators. */
enum {
    TAG_WAKE = 7101,
    TAG_L2 = 7102,
    TAG_RESTORE = 7103,
    TAG_BLOB = 7104,
    TAG_DRAIN = 7105,
    TAG_GROW_GO = 7106,
};

/* Flags of the agreements on the working communicator (bitwise AND).
 *
 * Every working rank ends the life of a working communicator with exactly
 * one agreement on it: the commit of a snapshot that did not commit, or
 * the entry of a world event.  Ranks reach either one (those in a snapshot
 * when a failure struck, those that saw it elsewhere), so both use these
 * bits and every rank reads the same outcome. */
enum {
    W_IN_SNAPSHOT = 1, /* contributed by snapshot participants only */
    W_SNAP_OK = 2,     /* my part of the snapshot is complete */
    W_NO_FAILURE = 4,  /* I saw no process failure */
    W_NOT_DONE = 8,    /* I am not ending the job */
    W_GROW = 16,       /* I am growing (or neutral) */
};

struct elastic_manager {
    elastic_config_t cfg;
    char *snapshot_dir;
    char *event_log;

    MPI_Group orig_group; /* the group of the creating communicator */
    int norig;
    int me; /* original rank */

    MPI_Comm world;          /* live processes: workers and idle spares */
    MPI_Comm work;           /* working ranks (MPI_COMM_NULL on idle spares) */
    struct retired *retired; /* communicators a failure ended, until drained
                                (retire.h) */

    /* replicated membership */
    int nwork;
    int *slot; /* [norig] slot[j] = original rank of working rank j */
    int nspare;
    int *spare; /* [norig] idle spares, ascending */
    int orig_nwork;
    int events;          /* elastic down events committed */
    uint64_t generation; /* world changes committed */
    int in_event;        /* an event committed but not finished */
    int event_counted;   /* ... and counted as an elastic down event */
    int handler_tries;   /* failed handler calls in this event */
    int myslot;          /* my working rank, -1 on an idle spare */

    struct registry *reg;
    uint64_t *layout; /* [nwork * na] current array counts per working rank */
    struct snapstore *store;
    int *buddy; /* [nwork] working rank holding j's L2 (-1 none) */
    int buddy_valid;

    elastic_handler_f handler;
    void *handler_arg;
    elastic_event_f event_cb;
    void *event_arg;

    int64_t step;      /* last step seen */
    double t_progress; /* time of the last library call */
    int started;
    int finished; /* the world was ended (done or final error) */
    int in_handler;
    int work_final;  /* the last agreement on work was made (see W_*) */
    int work_result; /* its outcome */
    int fatal_rc;    /* the final error, once finished by one */

    struct testhook *hooks;
    struct recwatch *watch; /* a recovery's time limit (recwatch.h) */

    /* L3 (persist.c, resume.c) */
    char *run_id;         /* resolved: run_id, ELASTIC_RUN_ID, SLURM_JOB_ID, "default" */
    char *resume_from;    /* copy of cfg.resume_from */
    char *signals;        /* copy of cfg.signals */
    int resume_wanted;    /* this launch resumes (decided at create) */
    char resume_why[80];  /* ... because of this */
    int64_t persist_step; /* newest L3 step written or resumed from (-1) */
    char *persist_file;   /* its file */
    struct l3_file *l3_src; /* the file restored from, during the resume handler */
    int l3_src_size;        /* its world size */
    int64_t resumed_step;   /* -1: started fresh */
    int resumed_size;
    char *resumed_from;
    int persist_warned;    /* L3 not built in: warned once */
    struct persist_bg *bg; /* the L3 write in the background, or NULL (persist_bg.c) */
    int64_t persist_due;   /* a persist step whose snapshot's L2 exchange overlaps the
                              next step: its background write starts once that
                              snapshot commits (persist_start_due), or -1 */

    int64_t event_step; /* the step the last world change rolled back to (-1):
                           the first maybe_snapshot of it does nothing collective,
                           since ranks that recovered inside a library call do
                           not call it again */

    struct gpu_state *gpu; /* device arrays and NCCL (gpu.h), NULL: unused */

    /* growth into new processes (grow.c) */
    int *base_orig;       /* [size of orig_group] original rank of each of its
                             ranks once a growth rebased it (NULL: identity) */
    int grow_room;        /* room for new ranks agreed at the last preemption
                             agreement (0: none) */
    int64_t grow_next;    /* no growth into room before this step (back-off) */
    int64_t grow_rewound; /* the last growth started this many steps back */
    double grow_t_rewind; /* ... about this long to redo them, s */
    int grow_backoff;     /* checks to wait after a failed growth */
    char *grow_cmd;       /* this program, and its arguments, for MPI_Comm_spawn */
    char **grow_argv;
    int *grow_new;     /* the growth in progress: its new original ranks */
    int grow_numbered; /* the next number a new process gets (0: norig) */
    int grow_nnew;
    double grow_t_spawn, grow_t_merge;
    double grow_t_snapshot; /* the growth's snapshot before it spawned, s (0: none) */
    int joined;             /* started by a growth: joins at elastic_manager_start */
    uint64_t join_sig;      /* the job's registry signature, to check against */
    uint64_t join_place;    /* ... and its snapshot directory's and run id's */
    int join_offer;         /* the job agrees on room to grow */

    /* preemption (preempt.c) */
    struct preempt *pre;
    int suspended; /* answered ELASTIC_SUSPENDED */
    char suspend_text[200];
};

/* Record that every rank agreed on error rc, and whether this process is
 * the one that reports it in its exit code (see elastic_exit_code). */
void mgr_set_agreed_error (int rc, int reporter);

/* Set a flag in the supervisor's heartbeat (agent_link.c; a no-op when
 * unsupervised): ELASTIC_HEARTBEAT_* of common/heartbeat.h. */
void heartbeat_flag (uint32_t flag);

/* Tell the supervisor this process is alive without a new step (a
 * recovery in progress); a no-op when unsupervised. */
void heartbeat_touch (void);

/* 1 if a supervisor gave this process a heartbeat file (it is not attached
 * for this: the supervisor takes an attached worker's silence for a hang). */
int heartbeat_supervised (void);

/* The room for new ranks the supervisor reports in the heartbeat (>= 0),
 * or -1 without a supervisor's heartbeat file. */
int heartbeat_capacity (void);

/* Record a world change in the supervisor's heartbeat (version 4: kind
 * ELASTIC_HEARTBEAT_CHANGE_*, phases[ELASTIC_HEARTBEAT_NPHASES] in
 * seconds); a no-op when unsupervised. */
void heartbeat_world_change (uint32_t kind,
                             int64_t step,
                             int old_size,
                             int new_size,
                             int new_ranks,
                             const double *phases);

/* Rebuild m->layout from the registered counts (collective over work). */
int mgr_gather_layout (struct elastic_manager *m);

/* Working rank of original rank r in the current membership, or -1. */
int mgr_slot_of (const struct elastic_manager *m, int r);

/* Why a world event is run (recover.c). */
enum event_why {
    WHY_FAILURE, /* a worker saw a process failure */
    WHY_GROW,    /* maybe_reshard_up found idle spares */
    WHY_DONE,    /* destroy: the job is over */
    WHY_SPARE,   /* an idle spare was woken */
};

/* Outcome of a world event for the calling process. */
enum event_outcome {
    EV_WORKING, /* a working rank of the new world (rolled back, handler run) */
    EV_IDLE,    /* still an idle spare */
    EV_DONE,    /* the job is over */
};

/* After a process failure seen inside the library: repair with the
 * handler given to start (or to the last maybe_reshard call). */
int mgr_recover_inside (struct elastic_manager *m, elastic_error_t *err);

/* Every registered array is restored (elastic_array_restore) after a
 * handler: 1, else 0 with an error logged. */
int mgr_all_restored (struct elastic_manager *m);

/* The exit code the job's end calls for (set by destroy): what
 * elastic_exit_code returns for the manager's last result. */
int mgr_exit_hint (void);

/* persist.c: the L3 level of the manager. */

/* After a process failure interrupted HDF5 I/O, HDF5 cannot close its file
 * (MPI-IO is not fault tolerant) and would crash when MPI_Finalize shuts it
 * down: end the process at the start of MPI_Finalize instead, with
 * mgr_exit_hint().  Collective-free; idempotent. */
void persist_finalize_guard (void);

/* Resolve the run id (at create).  Returns ELASTIC_ERR_NOMEM. */
int persist_setup (struct elastic_manager *m, elastic_error_t *err);

/* Collective over the working ranks: write the registered state to an L3
 * snapshot of step (why: a suspend's reason, or NULL).  A failed write is
 * warned about (working rank 0) and logged as an event: ELASTIC_OK.
 * Returns ELASTIC_ERR_PROC_FAILED if a process failed (the caller
 * recovers).  *written is set to 1 if the snapshot was committed. */
int persist_write (struct elastic_manager *m,
                   int64_t step,
                   const char *why,
                   int *written,
                   elastic_error_t *err);

/* persist_bg.c: periodic L3 writes in the background, from L1. */

/* Collective over the working ranks, at a persist step, after its
 * snapshot: with cfg.persist_background, lay the file out and leave this
 * rank's bytes to a thread that writes them from the committed L1 copy
 * (commit at a later persist_bg_poll); a write still in flight is waited
 * for (1) or the step is skipped with a persist_skipped event (2).
 * Without (0), or without an L1 copy of step: persist_write.  Returns as
 * persist_write (*written: 1 if committed now or started). */
int persist_background (struct elastic_manager *m,
                        int64_t step,
                        int *written,
                        elastic_error_t *err);

/* Collective over the working ranks, at every step that takes a snapshot,
 * before it: keep the L1 copy a background write reads from until it is
 * read, and commit the write if every rank finished it.  Returns
 * ELASTIC_OK or ELASTIC_ERR_PROC_FAILED (the caller recovers; the write is
 * abandoned there). */
int persist_bg_poll (struct elastic_manager *m, int64_t step, elastic_error_t *err);

/* Not collective: before a snapshot outside persist_bg_poll's steps, wait
 * until the L1 copy a background write reads is read if the snapshot can
 * overwrite it. */
void persist_bg_hold_l1 (struct elastic_manager *m);

/* Collective over the working ranks: wait for the write in flight and
 * commit it (ELASTIC_OK when there is none).  Returns ELASTIC_OK or
 * ELASTIC_ERR_PROC_FAILED. */
int persist_bg_drain (struct elastic_manager *m, elastic_error_t *err);

/* Not collective, never blocks on another rank: drop the write in flight
 * (a world change): never committed, its temporary removed by the next
 * write; the L1 copy is no longer read when this returns. */
void persist_bg_abandon (struct elastic_manager *m);

/* Collective over the working ranks, after snapshot_complete: start the
 * background write of m->persist_due if its snapshot committed (and clear
 * it).  Returns as persist_background. */
int persist_start_due (struct elastic_manager *m, elastic_error_t *err);

/* Wait for retention's background unlinks (l3_reaper) to end: the end of
 * the job. */
void persist_reap_wait (void);

/* resume.c: resume from L3 at start. */

/* Decide whether this launch resumes (at create, every rank the same
 * way): ELASTIC_RESUME, SLURM_RESTART_COUNT, cfg.resume, resume_from.
 * Returns ELASTIC_ERR_INVAL naming a malformed variable. */
int resume_decide (struct elastic_manager *m, elastic_error_t *err);

/* Collective over all ranks (spares wait for the working ranks): resume
 * if decided, else warn if the run's snapshots exist.  Returns ELASTIC_OK
 * or the same error on every rank. */
int resume_run (struct elastic_manager *m, elastic_error_t *err);

/* The error of an elastic_blob_fetch that some rank refused (blob b < 0:
 * unknown name; an old rank outside 0..nold-1; else another rank's bad
 * request).  Returns ELASTIC_ERR_NOT_FOUND with err set. */
int blob_fetch_refused (
    const char *name, int b, int n, const int *old_ranks, int nold, elastic_error_t *err);

/* elastic_blob_fetch while restoring from an L3 file: collective over the
 * working ranks. */
int resume_blob_fetch (struct elastic_manager *m,
                       const char *name,
                       int n,
                       const int *old_ranks,
                       void **bufs,
                       size_t *sizes,
                       elastic_error_t *err);

/* Run a world event with every live process until the new world is
 * committed, the job is over, or a final error (ELASTIC_ERR_RELAUNCH). */
int event_run (struct elastic_manager *m,
               enum event_why why,
               elastic_handler_f handler,
               void *arg,
               enum event_outcome *outcome,
               elastic_error_t *err);

#endif /* ELASTIC_MANAGER_H */
