/* l3_agree.c - L3's error texts and collective agreement on outcomes */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "ft.h"
#include "l3_agree.h"
#include "l3_format.h"

int l3_h5fail (elastic_error_t *err, const char *what, const char *name)
{
    char h5[200];

    l3_h5_errtext (h5, sizeof (h5));
    return errcodef (err, ELASTIC_ERR_IO, "%s '%s': %s", what, name, h5);
}

int l3_mpi_error (int mpirc, const char *call, elastic_error_t *err)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, cls = 0;

    MPI_Error_class (mpirc, &cls);
    if (MPI_Error_string (mpirc, s, &len) != MPI_SUCCESS)
        snprintf (s, sizeof (s), "error code %d", mpirc);
    errprintf (err, "%s failed: %s (MPI error class %d)", call, s, cls);
    return ft_is_failure (mpirc) ? ELASTIC_ERR_PROC_FAILED : ELASTIC_ERR_MPI;
}

int l3_agree (MPI_Comm comm, int rc, elastic_error_t *err)
{
    struct {
        int rc;
        char text[sizeof (err->text)];
    } msg;
    int rank, key, low, e;

    MPI_Comm_rank (comm, &rank);
    key = rc != ELASTIC_OK ? rank : INT_MAX;
    if ((e = MPI_Allreduce (&key, &low, 1, MPI_INT, MPI_MIN, comm)) != MPI_SUCCESS)
        return l3_mpi_error (e, "MPI_Allreduce", err);
    if (low == INT_MAX)
        return ELASTIC_OK;
    if (rank == low) {
        msg.rc = rc;
        memcpy (msg.text, err->text, sizeof (msg.text));
    }
    if ((e = MPI_Bcast (&msg, sizeof (msg), MPI_BYTE, low, comm)) != MPI_SUCCESS)
        return l3_mpi_error (e, "MPI_Bcast", err);
    memcpy (err->text, msg.text, sizeof (err->text));
    return msg.rc;
}

void l3_first_fault_cb (const char *what, void *arg)
{
    struct l3_first_fault *f = arg;

    if (f->n++ == 0)
        errprintf (f->err, "%s", what);
}
