/* recwatch.h - a recovery that does not end in time ends the process (internal)
 *
 * An in-place recovery is a few collective calls of ULFM (agree, shrink)
 * and of the library (drain, state exchange, protecting snapshot) between
 * the survivors.  Open MPI 5.0.7 can block in some of them for ever after
 * a failure (doc/reliability.md: the agreement ERA after one SIGKILL, in
 * about 1 run of 1750 of t5004's soak; MPIX_Comm_shrink in
 * ompi_comm_nextcid when a second rank dies at once).  No MPI call can be
 * interrupted from inside, so a thread of the library watches the clock:
 * a world event that has not ended ELASTIC_RECOVERY_TIMEOUT seconds
 * (default 600; 0: no limit) after it started, not counting the time in the
 * application's handler, makes the process log which phase it was in,
 * append a "recovery_timeout" event and _exit(ELASTIC_EXIT_RELAUNCH): its
 * launcher relaunches the job from its newest L3 snapshot (elastic-exec
 * with --max-restarts, elastic-mpirun, a batch script requeueing on 76)
 * instead of holding the allocation until its time limit.
 *
 * The thread starts with the first event, so a job without failures never
 * has it.
 */
#ifndef ELASTIC_RECWATCH_H
#define ELASTIC_RECWATCH_H

#include <stdint.h>

#include <elastic.h>

struct elastic_manager;
struct recwatch;

/* Read ELASTIC_RECOVERY_TIMEOUT (unset: 600 s).  ELASTIC_ERR_INVAL naming
 * the value when it is not a number of seconds >= 0. */
int recwatch_create (struct elastic_manager *m,
                     struct recwatch **out,
                     elastic_error_t *err);

/* Stop the thread (if it was started) and free.  NULL-safe. */
void recwatch_destroy (struct recwatch *w);

/* Start the clock (from now) for a recovery in phase `phase` (a string
 * literal: "agreement", "shrink", ...).  Starts the thread the first time.
 * A no-op when w is NULL or the limit is 0. */
void recwatch_arm (struct recwatch *w, const char *phase, int64_t step);

/* Name the phase the recovery is in now (the clock keeps running). */
void recwatch_phase (struct recwatch *w, const char *phase);

/* Stop the clock: the event ended, or the application's handler runs. */
void recwatch_disarm (struct recwatch *w);

/* The limit in seconds (0: none). */
double recwatch_limit (const struct recwatch *w);

#endif /* ELASTIC_RECWATCH_H */
