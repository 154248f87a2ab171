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
 */
#ifndef ELASTIC_COMMON_HEARTBEAT_H
#define ELASTIC_COMMON_HEARTBEAT_H

#include <stdint.h>

#define ELASTIC_HEARTBEAT_MAGIC   0x454c4842u /* "ELHB" */
#define ELASTIC_HEARTBEAT_VERSION 3u

/* flags (version 2 on) */
#define ELASTIC_HEARTBEAT_ENDED 0x1u /* the work is done, the result complete */
#define ELASTIC_HEARTBEAT_SUSPENDED                                                      \
    0x2u /* suspended (only working rank 0 exits                                         \
            75: the others' exit 0 means this) */

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
};

#endif /* ELASTIC_COMMON_HEARTBEAT_H */
