/* heartbeat.h - the progress record shared by elastic-exec and libelastic
 *
 * elastic-exec creates one small file per worker, sized to this struct and
 * zero-filled, and names it in the worker's ELASTIC_HEARTBEAT_FILE.  The
 * worker (libelastic) maps it MAP_SHARED and updates it on every progress
 * report; the agent maps it read-only and reads it for --hang-timeout and
 * /metrics.  Fields are written with __atomic stores, `updated_ns` last
 * (CLOCK_MONOTONIC, comparable across processes on one node).  Header-only,
 * so the library takes no dependency on the tools.
 *
 * Version 2 adds `flags`: ELASTIC_HEARTBEAT_ENDED is the application's word
 * that its work is done (elastic_progress_end), so the agent judges an end
 * in MPI_Finalize or an exit without it as the end of a finished rank.
 *
 * Version 3 turns `reserved` into `capacity`, the one field the agent
 * writes (pwrite of its 4 bytes at offsetof (struct elastic_heartbeat,
 * capacity)) and the worker only reads (__atomic_load_n): how many ranks
 * the supervisor could start now through MPI_Comm_spawn.  It is the
 * --nproc-per-node slots minus the live workers (a worker lost in place
 * frees its slot), written into every live worker's file whenever it
 * changes; 0 while a spawn is in progress and wherever spawning is not
 * served (not the hosted PMIx server, not --restart-policy in-place,
 * several nodes).  Same layout as version 2: a version-2 worker reads 0
 * there.
 *
 * Version 4 appends the last world change the worker took part in
 * (libelastic's reshard_down, reshard_up and grow_failed events), for the
 * agent's /metrics: the worker writes every other field first and
 * `changes` last (release); a reader loads `changes` (acquire), the
 * fields, then `changes` again, and reads again if it moved.  The agent
 * reads them only where version >= 4 (an older worker's file is shorter:
 * libelastic grows a file an older agent made, never shrinks one).
 */
#ifndef ELASTIC_COMMON_HEARTBEAT_H
#define ELASTIC_COMMON_HEARTBEAT_H

#include <stdint.h>

#define ELASTIC_HEARTBEAT_MAGIC   0x454c4842u /* "ELHB" */
#define ELASTIC_HEARTBEAT_VERSION 4u

/* flags (version 2 on) */
#define ELASTIC_HEARTBEAT_ENDED 0x1u /* the work is done, the result complete */
#define ELASTIC_HEARTBEAT_SUSPENDED                                                      \
    0x2u /* suspended (only working rank 0 exits                                         \
            75: the others' exit 0 means this) */

/* change_kind (version 4 on) */
#define ELASTIC_HEARTBEAT_CHANGE_DOWN        1u /* reshard_down */
#define ELASTIC_HEARTBEAT_CHANGE_UP          2u /* reshard_up */
#define ELASTIC_HEARTBEAT_CHANGE_GROW_FAILED 3u /* grow_failed */

/* change_us[] (version 4 on): the event's phase times, in this order */
enum {
    ELASTIC_HEARTBEAT_PHASE_DETECT,
    ELASTIC_HEARTBEAT_PHASE_SHRINK,
    ELASTIC_HEARTBEAT_PHASE_SNAPSHOT,
    ELASTIC_HEARTBEAT_PHASE_REWIND,
    ELASTIC_HEARTBEAT_PHASE_SPAWN,
    ELASTIC_HEARTBEAT_PHASE_MERGE,
    ELASTIC_HEARTBEAT_PHASE_RESTORE,
    ELASTIC_HEARTBEAT_PHASE_HANDLER,
    ELASTIC_HEARTBEAT_PHASE_PROTECT,
    ELASTIC_HEARTBEAT_PHASE_TOTAL,
    ELASTIC_HEARTBEAT_NPHASES
};

struct elastic_heartbeat {
    uint32_t magic;             /* ELASTIC_HEARTBEAT_MAGIC once the worker attached */
    uint32_t version;           /* ELASTIC_HEARTBEAT_VERSION */
    int64_t pid;                /* the reporting process */
    int64_t step;               /* last step reported */
    int64_t last_snapshot_step; /* last completed snapshot step, -1 if none */
    uint64_t count;             /* number of progress reports */
    uint64_t updated_ns;        /* CLOCK_MONOTONIC of the last report */
    /* version 2: read only where version >= 2 (a version-1 worker maps the
     * file one field shorter) */
    uint32_t flags; /* ELASTIC_HEARTBEAT_* */
    /* version 3: ranks the supervisor could start now through
     * MPI_Comm_spawn; written by the agent, read by the worker */
    uint32_t capacity;
    /* version 4: the last world change (written by the worker) */
    uint32_t changes;     /* world changes this worker took part in */
    uint32_t change_kind; /* ELASTIC_HEARTBEAT_CHANGE_* */
    int32_t change_old_size, change_new_size;
    int32_t change_new_ranks; /* new processes taken in (a growth) */
    int32_t change_pad;
    int64_t change_step;                           /* the step it rolled back to */
    uint64_t change_us[ELASTIC_HEARTBEAT_NPHASES]; /* phases, microseconds */
};

#endif /* ELASTIC_COMMON_HEARTBEAT_H */
