/* worker.h - the record of one worker of an attempt (owned by group.c)
 *
 * The core fills the records (group.c: ranks, directories, environment;
 * what the backends report: start, exit, failure); a backend reads them
 * through agent_worker() (agent_backend.h), never writes them.
 */
#ifndef ELASTIC_EXEC_WORKER_H
#define ELASTIC_EXEC_WORKER_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/heartbeat.h"

struct worker {
    int index;
    int local_rank; /* LOCAL_RANK (before --virtual-local-rank) */
    int rank;
    int role_rank;
    int world_size;
    int role_world_size;
    pid_t pid;
    int state; /* INIT, HEALTHY, SUCCEEDED, FAILED, STOPPED */
    double start_wall;
    double start_mono;
    int exited;
    int exitcode; /* >= 0, or -signal */
    int signum;
    double exit_mono;
    int suspended; /* exited with ELASTIC_EXIT_SUSPENDED */
    int failed;    /* a failure of this attempt */
    int lost;      /* a failure the others went on without (in place) */
    int after_end; /* killed, or exited without MPI_Finalize, after it
                      reported the end of its work: finished all the same */
    int aborted;   /* it ended the job (elastic_agent_abort) */
    int abort_code;
    uint64_t fail_seq;
    double fail_time; /* epoch seconds */
    char *message;
    char *traceback;
    char *reason;     /* why a watchdog killed it */
    double fire_mono; /* when (mono_now), 0 if none did */
    int fire_signum;  /* the signal it sent */
    pid_t fire_pid;   /* to which process */
    int fire_stuck;   /* its target outlived it (watchdog.c reported it) */
    void *ret;
    size_t retlen;
    int has_ret;
    char dir[PATH_MAX];
    char error_file[PATH_MAX];
    char heartbeat_file[PATH_MAX];
    struct elastic_heartbeat *hb; /* read-only mapping */
    uint64_t hang_grace_ns;       /* the hang timeout runs from here at the
                                     earliest (a fresh one after a kill) */
    uint64_t stopped_ns;          /* mono_ns when the watchdog first saw it
                                     stopped before it attached (0: not) */
    char **env;
    char **argv;
};

/* 1 if the worker's heartbeat (version 2 on) has the ELASTIC_HEARTBEAT_*
 * flag; worker_reported_end: its work is done (elastic_progress_end). */
int worker_reported (const struct worker *w, uint32_t flag);
int worker_reported_end (const struct worker *w);

#endif /* ELASTIC_EXEC_WORKER_H */
