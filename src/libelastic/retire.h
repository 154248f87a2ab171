/* retire.h - communicators whose messages may still arrive (internal)
 *
 * Open MPI (5.0.7, ob1) gives a new communicator the lowest context id
 * that none of its processes uses, so a freed communicator's id comes back
 * at the next MPI_Comm_split, MPIX_Comm_shrink or HDF5 file open.  A
 * message that arrives for an id no communicator holds is kept ("for a
 * communicator not yet created") and handed to the next communicator that
 * gets the id: from a sender rank outside it, Open MPI aborts the process
 * ("PML OB1 received a message from a rank outside the valid range of the
 * communicator"); from one inside it, the message is matched as if it had
 * been sent on it.  After a failure, messages of the communicators it
 * broke do arrive late: sends to ranks that left for the recovery, sends
 * still queued in the sender's transport behind a full shared-memory box,
 * collectives cut short by a revoke.
 *
 * So a communicator that ends in a failure is retired here instead of
 * freed, and freed only once a drain (ft_drain: every live process sends
 * an empty message to every other one on the new world, after it stopped
 * using the retired ones) has completed on this process and every process
 * agreed that it completed.  Open MPI's transports deliver the messages
 * from one process to another in order, so the drain message from a
 * process comes after everything it sent before; what arrived by then
 * found its communicator still there (revoked: dropped; otherwise queued
 * on it and freed with it).  The store holds what a recovery retired
 * until the recovery commits: at most two communicators per interrupted
 * attempt, and the attempts of one recovery are bounded by the processes
 * that can fail and max_reshard_retry_count.
 */
#ifndef ELASTIC_RETIRE_H
#define ELASTIC_RETIRE_H

#include <mpi.h>

struct retired;

/* An empty store; NULL if memory runs out. */
struct retired *retired_create (void);

/* Free every communicator in r (the end of the job), then r.  NULL-safe. */
void retired_destroy (struct retired *r);

/* Retire *comm (MPI_COMM_NULL: nothing) and set it to MPI_COMM_NULL.  If
 * memory runs out the communicator is freed at once, as before. */
void retired_add (struct retired *r, MPI_Comm *comm);

/* A drain starts now: the communicators retired so far are the ones it
 * covers.  Returns how many. */
int retired_mark (struct retired *r);

/* The drain that the last retired_mark announced completed everywhere:
 * free the communicators it covers. */
void retired_release (struct retired *r);

/* How many communicators r holds. */
int retired_count (const struct retired *r);

#endif /* ELASTIC_RETIRE_H */
