/* ulfm_smoke.c - survivors of a killed rank see the failure and shrink
 *
 * Usage: ulfm_smoke VICTIM
 * Every rank prints "ready <rank> <pid>".  The victim then waits to be killed
 * from outside (by the test, with a real signal); the others block in
 * MPI_Barrier, must get MPIX_ERR_PROC_FAILED (or MPIX_ERR_REVOKED), revoke,
 * shrink, and check an allreduce over the survivors.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main (int argc, char **argv)
{
    int rank, size, rc, eclass, n = 0;
    long sum = 0, want = 0;
    double t0, t1;
    MPI_Comm shrunk;

    if (argc != 2) {
        fprintf (stderr, "usage: ulfm_smoke VICTIM-RANK\n");
        return 2;
    }
    int victim = atoi (argv[1]);
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler (MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier (MPI_COMM_WORLD);
    printf ("ready %d %d\n", rank, (int)getpid ());
    fflush (stdout);
    if (rank == victim) {
        for (;;)
            pause ();
    }
    t0 = MPI_Wtime ();
    rc = MPI_Barrier (MPI_COMM_WORLD);
    t1 = MPI_Wtime ();
    MPI_Error_class (rc, &eclass);
    if (eclass != MPIX_ERR_PROC_FAILED && eclass != MPIX_ERR_REVOKED) {
        printf (
            "rank %d: expected MPIX_ERR_PROC_FAILED or MPIX_ERR_REVOKED, got class %d\n",
            rank,
            eclass);
        return 1;
    }
    MPIX_Comm_revoke (MPI_COMM_WORLD);
    if (MPIX_Comm_shrink (MPI_COMM_WORLD, &shrunk) != MPI_SUCCESS) {
        printf ("rank %d: MPIX_Comm_shrink failed\n", rank);
        return 1;
    }
    MPI_Comm_size (shrunk, &n);
    long r = rank;
    MPI_Allreduce (&r, &sum, 1, MPI_LONG, MPI_SUM, shrunk);
    for (int i = 0; i < size; i++)
        if (i != victim)
            want += i;
    printf ("rank %d: error after %.1f ms, shrunk %d -> %d, sum %ld (want %ld)\n",
            rank,
            (t1 - t0) * 1e3,
            size,
            n,
            sum,
            want);
    int good = (n == size - 1 && sum == want);
    if (good && rank == 0)
        printf ("ulfm-smoke: ok\n");
    MPI_Comm_free (&shrunk);
    MPI_Finalize ();
    return good ? 0 : 1;
}
