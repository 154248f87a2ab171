/* l3_agree.h - L3's MPI and HDF5 error texts, collective agreement on outcomes
 * (internal)
 *
 * HDF5 and MPI-IO calls can fail on some ranks only (a full disk seen by
 * one writer); the next collective call would then be mismatched.  After
 * every collective step the L3 code calls l3_agree, so that every rank
 * returns the same code and the text of the lowest failing rank.
 */
#ifndef ELASTIC_L3_AGREE_H
#define ELASTIC_L3_AGREE_H

#include <stddef.h>
#include <mpi.h>
#include <elastic.h>

#include "common/error.h"

/* Set err to "WHAT 'NAME': <innermost HDF5 error>" and return
 * ELASTIC_ERR_IO. */
int l3_h5fail (elastic_error_t *err, const char *what, const char *name);

/* Set err to "CALL failed: <MPI error string> (MPI error class N)" and
 * return ELASTIC_ERR_MPI, or ELASTIC_ERR_PROC_FAILED for a process failure
 * (ULFM). */
int l3_mpi_error (int mpirc, const char *call, elastic_error_t *err);

/* Collective: every rank passes its local rc (err holding its text); all
 * return the rc and text of the lowest failing rank, ELASTIC_OK if none
 * failed, or ELASTIC_ERR_MPI if the agreement itself failed. */
int l3_agree (MPI_Comm comm, int rc, elastic_error_t *err);

/* An l3_fault_f that keeps the first fault's text in err. */
struct l3_first_fault {
    elastic_error_t *err;
    int n;
};
void l3_first_fault_cb (const char *what, void *arg);

#endif /* ELASTIC_L3_AGREE_H */
