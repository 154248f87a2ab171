/* ft.h - the ULFM operations libelastic uses, or stand-ins without ULFM (internal)
 *
 * Without ULFM (HAVE_ULFM unset, or a ULFM build whose job was started
 * without fault tolerance) revoke does nothing, agree is an
 * MPI_Allreduce(MPI_BAND), shrink fails, and no error is a failure: the
 * library then runs in relaunch-only mode.
 */
#ifndef ELASTIC_FT_H
#define ELASTIC_FT_H

#include <mpi.h>

/* 1 if this build has ULFM and the job runs with it switched on (Open MPI:
 * started with --with-ft ulfm / mpi_ft_enable=1); 0 otherwise. */
int ft_available (void);

/* Why ft_available() is 0, as the start of a log line. */
const char *ft_why_unavailable (void);

/* 1 if mpi_err's class is MPIX_ERR_PROC_FAILED, _PROC_FAILED_PENDING or _REVOKED. */
int ft_is_failure (int mpi_err);

/* MPIX_ERR_REVOKED (MPI_ERR_OTHER without ULFM). */
int ft_revoked_code (void);

/* 1 if mpi_err's class is MPIX_ERR_REVOKED. */
int ft_is_revoked (int mpi_err);

/* 1 if mpi_err's class is MPIX_ERR_PROC_FAILED or _PROC_FAILED_PENDING. */
int ft_is_proc_failed (int mpi_err);

/* Revoke comm (MPI_COMM_NULL: nothing). */
void ft_revoke (MPI_Comm comm);

/* Acknowledge every failure known in comm so that agree and any-source
 * receives stop reporting it. */
void ft_ack (MPI_Comm comm);

/* MPIX_Comm_agree: bitwise AND of *flag over the live processes, the same
 * result and the same return code on all of them. */
int ft_agree (MPI_Comm comm, int *flag);

/* ft_agree after acknowledging failures, repeated while new failures make it
 * return MPIX_ERR_PROC_FAILED; returns MPI_SUCCESS or another MPI error. */
int ft_agree_robust (MPI_Comm comm, int *flag);

/* MPIX_Comm_shrink, retried if a failure interrupts it; sets
 * MPI_ERRORS_RETURN on the result. */
int ft_shrink (MPI_Comm comm, MPI_Comm *out);

/* Wait for n requests; after the first error revoke comm so that no peer
 * waits forever, then complete the rest.  Returns the first error. */
int ft_waitall (int n, MPI_Request *reqs, MPI_Comm comm);

/* Collective over comm: every process sends an empty message (tag) to
 * every other one and receives one from each.  Open MPI's transports
 * deliver one process's messages to another in order, so when it returns
 * MPI_SUCCESS here every message any process of comm sent to this one
 * before its call, on any communicator, has been received by this
 * process's MPI library (see retire.h).  On an error comm is revoked (no
 * peer waits forever) and the error returned. */
int ft_drain (MPI_Comm comm, int tag);

/* Free *comm unless it is MPI_COMM_NULL (revoked ones too). */
void ft_free (MPI_Comm *comm);

/* Tell Open MPI to skip the PMIx fence at the start of MPI_Finalize.  That
 * fence spans every process the job started, dead ones included, and with
 * Open MPI 5.0.7 it sometimes never completes after a failure (the ranks
 * wait in MPI_Finalize, mpirun never exits).  The manager's final agreement
 * and ULFM's own shrink and barrier inside MPI_Finalize already synchronize
 * the survivors.  A no-op with other MPIs or without ULFM. */
void ft_skip_finalize_fence (void);

/* A one-line description of an MPI error code. */
const char *ft_strerror (int mpi_err, char *buf, int size);

#endif /* ELASTIC_FT_H */
