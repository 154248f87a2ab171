/* mpi_hello.c - the smallest MPI program (B7: launch overhead)
 *
 * MPI_Init, one MPI_Barrier, MPI_Finalize; rank 0 prints the world size.
 * Launch overhead is measured on it because it does nothing else: any cost
 * a launcher or a wrapper adds is the largest share of its run time here.
 */
#include <stdio.h>
#include <mpi.h>

int main (int argc, char **argv)
{
    int rank, size;

    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    MPI_Barrier (MPI_COMM_WORLD);
    if (rank == 0)
        printf ("hello from %d ranks\n", size);
    MPI_Finalize ();
    return 0;
}
