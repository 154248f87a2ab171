/* halo.h - the halo exchange shared by the examples (heat2d, heat2d_cuda)
 *
 * One halo row: MPI_Sendrecv, or at an end of the chain (a neighbour is
 * MPI_PROC_NULL) a plain MPI_Send or MPI_Recv, which is the same exchange.
 * Open MPI 5.0.7's MPI_Sendrecv with source MPI_PROC_NULL cancels a
 * receive request it never posted when its send fails with an error other
 * than MPI_ERR_PROC_FAILED (MPI_ERR_REVOKED, after another rank died): a
 * crash in the last rank, seen under the sanitizers.  Returns an MPI error
 * code.
 */
#ifndef EXAMPLES_HALO_H
#define EXAMPLES_HALO_H

#include <mpi.h>

static inline int halo_sendrecv (double *sbuf,
                                 int dest,
                                 int stag,
                                 double *rbuf,
                                 int source,
                                 int rtag,
                                 int n,
                                 MPI_Comm comm)
{
    if (source == MPI_PROC_NULL && dest == MPI_PROC_NULL)
        return MPI_SUCCESS;
    if (source == MPI_PROC_NULL)
        return MPI_Send (sbuf, n, MPI_DOUBLE, dest, stag, comm);
    if (dest == MPI_PROC_NULL)
        return MPI_Recv (rbuf, n, MPI_DOUBLE, source, rtag, comm, MPI_STATUS_IGNORE);
    return MPI_Sendrecv (sbuf,
                         n,
                         MPI_DOUBLE,
                         dest,
                         stag,
                         rbuf,
                         n,
                         MPI_DOUBLE,
                         source,
                         rtag,
                         comm,
                         MPI_STATUS_IGNORE);
}

#endif
