/* elastic.h - the public interface of libelastic
 *
 * libelastic keeps an MPI application running through process failures
 * (in-place recovery with ULFM), job loss and preemption (snapshots).
 *
 * Error contract (every function, unless its comment says otherwise):
 *   - functions returning int return ELASTIC_OK (0) on success and one of
 *     the ELASTIC_ERR_* codes below on failure; elastic_strerror() names it;
 *   - functions returning a pointer return NULL on failure;
 *   - where an `elastic_error_t *` out-parameter is taken (it may be NULL),
 *     its text says what was wrong, which value, and what is accepted;
 *   - the library never aborts the process and never prints unless asked
 *     (ELASTIC_LOG=error|warn|info|debug; default warn, to stderr).
 *
 * Exceptions to this contract, as the library stands:
 *   - it ends the process itself in one case.  When a process failure
 *     interrupted an L3 (HDF5) write or resume read, HDF5 cannot close that
 *     file (MPI-IO is not fault tolerant) and would crash when MPI_Finalize
 *     shuts HDF5 down; the library then arms a hook that runs first thing in
 *     MPI_Finalize, flushes stdio and calls _exit() with
 *     elastic_exit_code() of the manager's last result (logged at level
 *     info).  Code after MPI_Finalize and atexit handlers do not run;
 *   - no call has a timeout of its own: a call waits as long as the MPI
 *     calls inside it do.  A peer that dies is reported by ULFM's failure
 *     detector (mpi_ft_detector_timeout) as a process failure, which the
 *     library repairs in place (ELASTIC_OK, the state rolled back) or ends
 *     with a final ELASTIC_ERR_RELAUNCH (ELASTIC_ERR_NO_ULFM without ULFM);
 *     a peer that is alive but stuck is not detected and the call blocks
 *     until a supervisor's watchdog (elastic-exec --hang-timeout) ends the
 *     process.  The deadline is not a timeout: reaching it returns
 *     ELASTIC_SUSPENDED (not an error) from elastic_maybe_snapshot.
 *
 * Only symbols prefixed elastic_ / ELASTIC_ are part of the interface.
 */
#ifndef ELASTIC_H
#define ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include <elastic/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes.  Values are fixed forever: they may be stored and compared. */
enum {
    ELASTIC_OK = 0,
    ELASTIC_ERR_INVAL = 1,        /* invalid argument or configuration value */
    ELASTIC_ERR_NOMEM = 2,        /* out of memory */
    ELASTIC_ERR_MPI = 3,          /* an MPI call failed with a non-elastic error */
    ELASTIC_ERR_RELAUNCH = 4,     /* in-place recovery impossible: relaunch needed */
    ELASTIC_ERR_NO_ULFM = 5,      /* the MPI library has no ULFM (relaunch-only mode) */
    ELASTIC_ERR_IO = 6,           /* file system error */
    ELASTIC_ERR_CORRUPT = 7,      /* snapshot data failed verification */
    ELASTIC_ERR_NO_SNAPSHOT = 8,  /* no usable snapshot */
    ELASTIC_ERR_EXISTS = 9,       /* a name is already registered */
    ELASTIC_ERR_NOT_FOUND = 10,   /* no such name, rank or item */
    ELASTIC_ERR_STATE = 11,       /* call not valid in the current state */
    ELASTIC_ERR_UNSUPPORTED = 12, /* feature not built in */
    ELASTIC_ERR_PROC_FAILED = 13  /* a process failed and was not recovered here */
};

/* Not an error: the result of elastic_maybe_snapshot (and of every later
 * maybe_* call) once the job has suspended to an L3 snapshot on a
 * preemption notice or before its deadline.  The application then ends
 * (elastic_manager_destroy, MPI_Finalize) and exits with
 * elastic_exit_code(ELASTIC_SUSPENDED), that is ELASTIC_EXIT_SUSPENDED. */
enum { ELASTIC_SUSPENDED = 100 };

/* Element types of registered arrays and values (elastic_set_type): they
 * give the datasets of L3 (HDF5) files their type.  BYTES is the default. */
enum {
    ELASTIC_TYPE_BYTES = 0, /* uint8 */
    ELASTIC_TYPE_INT32 = 1,
    ELASTIC_TYPE_INT64 = 2,
    ELASTIC_TYPE_UINT32 = 3,
    ELASTIC_TYPE_UINT64 = 4,
    ELASTIC_TYPE_FLOAT32 = 5,
    ELASTIC_TYPE_FLOAT64 = 6
};

/* Resume policies (elastic_config_t.resume, ELASTIC_RESUME_MODE). */
enum {
    ELASTIC_RESUME_AUTO = 0,   /* resume when the launch is a relaunch or a requeue */
    ELASTIC_RESUME_ALWAYS = 1, /* resume on every launch */
    ELASTIC_RESUME_NEVER = 2   /* always start fresh */
};

/* When a job grows into new processes (elastic_config_t.grow_policy,
 * ELASTIC_GROW_POLICY "at-once", "original", "never"). */
enum {
    ELASTIC_GROW_AT_ONCE = 0,  /* whenever the launcher has room, up to max_world_size */
    ELASTIC_GROW_ORIGINAL = 1, /* only back to the working size at creation */
    ELASTIC_GROW_NEVER = 2     /* stay at the size failures left */
};

/* elastic_config_t.resume_fresh_ok (ELASTIC_RESUME_FRESH_OK): 0 (strict),
 * 1 (start fresh without a valid snapshot), or this: start fresh only when
 * the run has no snapshot at all (none was rejected as damaged). */
#define ELASTIC_FRESH_OK_EMPTY 2

/* Process exit codes a launcher acts on (elastic-exec, elastic-mpirun). */
#define ELASTIC_EXIT_SUSPENDED 75 /* suspended to a snapshot: rerun to resume */
#define ELASTIC_EXIT_RELAUNCH  76 /* in-place recovery impossible: relaunch */

/* A place for an error message.  Functions that take one fill it on error. */
typedef struct {
    char text[256];
} elastic_error_t;

/* Return the version string and, where the pointers are non-NULL, the
 * components.  Never fails. */
const char *elastic_version (int *major, int *minor, int *patch);

/* Return a static, human-readable name for an ELASTIC_* code ("unknown
 * error code" for values outside the enum).  Never fails. */
const char *elastic_strerror (int code);

/* Supervisor link (elastic-exec, or torchrun for the error file).
 * Each is a no-op returning ELASTIC_OK when the process is not supervised. */

/* Report that this process reached `step` (feeds elastic-exec's
 * --hang-timeout and /metrics through ELASTIC_HEARTBEAT_FILE). */
int elastic_progress (int64_t step);

/* Report that the snapshot of `step` completed (shown in /metrics). */
int elastic_progress_snapshot (int64_t step);

/* Report that this process finished its work and its result is complete
 * (elastic_manager_destroy calls it after the ranks agreed on the end of a
 * job that neither failed nor suspended).  From then on elastic-exec counts
 * a signal or an exit without MPI_Finalize as the end of a finished rank,
 * not as a failure, and lists it in its summary.  An exit code other than
 * 0 still fails the rank. */
int elastic_progress_end (void);

/* Record an error message (printf format) in torchelastic's JSON error-file
 * format at ELASTIC_ERROR_FILE (or TORCHELASTIC_ERROR_FILE), so the agent's
 * failure report shows it.  Returns ELASTIC_ERR_IO if the file cannot be
 * written. */
int elastic_record_error (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* ------------------------------------------------------------------------
 * The elastic manager (needs MPI: declared when <mpi.h> is available)
 *
 * A manager runs an MPI application elastically over a communicator:
 *
 *   - the application registers its state: replicated values (step, seeds,
 *     scalars), arrays block-distributed along their first dimension, and
 *     opaque per-rank blobs for any other layout;
 *   - elastic_maybe_snapshot() copies that state every snapshot_period steps
 *     into L1 (a ring in this rank's memory) and L2 (a copy on a buddy rank,
 *     on another node when there is more than one); a snapshot counts only
 *     when every working rank completed it (the L2 exchange of a periodic
 *     snapshot overlaps the next step: it commits at the next library call,
 *     and until then the previous snapshot is the one a failure restores;
 *     ELASTIC_SNAPSHOT_OVERLAP=0 makes every snapshot synchronous);
 *   - when an MPI call fails because a process died, the application passes
 *     the error to elastic_maybe_reshard_down(): the library revokes, agrees
 *     and shrinks (ULFM), lets spare ranks take the dead ranks' places or
 *     re-shards every array over the survivors, rolls every rank back to the
 *     snapshot step and calls the application's handler to rebuild;
 *   - elastic_maybe_reshard_up() grows the working world back from idle spare
 *     ranks every reshard_check_period steps;
 *   - every persist_period steps, on a preemption notice and before the
 *     job's deadline elastic_maybe_snapshot also writes the state to an L3
 *     snapshot, one parallel HDF5 file in snapshot_dir; a relaunched or
 *     requeued job resumes from the newest valid one at any world size.
 *
 * Ranks.  "Original rank" means the rank in the communicator the manager was
 * created on (usually MPI_COMM_WORLD); it never changes.  The working
 * communicator (elastic_manager_comm) excludes idle spares and is renewed at
 * every world change; the library owns it (never free it).  "Old rank" in a
 * handler means the rank in the working communicator of the snapshot being
 * restored.
 *
 * Spares.  With spare_ranks = k the last k ranks of the communicator do not
 * work: they sleep inside elastic_manager_start() (polling every 10 ms, not
 * spinning) until they join the working world or the job ends.
 *
 * Rollback.  Any elastic_maybe_* call that changed the world (an internal
 * recovery is also possible inside elastic_maybe_snapshot when a process dies
 * during a snapshot) has called the handler and restored the registered
 * values, so a loop that keeps its step in a registered value simply
 * continues from the restored step.  elastic_manager_info().generation
 * counts world changes.
 *
 * L3 snapshots (persist).  At a step that is a multiple of persist_period the
 * snapshot taken by elastic_maybe_snapshot (a persist step is always an L1/L2
 * snapshot step) is also written by the working ranks (spares excluded) to
 * snapshot_dir/snap-SSSSSSSSSSSS.h5: one dataset per array in its global
 * shape, typed as declared with elastic_set_type (a float64 grid of `cols`
 * columns registered with elem_size cols * 8 is a float64 dataset
 * [rows][cols]), values as datasets, blobs per old rank, a crc32 per block
 * (the format: elastic-snapshot(1)).  A file becomes visible only when
 * complete (atomic rename); the newest snapshot_keep files of the run are
 * kept.  A failed write (I/O error, no space, file size limit) does not stop
 * the job: working rank 0 prints one warning line with the reason, a
 * "persist_failed" event is logged, older snapshots stay intact, and
 * elastic_maybe_snapshot returns ELASTIC_OK; the next persist step tries
 * again.  A periodic write runs in the background (persist_background, 1 by
 * default): the persist step costs its L1 snapshot and the file's layout,
 * a thread of each rank copies the rank's blocks from its L1 copy into the
 * file without MPI, and the file is committed at a later snapshot step once
 * every rank's copy is on disk; a suspend, the deadline and the end of the
 * job wait for it, and a world change abandons it (never committed).  The
 * synchronous writes are independent MPI-IO (no collective aggregation), so a
 * process that dies during a write is seen by the others as an error: they
 * recover in place (from L1/L2, the interrupted file is never committed),
 * and the next write uses the repaired communicator.  HDF5 cannot close
 * such a file: the process then ends at the start of MPI_Finalize, with the
 * exit code elastic_exit_code gives the manager's last result, before HDF5
 * would crash shutting down.
 *
 * The run id.  Files record the run id (ELASTIC_RUN_ID, else the run_id
 * field, else SLURM_JOB_ID -- the same across a requeue -- else "default");
 * a resume takes only files of its own run id, and a write never replaces
 * or removes another run's file (a snapshot directory holds one run).  A
 * rerun of the same command (same environment) therefore finds its
 * snapshots.  elastic-exec sets ELASTIC_RUN_ID to the launcher's job id
 * unless it is given: set ELASTIC_RUN_ID yourself when elastic-exec wraps
 * ranks under mpirun.
 *
 * Resume.  elastic_manager_start resumes, collectively, when resume is
 * ELASTIC_RESUME_ALWAYS, or with ELASTIC_RESUME_AUTO (the default) when the
 * launch is a relaunch or a requeue: ELASTIC_RESUME=1 (set by elastic-mpirun
 * and the Slurm plugin), SLURM_RESTART_COUNT > 0, or resume_from given.  It
 * opens the newest committed snapshot of the run in snapshot_dir (or
 * resume_from: a FILE, or a DIR searched for any run's newest), verifies
 * every checksum -- a damaged file is skipped with a warning naming it and
 * the fault, and the previous one is used -- restores the values, and calls
 * the handler exactly as after a re-shard: every working rank reads its new
 * block of each array by hyperslab (elastic_array_block,
 * elastic_array_restore), and elastic_blob_fetch reads blobs by old rank
 * from the file.  The new layout is the application's registered counts if
 * they add up to the snapshot's global count, an even split if it
 * registered none; anything else is ELASTIC_ERR_INVAL (a different problem
 * size).  A resume that finds no valid snapshot is ELASTIC_ERR_NO_SNAPSHOT
 * (with the reason) unless resume_fresh_ok is set: then the job starts
 * fresh with a warning.  resume_fresh_ok ELASTIC_FRESH_OK_EMPTY (2, what
 * elastic-exec and elastic-mpirun give a restart) starts fresh only when
 * no snapshot file was rejected as damaged: a run that saved nothing yet
 * starts over, one whose snapshots are all damaged stops with the error
 * rather than silently discarding its work.  A launch that does not resume starts fresh
 * even if the run's snapshots exist (a new run must not silently continue an old one):
 * working rank 0 warns that they exist and that the new run's snapshots replace them.
 * elastic_manager_info tells the step and file resumed from.
 *
 * Suspend.  The library catches the signals in `signals` (default TERM and
 * USR1: what Slurm, elastic-exec and elastic-mpirun send; "none": no
 * handler; a signal whose disposition is SIG_IGN is left ignored; the
 * previous handlers come back at destroy).  The handler only sets a flag.
 * Every signal_check_period steps elastic_maybe_snapshot agrees on the
 * flags (one MPI_Allreduce of four doubles over the working ranks); with
 * signal_check_period 0 (the default) the steps between agreements are
 * chosen, the same on every rank, so that the agreement costs about 1% of
 * the step time and a notice waits at most about half a second; if any rank
 * was signalled, every working rank takes the L1/L2 snapshot and writes L3
 * at that same step and returns ELASTIC_SUSPENDED.  The same happens before
 * the deadline (deadline, else ELASTIC_DEADLINE, else SLURM_JOB_END_TIME;
 * epoch seconds): once the time left is under deadline_margin seconds plus
 * one and a half times the longest L3 write so far plus the steps until the
 * next agreement (a check period of mean steps, plus the longest step).  The application
 * exits with elastic_exit_code(ELASTIC_SUSPENDED) == ELASTIC_EXIT_SUSPENDED (on working
 * rank 0; 0 elsewhere, see elastic_exit_code); idle spares are released by
 * elastic_manager_destroy as at the end of a job.  A signal that reaches only
 * an idle spare is not acted on.  Running the same command again (with
 * ELASTIC_RESUME=1, or requeued) continues from the suspended step, at any
 * world size.
 *
 * Events.  Every world change (and every final error) is reported as one JSON
 * line, appended to the file named by event_log by the new working rank 0
 * (by the lowest survivor for a final error) and passed to the event
 * callback on every rank that took part:
 *   {"event":"reshard_down","step":40,"old_size":8,"new_size":7,"failed":[3],
 *    "spares_used":[],"attempts":1,"handler_tries":1,"t_detect_ms":..,
 *    "t_revoke_agree_ms":..,"t_shrink_ms":..,"t_restore_ms":..,
 *    "t_handler_ms":..,"t_protect_ms":..,"t_total_ms":..,"rank":0,
 *    "time":"2025-01-01T12:00:00.123Z"}
 * event is reshard_down, reshard_up or fatal (with "error":"..."); failed and
 * spares_used list original ranks; step is the step every rank rolled back to.
 * The L3 level adds, written by working rank 0:
 *   {"event":"persist","step":40,"world_size":8,"bytes":..,"t_write_ms":..,
 *    "file":"DIR/snap-000000000040.h5","rank":0,"time":".."}
 *   {"event":"persist_failed","step":40,"world_size":8,"error":"..",..}
 *   {"event":"persist_skipped","step":40,"world_size":8,"reason":"..",
 *    "file":null,..} (persist_background 2: the previous write was in flight)
 *   {"event":"suspend","step":40,"world_size":8,"reason":"SIGTERM"|"deadline",
 *    "file":".." (null if that write failed),..}
 *   {"event":"resume","step":40,"old_size":8,"new_size":4,"file":"..",
 *    "t_restore_ms":..,..}
 * and the event log alone (not the callback) ends with the job's own word
 * that it completed, once every live process agreed in
 * elastic_manager_destroy (a launcher such as elastic-mpirun believes it
 * over mpirun's exit code):
 *   {"event":"completed","step":199,"world_size":8,"rank":0,"time":".."}
 * Phase times are those seen by the writing rank: t_detect from the last
 * library call before the failure (the top of the step, or the start of the
 * interrupted snapshot) to the start of the repair, an upper bound of the
 * failure detection latency; t_revoke_agree the revoke and the agreement on
 * the repair; t_shrink MPIX_Comm_shrink; t_restore the state exchange and the
 * new working communicator; t_handler the application's handler; t_protect
 * the snapshot of the restored state in the new layout.  A growth into new
 * processes (reshard_up with "new_ranks":[..]) adds "t_snapshot_ms" (the
 * snapshot of the current step taken before the spawn; 0 when the step's
 * snapshot was already taken), "t_spawn_ms" (MPI_Comm_spawn) and
 * "t_merge_ms" (the merge), all three counted in its t_total; one that
 * started from an older snapshot instead of taking one has
 * "t_snapshot_ms":0, "rewound_steps" (how many steps back its step is) and
 * "t_rewind_ms" (about how long redoing them takes: the agreed mean step
 * times their number; not in t_total).  A growth (new processes or idle
 * spares) whose protecting snapshot waits for the next snapshot step
 * (grow_eager_snapshots 0, the default) has "t_protect_ms":0 and
 * "protect_deferred":true.
 *
 * Environment (overrides the config given to elastic_manager_create):
 *   ELASTIC_SNAPSHOT_PERIOD, ELASTIC_SNAPSHOT_BUFFER_SIZE,
 *   ELASTIC_PERSIST_PERIOD, ELASTIC_RESHARD_CHECK_PERIOD,
 *   ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT, ELASTIC_MAX_RESHARD_RETRY_COUNT,
 *   ELASTIC_MIN_WORLD_SIZE, ELASTIC_SPARE_RANKS, ELASTIC_SPARE_TAKEOVER,
 *   ELASTIC_SNAPSHOT_DIR, ELASTIC_EVENT_LOG, ELASTIC_RUN_ID,
 *   ELASTIC_SNAPSHOT_KEEP, ELASTIC_RESUME_MODE (auto|always|never),
 *   ELASTIC_RESUME_FRESH_OK, ELASTIC_RESUME_FROM, ELASTIC_SIGNALS,
 *   ELASTIC_SIGNAL_CHECK_PERIOD, ELASTIC_DEADLINE, ELASTIC_DEADLINE_MARGIN,
 *   ELASTIC_PERSIST_BACKGROUND (0, 1 or 2: persist_background),
 *   ELASTIC_PERSIST_NICE (0..19, 0: the background writer's nice value),
 *   ELASTIC_PERSIST_DIRECT (0: the background writer goes through the page
 *   cache; default: O_DIRECT for the 4 KiB-aligned part, where it can),
 *   ELASTIC_SNAPSHOT_OVERLAP (1, the default: see above; 0: synchronous),
 *   ELASTIC_GROW_POLICY (at-once|original|never), ELASTIC_MAX_WORLD_SIZE,
 *   ELASTIC_GROW_MIN_BATCH, ELASTIC_GROW_EAGER_SNAPSHOTS (0 or 1: grow_eager_snapshots),
 *   ELASTIC_RECOVERY_TIMEOUT (seconds, 600; 0: no limit: a process whose
 *   in-place recovery has not ended this long after it started, the
 *   handler's time not counted, logs the phase it is stuck in, appends a
 *   "recovery_timeout" event and exits ELASTIC_EXIT_RELAUNCH, for its
 *   launcher to relaunch from the newest L3 snapshot; Open MPI's agreement
 *   and shrink can block for ever after a failure);
 *   ELASTIC_LOG sets the log level.  Read as facts about the launch:
 *   ELASTIC_RESUME (0 or 1), SLURM_RESTART_COUNT, SLURM_JOB_ID,
 *   SLURM_JOB_END_TIME.  ELASTIC_REPORT_INIT=1 (set by elastic-mpirun): each
 *   rank appends "rank_loaded" to ELASTIC_EVENT_LOG as the library loads and
 *   "rank_initialized" once elastic_manager_create or elastic_progress finds
 *   MPI initialized (elastic-mpirun's --init-timeout).  ELASTIC_GROW_SLOTS=N
 *   (set by elastic-mpirun): the launcher may run N processes of the job at
 *   once; the room to grow into new processes is N less the processes of
 *   the world, or the supervisor's heartbeat capacity if larger.
 * GPU (doc/gpu.md): ELASTIC_LIBCUDART and ELASTIC_LIBNCCL (the files to
 * dlopen), ELASTIC_NCCL_TIMEOUT (seconds a non-blocking NCCL call may take;
 * 60), ELASTIC_DEVICE_STAGING (1, the default: a periodic snapshot copies
 * device arrays on the device first; 0: straight to the host).  For tests only:
 * ELASTIC_TEST_NCCL_GROUP=G (one NCCL communicator per G consecutive working ranks),
 * ELASTIC_TEST_KILL=RANK:STEP:WHERE[:STOP][,...] makes that original rank SIGKILL (with
 * :STOP, SIGSTOP) itself inside a snapshot, a recovery, or (WHERE persist) an L3 write
 * after its data is written and before the commit, and ELASTIC_TEST_RANKS_PER_NODE=R
 * treats every R consecutive ranks as a node.
 *
 * The end of the job.  elastic_manager_destroy is collective: the working
 * ranks and the idle spares agree there that the job is over.  A rank that
 * instead saw a failure in the job's last collective (which other ranks
 * completed) gets ELASTIC_ERR_RELAUNCH from its repair.
 * ------------------------------------------------------------------------ */
#if !defined(ELASTIC_NO_MPI) && !defined(MPI_VERSION) && defined(__has_include)
#if __has_include(<mpi.h>)
#include <mpi.h>
#endif
#endif
#if !defined(ELASTIC_NO_MPI) && defined(MPI_VERSION)
#define ELASTIC_HAVE_MANAGER_API 1

/* Manager configuration.  Initialize with elastic_config_init(), then set
 * fields; environment variables override them at elastic_manager_create().
 * Strings are copied by the manager. */
typedef struct {
    int snapshot_period;      /* snapshot every N steps (>= 1; 10) */
    int snapshot_buffer_size; /* L1 ring slots (>= 2; 2) */
    int persist_period;       /* L3 (HDF5) every N steps (>= 0, 0 = never; 0) */
    int reshard_check_period; /* maybe_reshard_up checks every N steps (>= 1; 10) */
    int max_elastic_down_event_count; /* more events than this is final (>= 0; 16) */
    int max_reshard_retry_count;      /* handler retries per event (>= 0; 3) */
    int min_world_size;               /* fewer working ranks is final (>= 1; 1) */
    int spare_ranks;                  /* last k ranks are spares (0 <= k < size; 0) */
    int spare_takeover;               /* 1: spares replace dead ranks at once;
                                       * 0: shrink, spares join at maybe_reshard_up (1) */
    const char *snapshot_dir;         /* L3 snapshot directory ("."); */
    const char *event_log;            /* JSON event lines appended here (NULL: none) */
    const char *run_id;  /* L3 run id (NULL: ELASTIC_RUN_ID, SLURM_JOB_ID, "default") */
    int snapshot_keep;   /* L3 files of this run kept (>= 0, 0 = all; 3) */
    int resume;          /* ELASTIC_RESUME_AUTO, _ALWAYS or _NEVER (AUTO) */
    int resume_fresh_ok; /* 1: a resume without a valid snapshot starts fresh;
                          * ELASTIC_FRESH_OK_EMPTY (2): only when the run saved
                          * none (a damaged one stops the job) (0) */
    const char *resume_from;  /* resume from this L3 FILE or DIR (NULL: snapshot_dir) */
    const char *signals;      /* preemption signals ("TERM,USR1"; "none") */
    int signal_check_period;  /* agree on preemption every N steps (>= 0, 0 =
                               * auto: about 1% of the step time; 0) */
    int64_t deadline;         /* suspend before this time, epoch s (0: none; 0) */
    int deadline_margin;      /* seconds to keep before the deadline (>= 0; 30) */
    int diff_threshold_kib;   /* arrays of at least this many KiB on a rank
                               * snapshot differentially (elastic_array_set_diff,
                               * ELASTIC_DIFF_AUTO) (>= 0, 0 = only those set
                               * ELASTIC_DIFF_ON; 0) */
    int diff_block_kib;       /* block of a differential snapshot, KiB
                               * (1 to 1048576; 64) */
    int persist_background;   /* periodic L3 writes: 0 synchronous; 1 in the
                               * background from L1, a persist step waits for
                               * the one in flight; 2 ... skips it (1) */
    int grow_policy;          /* ELASTIC_GROW_AT_ONCE, _ORIGINAL or _NEVER: when
                               * maybe_reshard_up starts new processes in the
                               * room its launcher reports (AT_ONCE) */
    int max_world_size;       /* working ranks a growth may reach (>= 0, 0 = the
                               * working size at creation; 0) */
    int grow_min_batch;       /* grow by at least this many new processes, or by
                               * all that is left to the limit (>= 1; 1) */
    int grow_eager_snapshots; /* 0: a growth into new processes starts from
                               * the newest snapshot when redoing the steps
                               * since it costs less than a snapshot (the
                               * agreed mean step against the agreed cost of
                               * the last snapshot), else takes one of its
                               * step; and it leaves the new layout's
                               * protecting snapshot to the next snapshot step
                               * (until then the snapshot it restored from,
                               * in the old layout, is the restore point: a
                               * failure meanwhile rolls back to the same
                               * step).  1: a snapshot of the current step
                               * before the spawn and one of the new layout
                               * before the ranks compute again (0) */
} elastic_config_t;

typedef struct elastic_manager elastic_manager_t;

/* The handler rebuilds the computation after a world change: it runs on
 * every working rank with the new working communicator, gets its new block
 * of each array (elastic_array_block, elastic_array_restore) and any blobs
 * (elastic_blob_fetch), and returns 0, or non-zero to ask for a retry (after
 * an MPI error it must return, never abort). */
typedef int (*elastic_handler_f) (elastic_manager_t *m, MPI_Comm comm, void *arg);

/* Receives each JSON event line (without newline). */
typedef void (*elastic_event_f) (const char *json, void *arg);

/* What elastic_manager_info reports. */
typedef struct {
    int rank;                 /* rank in the working communicator (-1 on an idle spare) */
    int size;                 /* working size */
    int is_spare;             /* 1 on an idle spare */
    int original_rank;        /* rank in the communicator given to create; a
                               * process a growth started is numbered after
                               * every rank there was (8, 9, ... in a job
                               * created with 8) */
    int original_size;        /* working size at creation */
    int idle_spares;          /* spare ranks waiting */
    int events;               /* elastic down events so far */
    uint64_t generation;      /* world changes so far */
    int64_t snapshot_step;    /* newest committed snapshot (-1: none) */
    int old_size;             /* working size of the newest committed snapshot (in a
                               * handler: of the snapshot being restored) */
    int64_t persist_step;     /* newest L3 snapshot written or resumed from (-1: none) */
    int64_t resumed_step;     /* the L3 step this run resumed from (-1: started fresh) */
    int resumed_size;         /* the world size that wrote it (0: fresh) */
    const char *resumed_from; /* its file (NULL: fresh); valid until destroy */
} elastic_info_t;

/* Set every field of cfg to its default.  Never fails. */
void elastic_config_init (elastic_config_t *cfg);

/* Override cfg fields from the ELASTIC_* environment variables.  Returns
 * ELASTIC_ERR_INVAL naming the variable and value on a malformed one. */
int elastic_config_from_env (elastic_config_t *cfg, elastic_error_t *err);

/* Check cfg for a communicator of comm_size ranks (comm_size <= 0: skip the
 * size checks).  Returns ELASTIC_ERR_INVAL with "field: value is invalid
 * (expected ...)" text. */
int elastic_config_validate (const elastic_config_t *cfg,
                             int comm_size,
                             elastic_error_t *err);

/* Create a manager over comm (collective over comm, spares included): cfg
 * (NULL: defaults), then the environment, then validation.  Sets
 * MPI_ERRORS_RETURN on the communicators it makes; comm itself returns
 * errors while the call runs (its handler is restored before it returns),
 * so a process that fails meanwhile does not abort the others.  Returns
 * ELASTIC_ERR_INVAL (bad config), ELASTIC_ERR_NOMEM, ELASTIC_ERR_MPI, or
 * ELASTIC_ERR_RELAUNCH when a process failed before the manager was made
 * (nothing to recover from yet: exit with elastic_exit_code(), 76, and the
 * supervisor relaunches); the outcome is the same on every live process.
 * *mp is set on success.  SIGPIPE, where its action is the default, is
 * ignored from then on: a write to a dead peer's socket (Open MPI's tcp
 * BTL) must be an error the recovery handles, not a death of this rank. */
int elastic_manager_create (MPI_Comm comm,
                            const elastic_config_t *cfg,
                            elastic_manager_t **mp,
                            elastic_error_t *err);

/* End the manager: collective over the live ranks (workers agree with the
 * idle spares that the job is done), then free every communicator, revoked
 * ones included, so that MPI_Finalize cannot hang on them.  NULL-safe. */
void elastic_manager_destroy (elastic_manager_t *m);

/* Register a replicated value (identical on every rank: step, seeds,
 * scalars): size bytes at data, restored in place on rollback.  Every rank,
 * spares included, registers the same names in the same order before
 * elastic_manager_start.  Returns ELASTIC_ERR_EXISTS, _INVAL or _STATE. */
int elastic_register_value (elastic_manager_t *m,
                            const char *name,
                            void *data,
                            size_t size,
                            elastic_error_t *err);

/* Register an array distributed in blocks along its first dimension:
 * elem_size bytes per element (e.g. one grid row), count elements on this
 * rank at data (blocks may be uneven; 0 and NULL on a spare).  The global
 * order is the order of the working ranks.  Errors as for values. */
int elastic_register_array (elastic_manager_t *m,
                            const char *name,
                            void *data,
                            size_t elem_size,
                            uint64_t count,
                            elastic_error_t *err);

/* Declare the element type of a registered array or value (an
 * ELASTIC_TYPE_*), before elastic_manager_start: the type of its L3
 * dataset; an array's elem_size (a value's size) must be a multiple of the
 * type's size, and an element of k items becomes a row of k items.
 * Returns ELASTIC_ERR_NOT_FOUND, _INVAL or _STATE. */
int elastic_set_type (elastic_manager_t *m,
                      const char *name,
                      int type,
                      elastic_error_t *err);

/* Register (or, with the same name, update) an opaque per-rank blob of any
 * size: saved as it is at each snapshot, fetched by old rank after a world
 * change (elastic_blob_fetch).  New names only before start. */
int elastic_register_blob (elastic_manager_t *m,
                           const char *name,
                           const void *data,
                           size_t size,
                           elastic_error_t *err);

/* Start elastic operation (collective over all ranks, after registration):
 * checks that all ranks registered the same state, sets the handler used
 * by recoveries started inside library calls, and resumes from L3 when the
 * launch asks for it (see "Resume": the values are restored and the handler
 * has run when it returns).  On a working rank returns then with *active =
 * 1.  On a spare, sleeps until it joins the working world (then its state
 * is restored, handler has run, *active = 1) or the job ends (*active = 0:
 * call destroy and exit).  Resume errors (on every rank):
 * ELASTIC_ERR_NO_SNAPSHOT, _CORRUPT (an explicit resume_from file), _INVAL
 * (the snapshot does not fit the registration), _IO, _UNSUPPORTED (no
 * HDF5).  Final errors as for elastic_maybe_reshard_down. */
int elastic_manager_start (elastic_manager_t *m,
                           elastic_handler_f handler,
                           void *arg,
                           int *active,
                           elastic_error_t *err);

/* The working communicator (MPI_COMM_NULL on an idle spare).  Owned by the
 * library and replaced at each world change. */
MPI_Comm elastic_manager_comm (const elastic_manager_t *m);

/* Fill *info.  Returns ELASTIC_ERR_INVAL on NULL arguments. */
int elastic_manager_info (const elastic_manager_t *m, elastic_info_t *info);

/* Receive every event line (NULL: stop).  Never fails. */
void elastic_manager_set_event_callback (elastic_manager_t *m,
                                         elastic_event_f cb,
                                         void *arg);

/* Call at the top of every step (collective over the working ranks): every
 * snapshot_period steps copy the registered state to L1 and L2 and commit it
 * once every rank has it; every persist_period steps also write it to L3.
 * If a process dies meanwhile, recovers in place (previous snapshot, handler
 * from start) and returns ELASTIC_OK with the state rolled back.  Every
 * signal_check_period steps agree on preemption notices and the deadline:
 * then snapshot, write L3 and return ELASTIC_SUSPENDED (err says why and at
 * which step).  A failed L3 write is a warning, not an error (see "L3
 * snapshots").  Final errors as for elastic_maybe_reshard_down. */
int elastic_maybe_snapshot (elastic_manager_t *m, int64_t step, elastic_error_t *err);

/* Pass the error of a failed MPI call.  MPI_SUCCESS: ELASTIC_OK.  A process
 * failure (MPIX_ERR_PROC_FAILED, _PROC_FAILED_PENDING, _REVOKED by class):
 * repair (revoke, agree, shrink, spares or re-shard, restore, handler,
 * retried up to max_reshard_retry_count) and return ELASTIC_OK once every
 * rank has the same step, membership and communicator.  Any other error:
 * ELASTIC_ERR_MPI, nothing touched, err quoting MPI's message (the caller
 * still holds its code).  Final: ELASTIC_ERR_RELAUNCH (too many events, below
 * min_world_size, a rank and its buddy lost, retries exhausted) or
 * ELASTIC_ERR_NO_ULFM; exit with elastic_exit_code(). */
int elastic_maybe_reshard_down (elastic_manager_t *m,
                                int mpi_err,
                                elastic_handler_f handler,
                                void *arg,
                                elastic_error_t *err);

/* Call every step (collective over the working ranks): every
 * reshard_check_period steps, if the working world can grow, snapshot,
 * grow, re-shard and call the handler (*resharded = 1).  It grows from idle
 * spares while the working world is smaller than at creation; without
 * spares it grows into new processes when the launcher has room for them
 * (elastic-exec, whose heartbeat reports the room; the room is agreed with
 * the preemption notices, see signal_check_period): it starts them with
 * MPI_Comm_spawn (the same program and arguments), merges them and lets
 * them join as spares do, up to grow_policy and max_world_size.  The new
 * processes run the same program: their elastic_manager_create joins the
 * running job instead of starting one, and their elastic_manager_start
 * returns once they work, with the state restored.  A growth that fails
 * (a process that does not start, a failure during the merge) leaves the
 * job at its size; the next check tries again.  Otherwise returns at once
 * without communicating (*resharded = 0).  resharded may be NULL.  Errors
 * as for maybe_snapshot. */
int elastic_maybe_reshard_up (elastic_manager_t *m,
                              int64_t step,
                              elastic_handler_f handler,
                              void *arg,
                              int *resharded,
                              elastic_error_t *err);

/* This rank's block of array name in the current layout (inside a handler:
 * the new one): first global element, element count, global count (each may
 * be NULL).  Returns ELASTIC_ERR_NOT_FOUND for an unknown name. */
int elastic_array_block (const elastic_manager_t *m,
                         const char *name,
                         uint64_t *offset,
                         uint64_t *count,
                         uint64_t *global_count);

/* Inside a handler: copy this rank's restored block of array name into buf
 * (count elements, as elastic_array_block says) and register buf as the
 * array's storage.  For a device array (elastic_register_device_array) buf
 * is device memory: the block is copied in with cudaMemcpy, or not at all
 * when buf is the one its placement hook returned.  Returns
 * ELASTIC_ERR_STATE outside a handler, ELASTIC_ERR_INVAL on a wrong count
 * (or a device array's buf that is not device memory). */
int elastic_array_restore (elastic_manager_t *m,
                           const char *name,
                           void *buf,
                           uint64_t count,
                           elastic_error_t *err);

/* A placement hook for an array (elastic_array_set_realloc): return a
 * buffer for new_count elements -- data (count elements, the array's
 * storage now) itself when it fits, or resized as realloc would; its
 * contents need not be kept -- and remember it: it is the array's storage
 * from then on.  Return NULL if memory runs out (new_count 0: may be NULL). */
typedef void *(*elastic_realloc_f) (void *data,
                                    uint64_t count,
                                    uint64_t new_count,
                                    void *arg);

/* Restore array name in place at in-place recoveries: before the handler,
 * on every working rank of the new world, the library calls fn and writes
 * this rank's new block straight into the buffer fn returns, so that
 * elastic_array_restore with that buffer copies nothing (a rank whose block
 * is unchanged keeps its buffer: one copy from its L1, no allocation).
 * When the new layout is the snapshot's (spares took the dead ranks'
 * places) and every array was restored this way, the restored state is
 * adopted as the snapshot of the rollback step instead of being copied and
 * sent again (only L2 copies whose buddy changed move): the handler must
 * then not change the blocks' contents.  A resume from L3 still copies.
 * Any time after registration; fn NULL: off.  Returns ELASTIC_ERR_NOT_FOUND
 * for an unknown name, ELASTIC_ERR_INVAL for a NULL manager. */
int elastic_array_set_realloc (elastic_manager_t *m,
                               const char *name,
                               elastic_realloc_f fn,
                               void *arg,
                               elastic_error_t *err);

/* Differential snapshots of an array (elastic_array_set_diff). */
enum {
    ELASTIC_DIFF_AUTO = 0, /* on when its block on this rank is at least
                            * diff_threshold_kib (the default) */
    ELASTIC_DIFF_ON = 1,   /* always */
    ELASTIC_DIFF_OFF = 2   /* never */
};

/* Snapshot array name differentially (mode ELASTIC_DIFF_*): each snapshot
 * hashes its blocks of diff_block_kib (XXH3) and copies to L1 and sends to
 * the L2 buddy only the blocks that changed since the last committed
 * snapshot; L3 files stay complete.  It pays for state that is mostly
 * static between snapshots (embeddings, frozen layers, meshes); an array
 * that keeps changing is detected and snapshotted in full without hashing,
 * probed again later.  After any world change the next snapshot is full.
 * Any time after registration, the same on every rank.  Returns
 * ELASTIC_ERR_NOT_FOUND for an unknown name, ELASTIC_ERR_INVAL for a NULL
 * manager or a bad mode, ELASTIC_ERR_UNSUPPORTED when built without
 * xxhash and mode is ELASTIC_DIFF_ON. */
int elastic_array_set_diff (elastic_manager_t *m,
                            const char *name,
                            int mode,
                            elastic_error_t *err);

/* Inside a handler, collective over the new working communicator: fetch the
 * blob name that old rank old_rank saved in the snapshot being restored,
 * from wherever it lives (its L1, its buddy's L2, or the L3 file of a
 * resume).  Each rank asks for any
 * number of old ranks (n may be 0); bufs[i] is malloc'ed (caller frees) and
 * sizes[i] set.  Returns ELASTIC_ERR_NOT_FOUND (name, old rank),
 * ELASTIC_ERR_PROC_FAILED (return non-zero from the handler). */
int elastic_blob_fetch (elastic_manager_t *m,
                        const char *name,
                        int n,
                        const int *old_ranks,
                        void **bufs,
                        size_t *sizes,
                        elastic_error_t *err);

/* ------------------------------------------------------------------------
 * GPU state and NCCL (doc/gpu.md).  Built when configure finds CUDA and
 * NCCL (--with-cuda, --with-nccl); libcudart and libnccl are loaded with
 * dlopen on first use (ELASTIC_LIBCUDART, ELASTIC_LIBNCCL name other
 * files), so ranks that use none of this never load them.  Without them
 * every call below returns ELASTIC_ERR_UNSUPPORTED (after its argument
 * checks), with err naming what is missing: the build, the library that
 * cannot be loaded, or a CUDA device.  The library uses the rank's current
 * device (cudaSetDevice before these calls; elastic-exec's binding sets
 * CUDA_VISIBLE_DEVICES to the nearest GPU).  Link the application with the
 * shared CUDA runtime (nvcc -cudart shared) so that its streams are the
 * library's.
 * ------------------------------------------------------------------------ */

/* NCCL's communicator (ncclComm_t is struct ncclComm *). */
struct ncclComm;

/* Pass to elastic_maybe_reshard_down in place of an MPI error when NCCL
 * saw the failure first (ncclCommGetAsyncError, elastic_nccl_check, a
 * timeout in the application's own wait): the rank revokes its NCCL
 * communicator and the working communicator, every rank's next MPI call
 * fails and joins the repair, which rebuilds the NCCL communicator. */
#define ELASTIC_NCCL_ERROR (-1001)

/* Register an array in device memory, as elastic_register_array (same
 * layout rules; data a CUDA device or managed pointer, count elements of
 * elem_size bytes on this rank; 0 and NULL on a spare).  The library
 * keeps a pinned host mirror of it.  At each periodic snapshot step
 * elastic_maybe_snapshot copies it on the device into a staging buffer of
 * the library's (cudaMalloc once, as large as the array; none with
 * ELASTIC_DEVICE_STAGING=0 or without the device memory) on a stream of
 * its own, then to the host on a non-blocking stream, and
 * returns; the copy to the host overlaps the application's next step (its
 * device work waits for the device-side copy only) and is waited for at
 * the next library call, before the snapshot's L1 copy and L2 exchange (an
 * L3 step, a suspend: at once, through the mirror).  The snapshot holds
 * the array as it is when its first copy runs: the library's stream is a
 * blocking stream, ordered after the work enqueued before the call on the
 * legacy default stream and before the work enqueued after it.
 * An application that computes on other streams (or with per-thread
 * default streams) either synchronizes them before elastic_maybe_snapshot
 * or names its stream with elastic_device_set_stream.  After a world
 * change the handler gets the new block by elastic_array_restore with a
 * device buffer (cudaMemcpy into it), or set a placement hook
 * (elastic_array_set_realloc) that returns a device buffer of new_count
 * elements: the block is copied there before the handler.  L3 files are
 * unchanged (the data is written from host memory).  Errors as for
 * elastic_register_array, ELASTIC_ERR_INVAL when data is not device memory,
 * ELASTIC_ERR_NOMEM without pinned memory, ELASTIC_ERR_UNSUPPORTED. */
int elastic_register_device_array (elastic_manager_t *m,
                                   const char *name,
                                   void *data,
                                   size_t elem_size,
                                   uint64_t count,
                                   elastic_error_t *err);

/* Order the device snapshots with the application's stream (a
 * cudaStream_t; NULL: the legacy default stream, the default): each copy
 * starts after the work enqueued on it before elastic_maybe_snapshot, and
 * its later work waits for the copy.  Returns ELASTIC_ERR_INVAL (NULL
 * manager) or ELASTIC_ERR_UNSUPPORTED. */
int elastic_device_set_stream (elastic_manager_t *m, void *stream, elastic_error_t *err);

/* Ask for an NCCL communicator over the working ranks: call on every rank,
 * spares included, before elastic_manager_start.  The working ranks create
 * it in elastic_manager_start (a unique id broadcast over the working
 * communicator; non-blocking init, polled under ELASTIC_NCCL_TIMEOUT
 * seconds, 60) and every world change rebuilds it before the handler runs:
 * on a loss the survivors revoke it, agree on the excluded ranks and
 * ncclCommShrink (NCCL_SHRINK_ABORT), then abort the parent; when the
 * shrink fails, and when ranks join (spares, a grow), a new one is made.
 * Returns ELASTIC_ERR_STATE after start, ELASTIC_ERR_UNSUPPORTED. */
int elastic_nccl_enable (elastic_manager_t *m, elastic_error_t *err);

/* The NCCL communicator of this working rank (in a handler: the new one),
 * in *comm.  Owned by the library and replaced at each world change: never
 * destroy it, and take it again after every elastic_maybe_* call that
 * changed the world.  Returns ELASTIC_ERR_INVAL (NULL arguments) or
 * ELASTIC_ERR_STATE (not enabled, an idle spare, a failed rebuild). */
int elastic_nccl_comm (const elastic_manager_t *m,
                       struct ncclComm **comm,
                       elastic_error_t *err);

/* Wait, up to timeout_s seconds, for the work on stream (a cudaStream_t;
 * NULL: the legacy default stream) while polling the NCCL communicator's asynchronous
 * error: ELASTIC_OK when the stream is done, ELASTIC_ERR_PROC_FAILED on an
 * NCCL error or the timeout (then pass ELASTIC_NCCL_ERROR to
 * elastic_maybe_reshard_down), ELASTIC_ERR_IO on a CUDA error,
 * ELASTIC_ERR_INVAL (NULL manager, negative timeout), ELASTIC_ERR_STATE
 * (no communicator). */
int elastic_nccl_check (elastic_manager_t *m,
                        void *stream,
                        double timeout_s,
                        elastic_error_t *err);

/* The process exit code for a manager result: 0 for ELASTIC_OK,
 * ELASTIC_EXIT_RELAUNCH for ELASTIC_ERR_RELAUNCH and ELASTIC_ERR_NO_ULFM,
 * ELASTIC_EXIT_SUSPENDED for ELASTIC_SUSPENDED, 1 otherwise.  After a result
 * that all the ranks agreed on (a final error, an invalid configuration at
 * creation, a failed resume, a suspend), only one of them, the lowest
 * surviving rank, gets the non-zero code and the others 0, so that the job
 * ends with that code: with Open MPI 5's mpirun (--with-ft ulfm), several
 * ranks exiting non-zero at once sometimes hang or crash mpirun itself.
 * Never fails. */
int elastic_exit_code (int rc);

#endif /* manager API */

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_H */
