/* cid_reuse.c - Open MPI hands a late message of a freed communicator to
 * the next communicator that gets its context id (the mechanism behind
 * #18 defect 6; see src/libelastic/retire.h)
 *
 * 8 ranks (or more).  C = MPI_Comm_dup (MPI_COMM_WORLD).  Rank 1 frees C
 * at once; then rank SRC sends one message on C to rank 1 and, after it,
 * one on MPI_COMM_WORLD: when rank 1 has received the second, the first
 * has reached it too (in order, one sender to one receiver) and was kept
 * as a message "for a communicator not yet created".  Every other rank
 * frees C, and ranks 0-5 split MPI_COMM_WORLD into D, which gets C's
 * context id (the lowest free one).
 *   SRC 7 (--abort): 7 is outside D (6 ranks): Open MPI aborts rank 1,
 *     "PML OB1 received a message from a rank outside the valid range of
 *     the communicator";
 *   SRC 2 (default): rank 1 finds, in D, a message from D's rank 2 that
 *     rank 2 never sent on D (MPI_Iprobe then MPI_Recv on D), and prints
 *     "stale message in D".
 * Exit 0 when the stale message was found in D (the hazard is there), 3
 * when it was not (this MPI does not reuse ids that way).
 *
 * build: mpicc -o cid_reuse bench/campaign/cid_reuse.c
 * usage: mpirun -n 8 cid_reuse [--abort]
 *        elastic-exec --nproc-per-node 8 ./cid_reuse --abort   (names the abort)
 */
#include <stdio.h>
#include <string.h>
#include <mpi.h>

int main (int argc, char **argv)
{
    MPI_Comm c, d;
    int rank, size, src = 2, found = 0, all = 0;
    char buf[64] = "sent on C, never on D";

    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    if (argc > 1 && !strcmp (argv[1], "--abort"))
        src = 7;
    if (size < 8) {
        if (rank == 0)
            fprintf (stderr, "cid_reuse: needs 8 ranks or more\n");
        MPI_Finalize ();
        return 2;
    }
    MPI_Comm_dup (MPI_COMM_WORLD, &c);
    if (rank == 1)
        MPI_Comm_free (&c);
    MPI_Barrier (MPI_COMM_WORLD);
    if (rank == src) {
        MPI_Send (buf, sizeof (buf), MPI_CHAR, 1, 0, c);
        MPI_Send (buf, sizeof (buf), MPI_CHAR, 1, 1, MPI_COMM_WORLD);
    }
    if (rank == 1)
        MPI_Recv (buf, sizeof (buf), MPI_CHAR, src, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank != 1)
        MPI_Comm_free (&c);
    MPI_Barrier (MPI_COMM_WORLD);
    MPI_Comm_split (MPI_COMM_WORLD, rank < 6 ? 0 : MPI_UNDEFINED, rank, &d);
    if (rank == 1) {
        MPI_Status st;
        int flag = 0;
        MPI_Iprobe (MPI_ANY_SOURCE, MPI_ANY_TAG, d, &flag, &st);
        if (flag) {
            MPI_Recv (buf, sizeof (buf), MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, d, &st);
            printf ("cid_reuse: stale message in D from D's rank %d, tag %d: \"%s\"\n",
                    st.MPI_SOURCE,
                    st.MPI_TAG,
                    buf);
            found = 1;
        } else
            printf ("cid_reuse: no stale message in D\n");
        fflush (stdout);
    }
    MPI_Allreduce (&found, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (d != MPI_COMM_NULL)
        MPI_Comm_free (&d);
    MPI_Finalize ();
    return all ? 0 : 3;
}
