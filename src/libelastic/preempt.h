/* preempt.h - preemption notices and the deadline, agreed in maybe_snapshot
 * (internal)
 *
 * Signal handlers (the `signals` list) only set a flag.  At agreement steps
 * the working ranks combine their flags and their view of the deadline in
 * one MPI_Allreduce (MAX of four doubles), so that all of them suspend at
 * the same step.  Agreement steps are every signal_check_period steps, or,
 * with period 0 (auto), spaced so that the agreement costs about 1% of the
 * step time and a notice waits at most about half a second: the spacing is
 * computed from the slowest rank's last agreement time and mean step time,
 * carried by the same allreduce, so every rank computes the same next step.
 * The same allreduce carries the room a launcher reports for new ranks
 * (the least any rank saw), which elastic_maybe_reshard_up grows into.
 * The deadline counts one and a half times the longest L3 write, one
 * period of mean steps plus the longest step, and a margin.
 */
#ifndef ELASTIC_PREEMPT_H
#define ELASTIC_PREEMPT_H

#include <stdint.h>
#include <mpi.h>
#include <elastic.h>

struct preempt;

/* Install the handlers of cfg->signals (a SIG_IGN disposition is left
 * alone) and resolve the deadline (cfg->deadline, else SLURM_JOB_END_TIME).
 * Returns ELASTIC_ERR_INVAL (bad signal list) or _NOMEM. */
int preempt_create (const elastic_config_t *cfg,
                    struct preempt **out,
                    elastic_error_t *err);

/* Restore the previous handlers and free p (NULL-safe). */
void preempt_destroy (struct preempt *p);

/* Record the top of a step (entry of maybe_snapshot); generation is the
 * manager's, so that the time of a world change is not counted. */
void preempt_enter (struct preempt *p, uint64_t generation);

/* The time since the last entry was not a step (an L3 write). */
void preempt_skip_step (struct preempt *p);

/* The world changed: the next maybe_snapshot call that is not skipped
 * agrees (auto period). */
void preempt_world_changed (struct preempt *p);

/* Record the duration of an L3 write. */
void preempt_l3_time (struct preempt *p, double seconds);

/* Record what this rank's last committed snapshot cost it (seconds spent
 * in the library's calls for it; an overlapped L2 exchange's time in the
 * steps is not counted). */
void preempt_snapshot_time (struct preempt *p, double seconds);

/* At the last agreement, agreed (the same on every rank that took part):
 * the slowest rank's mean step and the most any rank's last snapshot
 * cost, in seconds (0: not measured). */
double preempt_step_mean (const struct preempt *p);
double preempt_snapshot_cost (const struct preempt *p);

/* True if step is an agreement step and there is anything to agree on
 * (handlers installed or a deadline).  The same on every working rank. */
int preempt_due (const struct preempt *p, int64_t step);

/* A launcher reports room for new ranks (on = 1): agreements are due even
 * without handlers or a deadline, to carry that room. */
void preempt_offer (struct preempt *p, int on);
int preempt_offered (const struct preempt *p);

/* Collective over comm: combine the notices.  *why is set to a static
 * reason ("SIGTERM", "deadline") or NULL.  *capacity is this rank's view of
 * the room to grow (>= 0) and becomes the least of every rank's view.
 * Returns an MPI error code (a process failure: recover). */
int preempt_agree (
    struct preempt *p, MPI_Comm comm, int64_t step, int *capacity, const char **why);

/* The suspend was done: forget the notice. */
void preempt_clear (struct preempt *p);

/* The period in use: the fixed one, or the current auto one (0: none yet). */
int64_t preempt_period (const struct preempt *p);

/* The deadline in use (epoch seconds, 0: none). */
int64_t preempt_deadline (const struct preempt *p);

#endif /* ELASTIC_PREEMPT_H */
