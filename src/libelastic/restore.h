/* restore.h - move a committed snapshot into a new layout (internal)
 *
 * After a world change every new working rank receives its new block of
 * every array, assembled from the old ranks' L1 buffers, or from their
 * buddies' L2 copies where the old rank is dead, plus the replicated values.
 */
#ifndef ELASTIC_RESTORE_H
#define ELASTIC_RESTORE_H

#include <stdint.h>
#include <mpi.h>
#include <elastic.h>

struct elastic_manager;

/* A new membership and layout. */
struct plan {
    int n;            /* new working size */
    int *slot;        /* [n] original ranks */
    uint64_t *counts; /* [n * na] array elements per new working rank */
    int nspare;
    int *spare; /* idle spares afterwards */
    int nused;
    int *used; /* spares that start working */
};

struct plan *plan_create (int norig, int na);
void plan_destroy (struct plan *p);

/* The original rank that can send old rank j's snapshot under plan p (its
 * holder if it is in p, else its buddy if that is), or -1. */
int plan_source (const struct elastic_manager *m, const struct plan *p, int j);

/* Collective over newwork (the working ranks of p, ranked as in p->slot):
 * fill each registered array's rbuf/rcount with this rank's block of the
 * committed snapshot in p's layout, and values (reg->vbytes bytes) with the
 * replicated values.  Returns an MPI error code (MPI_ERR_NO_MEM for memory);
 * after an MPI error newwork is revoked. */
int restore_exchange (struct elastic_manager *m,
                      const struct plan *p,
                      MPI_Comm newwork,
                      int myrank,
                      void *values);

#endif /* ELASTIC_RESTORE_H */
