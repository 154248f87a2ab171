/* attempt.h - the attempts of a job, and the relaunch policy
 *
 * attempts_run () launches attempt after attempt (one mpirun each, see
 * launch.h) until the policy ends the job.  The policy is two pure
 * functions: policy_after_attempt () decides, from what happened in an
 * attempt, whether the job is done, relaunched, suspended, interrupted or
 * failed, with the reason; policy_between_attempts () decides what a signal
 * during the wait before a relaunch means.
 */
#ifndef ELASTIC_MPIRUN_ATTEMPT_H
#define ELASTIC_MPIRUN_ATTEMPT_H

#include "job.h"

enum next_action {
    NEXT_DONE,           /* the job completed: exit 0 */
    NEXT_RELAUNCH,       /* relaunch from the newest L3 snapshot */
    NEXT_SUSPEND_EXIT,   /* suspended (or preempted between attempts): exit 75 */
    NEXT_INTERRUPT_EXIT, /* stopped by SIGINT/SIGHUP: exit 128 + the signal */
    NEXT_FAIL,           /* failed, not relaunched: exit 1 */
};

/* What happened in one attempt, as the policy needs it. */
struct attempt_facts {
    int exit_code;        /* mpirun's */
    int lost_host;        /* mpirun's report: a host was lost or not launched on */
    int suspended;        /* the ranks suspended, by mpirun's code or their account */
    int before_init;      /* ranks loaded libelastic, none finished MPI_Init */
    int interrupt_signal; /* SIGINT/SIGHUP during the attempt, or 0 */
    int preempt_signal;   /* SIGTERM/SIGUSR1 during the attempt, or 0 */
    int forced;           /* mpirun was stopped after --suspend-timeout */
    int lingered;         /* mpirun was stopped after its ranks had exited */
    int init_stopped;     /* stopped by the MPI_Init deadline (--init-timeout) */
    int library_fatal;    /* libelastic gave up on a rank (a "fatal" event) */
    int ranks_completed;  /* every rank's wrapper said it exited 0, none suspended */
    int job_completed;    /* libelastic said the job completed (its "completed" event) */
    int not_relaunchable; /* the program cannot start, or too few slots */
    int relaunch;         /* this attempt's relaunch would be number relaunch */
    int max_relaunches;   /* --max-relaunches */
    const char *why;      /* the failure, one line */
};

/* What comes next, and why. */
struct decision {
    enum next_action next;
    enum outcome outcome; /* the attempt's, in the summary */
    int exclude_hosts;    /* exclude the attempt's failed hosts first */
    int log_error;        /* log end.why as an error */
    struct job_end end;   /* how the job ends, unless next is NEXT_RELAUNCH */
};

/* The decision after an attempt that ran.  Never fails. */
void policy_after_attempt (const struct attempt_facts *f, struct decision *d);

/* The decision after the wait before a relaunch, in which signal sig (0:
 * none) arrived.  Never fails. */
void policy_between_attempts (int sig, struct decision *d);

/* Run the attempts of j and write the run directory's state file at the
 * end.  Returns 0 with end filled, or 1 after a dry run printed the first
 * attempt's command (nothing ran). */
int attempts_run (struct job *j, struct job_end *end);

#endif /* ELASTIC_MPIRUN_ATTEMPT_H */
