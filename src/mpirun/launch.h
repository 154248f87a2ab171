/* launch.h - run one mpirun attempt: stderr through a parser, signals
 *
 * mpirun's stdout is the caller's; its stderr passes through a pipe so the
 * exit report can be parsed (report.h) and is copied to the caller's stderr
 * unchanged.  mpirun runs in its own session, so that only elastic-mpirun
 * signals it: a signal sent to elastic-mpirun's process group (timeout(1),
 * kill 0) or by the terminal (Ctrl-C) reaches elastic-mpirun alone.
 * Preemption signals (SIGTERM, SIGUSR1) are relayed to mpirun as SIGUSR1,
 * which Open MPI forwards to every rank (a SIGTERM would make mpirun kill
 * the job); a second one stops mpirun.  SIGINT/SIGHUP stop the job (SIGTERM
 * to mpirun), a second one kills mpirun; SIGTSTP/SIGCONT are relayed (job
 * control).  mpirun gets SIGTERM when elastic-mpirun dies, even by SIGKILL
 * (PR_SET_PDEATHSIG), and stops the ranks then; processes of the job that
 * outlive mpirun are reparented to elastic-mpirun (a child subreaper),
 * which stops and reaps them.  A watch that the caller gives (the MPI_Init
 * deadline, initwatch.h) is asked about every 200 ms whether to stop the
 * attempt; when it says so mpirun gets SIGTERM, and SIGKILL 15 s later if
 * it is still there.  After a preemption, an mpirun that stays
 * once every rank exited is stopped after a grace, and a session directory
 * that an mpirun leaves behind ($TMPDIR/prterun.<host>.<pid>.<uid>) is
 * removed.
 */
#ifndef ELASTIC_MPIRUN_LAUNCH_H
#define ELASTIC_MPIRUN_LAUNCH_H

#include "common/error.h"
#include "report.h"

struct launch_result {
    int exit_code;     /* mpirun's exit code, or 128 + the signal that killed it */
    int mpirun_signal; /* that signal, or 0 */
    double t_start;    /* monotonic seconds (mono_now) */
    double t_end;
    double t_failure;   /* when the first failure report was seen (0: none) */
    int preempt_signal; /* a preemption signal arrived (0: none) */
    int interrupt_signal;
    int forced;          /* mpirun had to be stopped after the suspend timeout */
    int lingered;        /* preempted, mpirun stayed after its last rank exited and
                            had to be stopped */
    int orphans;         /* processes of the job that outlived mpirun (stopped) */
    int watch_stopped;   /* the watch stopped the attempt */
    char watch_why[512]; /* its reason */
    struct report rep;
};

/* Install the signal handlers and become the reaper of the job's orphans
 * (once).  Returns 0 or -1 with errno. */
int launch_init (void);

/* A preemption (SIGTERM/SIGUSR1) or interrupt (SIGINT/SIGHUP) signal that
 * arrived while no mpirun ran, waiting at most `wait` seconds for one.
 * Returns the signal, or 0. */
int launch_wait_signal (double wait);

/* Asked while mpirun runs, with mpirun's report so far and mono_now ():
 * returns 1 with a one-line reason in why to stop the attempt, else 0. */
typedef int (*launch_watch_f) (
    void *arg, const struct report *rep, double now, char *why, size_t size);

/* How to run one attempt. */
struct launch_params {
    double suspend_timeout; /* after a preemption signal */
    launch_watch_f watch;   /* NULL: none */
    void *watch_arg;
    /* asked once mpirun has stayed childless: 1 if the ranks said the job
     * completed (NULL: never) */
    int (*completed) (void *arg);
    void *completed_arg;
};

/* Run argv (mpirun ...) to its end.  Returns 0 with res filled, or -1
 * with err if it could not be started. */
int launch_run (char *const argv[],
                const struct launch_params *lp,
                struct launch_result *res,
                elastic_error_t *err);

#endif /* ELASTIC_MPIRUN_LAUNCH_H */
