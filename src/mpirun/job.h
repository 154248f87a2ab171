/* job.h - one elastic-mpirun job: what main() sets up and the attempts share
 *
 * main.c fills a struct job (options, the MPI found, the hosts, the run
 * directory, whether the first launch resumes), attempt.c runs its attempts
 * (command.c builds each one's mpirun command line), summary.c reports them.
 */
#ifndef ELASTIC_MPIRUN_JOB_H
#define ELASTIC_MPIRUN_JOB_H

#include <limits.h>

#include "hostlist.h"
#include "options.h"
#include "probe.h"

#define MPIRUN_PROG        "elastic-mpirun"
#define EXIT_USAGE         2
#define EXIT_FAILED        1
#define MAX_ATTEMPTS_SHOWN 64

/* How one attempt ended, as the summary shows it. */
enum outcome { OUT_COMPLETED, OUT_SUSPENDED, OUT_RELAUNCH, OUT_FAILED, OUT_INTERRUPTED };

struct attempt {
    int number; /* global, across reruns */
    int np;
    char hosts[256];
    double t_start, t_end, t_failure; /* mono_now () */
    int exit_code;
    enum outcome outcome;
    char why[512];                      /* the failure, one line */
    char excluded[256];                 /* hosts excluded after it */
    char spares[256];                   /* spares promoted for the next attempt */
    int reshards, reshards_down, grows; /* grows: reshard_up, no failure */
    double reshard_ms, grow_ms;
    int resumed;
    char reshard_lines[1024];
};

struct job {
    struct options o;
    struct mpi_info mi;
    struct hostlist *hl; /* empty: local launch */
    int local;
    int ncpu;
    int slurm;
    char exec[PATH_MAX];
    char run_dir[PATH_MAX];
    int lock_fd;
    int prev_attempts;
    char prev_state[32];
    int resume_first;
    const char *user_event_log;
    int user_grow_slots; /* ELASTIC_GROW_SLOTS was given: the ranks get it as is */
    char sm_dir[64];     /* the attempt's Open MPI shared-memory directory, or "" */
    struct attempt att[MAX_ATTEMPTS_SHOWN];
    int natt;
    double t0;
};

/* How the job ended: its final state (completed, suspended, interrupted,
 * failed), elastic-mpirun's exit status, and why ("" when completed). */
struct job_end {
    const char *state;
    int status;
    char why[1024];
};

#endif /* ELASTIC_MPIRUN_JOB_H */
