/* grow.h - growing into new processes (internal; see grow.c)
 *
 * elastic_maybe_reshard_up grows into new processes when the launcher
 * reports room (the heartbeat's capacity, agreed with the preemption
 * notices) and no idle spare is left: grow_spawn starts them, merges them
 * and makes them the idle spares of the world; the growth event then takes
 * them in as it takes spares in.  A process started so finds out in
 * elastic_manager_create (grow_is_child) and joins there (grow_join).
 */
#ifndef ELASTIC_GROW_H
#define ELASTIC_GROW_H

#include <stdint.h>
#include <mpi.h>
#include <elastic.h>

struct elastic_manager;

/* 1 if this process was started by a growth (it has a parent and the
 * library's mark in its environment). */
int grow_is_child (void);

/* The working size a growth may reach (grow_policy, max_world_size). */
int grow_limit (const struct elastic_manager *m);

/* How many new processes to start with room for room of them: 0 when the
 * limit is reached, idle spares are left, or fewer than grow_min_batch
 * (or what is left to the limit) fit. */
int grow_count (const struct elastic_manager *m, int room);

/* The room for new processes the launcher reports now (>= 0): the
 * heartbeat's capacity (elastic-exec's free slots), or, where the launcher
 * gives the job a number of slots instead (ELASTIC_GROW_SLOTS, set by
 * elastic-mpirun from its host list), those slots less the processes of
 * the world - whichever is larger.  No system call. */
int grow_room (const struct elastic_manager *m);

/* 1 if a launcher reports room to this process at all (a supervisor's
 * heartbeat file or ELASTIC_GROW_SLOTS): every rank must, or the job does
 * not agree on room. */
int grow_reported (void);

/* 1 if a growth into room may be tried at step (room agreed, no back-off). */
int grow_due (const struct elastic_manager *m, int64_t step);

/* 1 if a growth into new processes at step starts from the committed
 * snapshot instead of taking one of step: it is at most as many steps old
 * as take less time to redo than a snapshot takes, by two values agreed
 * at the agreement that brought the room (the slowest rank's mean step,
 * the costliest rank's last snapshot; never with grow_eager_snapshots or
 * while either is unmeasured).  The ranks roll back to it, as after a
 * failure, and redo the steps.  Sets m->grow_rewound and m->grow_t_rewind.
 * The same on every working rank. */
int grow_rewind (struct elastic_manager *m, int64_t step);

/* Collective over the world (every rank works): start k processes, merge
 * them, agree.  ELASTIC_OK: grown (m->nspare is k, the caller runs the
 * growth event) or given up with a grow_failed event (m->nspare is 0);
 * ELASTIC_ERR_PROC_FAILED: a working rank failed (work is revoked: the
 * caller recovers). */
int grow_spawn (struct elastic_manager *m, int k, int64_t step, elastic_error_t *err);

/* In a new process's elastic_manager_create (comm: the new processes'
 * communicator): wait for the working ranks' word, merge with them,
 * receive the numbering, agree.  A growth that was rolled back ends the
 * process here (exit 0, its end told to the supervisor). */
int grow_join (struct elastic_manager *m, MPI_Comm comm, elastic_error_t *err);

/* In a new process's elastic_manager_start: its registrations must be the
 * job's.  If not, the process cannot be taken in: it says so and exits 1
 * (revoking the world first, so that nobody waits for it). */
void grow_join_check (struct elastic_manager *m);

/* A growth at step failed: the next one waits 1, 2, 4 ... (at most 64)
 * check periods.  The same on every rank. */
void grow_backoff (struct elastic_manager *m, int64_t step);

/* Free the growth state of m. */
void grow_release (struct elastic_manager *m);

#endif /* ELASTIC_GROW_H */
