/* spawn_app.c - a plain MPI program that loses a rank and grows back with
 * MPI_Comm_spawn (t5019)
 *
 *   spawn_app [--victim R] [--spawn K] [--expect-capacity C]    the parents
 *   spawn_app --child                                           a spawned one
 *
 * The parents pass a barrier ("ready RANK PID"); the victim SIGKILLs itself;
 * the survivors catch MPIX_ERR_PROC_FAILED in a barrier, revoke and shrink,
 * wait (60 s at most) until the capacity in their heartbeat file
 * (ELASTIC_HEARTBEAT_FILE, heartbeat.h version 3) is C (default 1), and
 * spawn K (default 1) copies of themselves with --child over the shrunk
 * communicator.  On success parents and children merge, check an
 * allreduce of their RANK variables (each prints "merged ...") and the
 * parents wait until the capacity is 0.  On an error every parent prints
 * "spawn failed class=..." and waits until the capacity is C again.  With
 * SPAWN_APP_CHILD_DIE set, a child SIGKILLs itself before MPI_Init; with
 * SPAWN_APP_CHILD_STALL set, it waits for ever before it.
 */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/heartbeat.h"

static double now (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_rank (void)
{
    const char *r = getenv ("RANK");
    return r ? atoi (r) : -1;
}

/* Wait until the heartbeat file's capacity is want (60 s at most); returns
 * the last value read, -1 without a file. */
static int wait_capacity (int want)
{
    const char *path = getenv ("ELASTIC_HEARTBEAT_FILE");
    const struct elastic_heartbeat *hb;
    double until = now () + 60;
    int fd, v;

    if (!path || (fd = open (path, O_RDONLY)) < 0)
        return -1;
    hb = mmap (NULL, sizeof (*hb), PROT_READ, MAP_SHARED, fd, 0);
    close (fd);
    if (hb == MAP_FAILED)
        return -1;
    do {
        v = (int)__atomic_load_n (&hb->capacity, __ATOMIC_ACQUIRE);
        if (v == want)
            break;
        usleep (2000);
    } while (now () < until);
    munmap ((void *)hb, sizeof (*hb));
    return v;
}

static void merged_check (MPI_Comm inter, int high, const char *who)
{
    MPI_Comm merged;
    int size, rank, mine = env_rank (), sum = -1, rc;

    rc = MPI_Intercomm_merge (inter, high, &merged);
    if (rc != MPI_SUCCESS) {
        printf ("%s merge failed rc=%d\n", who, rc);
        fflush (stdout);
        return;
    }
    MPI_Comm_set_errhandler (merged, MPI_ERRORS_RETURN);
    MPI_Comm_size (merged, &size);
    MPI_Comm_rank (merged, &rank);
    rc = MPI_Allreduce (&mine, &sum, 1, MPI_INT, MPI_SUM, merged);
    printf ("merged %s RANK %d pid %d size %d rank %d sum %d rc %d\n",
            who,
            mine,
            (int)getpid (),
            size,
            rank,
            sum,
            rc);
    fflush (stdout);
    MPI_Comm_free (&merged);
}

static int child (void)
{
    MPI_Comm parent;

    if (getenv ("SPAWN_APP_CHILD_DIE"))
        raise (SIGKILL);
    if (getenv ("SPAWN_APP_CHILD_STALL")) /* never reaches MPI_Init */
        for (;;)
            pause ();
    MPI_Init (NULL, NULL);
    MPI_Comm_get_parent (&parent);
    if (parent == MPI_COMM_NULL) {
        printf ("child without a parent\n");
        MPI_Finalize ();
        return 1;
    }
    MPI_Comm_set_errhandler (parent, MPI_ERRORS_RETURN);
    merged_check (parent, 1, "child");
    MPI_Comm_disconnect (&parent);
    MPI_Finalize ();
    return 0;
}

int main (int argc, char **argv)
{
    int victim = 3, k = 1, want = 1, rank, size, rc, cls, cap, ssize;
    char *sargv[] = {"--child", NULL};
    MPI_Comm shrunk, inter;
    int errcodes[64];

    for (int i = 1; i < argc; i++) {
        if (!strcmp (argv[i], "--child"))
            return child ();
        if (!strcmp (argv[i], "--victim") && i + 1 < argc)
            victim = atoi (argv[++i]);
        else if (!strcmp (argv[i], "--spawn") && i + 1 < argc)
            k = atoi (argv[++i]);
        else if (!strcmp (argv[i], "--expect-capacity") && i + 1 < argc)
            want = atoi (argv[++i]);
    }
    if (k < 1 || k > 64)
        k = 1;
    MPI_Init (&argc, &argv);
    MPI_Comm_set_errhandler (MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    MPI_Barrier (MPI_COMM_WORLD);
    printf ("ready %d %d\n", rank, (int)getpid ());
    fflush (stdout);
    if (rank == victim)
        raise (SIGKILL);
    /* until the failure shows (bounded: the agent kills a hung job) */
    do
        rc = MPI_Barrier (MPI_COMM_WORLD);
    while (rc == MPI_SUCCESS);
    MPI_Error_class (rc, &cls);
    MPIX_Comm_revoke (MPI_COMM_WORLD);
    if (MPIX_Comm_shrink (MPI_COMM_WORLD, &shrunk) != MPI_SUCCESS) {
        printf ("shrink failed\n");
        return 1;
    }
    MPI_Comm_set_errhandler (shrunk, MPI_ERRORS_RETURN);
    MPI_Comm_size (shrunk, &ssize);
    cap = wait_capacity (want);
    printf ("rank %d: failure class %d, shrunk %d -> %d, capacity %d\n",
            rank,
            cls,
            size,
            ssize,
            cap);
    fflush (stdout);
    /* nobody spawns (the capacity drops to 0) before all have read it */
    MPI_Barrier (shrunk);
    for (int i = 0; i < k; i++)
        errcodes[i] = MPI_SUCCESS;
    rc = MPI_Comm_spawn (argv[0], sargv, k, MPI_INFO_NULL, 0, shrunk, &inter, errcodes);
    if (rc != MPI_SUCCESS) {
        MPI_Error_class (rc, &cls);
        printf ("rank %d: spawn failed class=%d\n", rank, cls);
        fflush (stdout);
        cap = wait_capacity (want);
        printf ("rank %d: capacity after the failed spawn %d\n", rank, cap);
        fflush (stdout);
        MPI_Barrier (shrunk);
    } else {
        MPI_Comm_set_errhandler (inter, MPI_ERRORS_RETURN);
        merged_check (inter, 0, "parent");
        cap = wait_capacity (0);
        printf ("rank %d: capacity after the spawn %d\n", rank, cap);
        fflush (stdout);
        MPI_Comm_disconnect (&inter);
    }
    MPI_Comm_free (&shrunk);
    MPI_Finalize ();
    return 0;
}
