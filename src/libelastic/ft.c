/* ft.c - the ULFM operations libelastic uses, or stand-ins without ULFM */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#if HAVE_ULFM
#include <mpi-ext.h>
#endif

#include "ft.h"

/* ULFM compiled in is not ULFM switched on: Open MPI 5 runs its fault
 * tolerance only when the job was started with it (`mpirun --with-ft ulfm`,
 * mpi_ft_enable=1); otherwise MPIX_Comm_agree and friends are not fault
 * tolerant, and an agreement in a job whose peers already left hangs.  The
 * MPIX_FT attribute of MPI_COMM_WORLD says which (queried once, after
 * MPI_Init; -1 until then). */
#if HAVE_ULFM
static int ft_runtime = -1;

static int ft_runtime_enabled (void)
{
    int initialized = 0, finalized = 0, flag = 0;
    int *val = NULL;

    if (ft_runtime >= 0)
        return ft_runtime;
    if (MPI_Initialized (&initialized) != MPI_SUCCESS || !initialized ||
        MPI_Finalized (&finalized) != MPI_SUCCESS || finalized)
        return 1; /* cannot ask yet: what the build has */
#ifdef MPIX_FT
    if (MPI_Comm_get_attr (MPI_COMM_WORLD, MPIX_FT, &val, &flag) == MPI_SUCCESS && flag &&
        val)
        ft_runtime = *val != 0;
    else
        ft_runtime = 1;
#else
    (void)val;
    (void)flag;
    ft_runtime = 1;
#endif
    return ft_runtime;
}
#endif

int ft_available (void)
{
#if HAVE_ULFM
    return ft_runtime_enabled ();
#else
    return 0;
#endif
}

const char *ft_why_unavailable (void)
{
#if HAVE_ULFM
    if (!ft_available ())
        return "this job runs without ULFM fault tolerance (start it with `mpirun "
               "--with-ft ulfm` or elastic-mpirun)";
    return "ULFM is on";
#else
    return "this MPI has no ULFM";
#endif
}

int ft_is_failure (int mpi_err)
{
#if HAVE_ULFM
    int eclass;

    if (mpi_err == MPI_SUCCESS || !ft_available ())
        return 0;
    if (MPI_Error_class (mpi_err, &eclass) != MPI_SUCCESS)
        return 0;
    return eclass == MPIX_ERR_PROC_FAILED || eclass == MPIX_ERR_PROC_FAILED_PENDING ||
           eclass == MPIX_ERR_REVOKED;
#else
    (void)mpi_err;
    return 0;
#endif
}

int ft_revoked_code (void)
{
#if HAVE_ULFM
    return MPIX_ERR_REVOKED;
#else
    return MPI_ERR_OTHER;
#endif
}

static int error_class (int mpi_err)
{
    int eclass = -1;
    if (mpi_err == MPI_SUCCESS || MPI_Error_class (mpi_err, &eclass) != MPI_SUCCESS)
        return -1;
    return eclass;
}

int ft_is_revoked (int mpi_err)
{
#if HAVE_ULFM
    return error_class (mpi_err) == MPIX_ERR_REVOKED;
#else
    (void)error_class;
    (void)mpi_err;
    return 0;
#endif
}

int ft_is_proc_failed (int mpi_err)
{
#if HAVE_ULFM
    int c = error_class (mpi_err);
    return c == MPIX_ERR_PROC_FAILED || c == MPIX_ERR_PROC_FAILED_PENDING;
#else
    (void)mpi_err;
    return 0;
#endif
}

void ft_revoke (MPI_Comm comm)
{
#if HAVE_ULFM
    if (comm != MPI_COMM_NULL && ft_available ())
        MPIX_Comm_revoke (comm);
#else
    (void)comm;
#endif
}

void ft_ack (MPI_Comm comm)
{
#if HAVE_ULFM
    int size, n;

    if (comm == MPI_COMM_NULL || !ft_available ())
        return;
    MPI_Comm_size (comm, &size);
    MPIX_Comm_ack_failed (comm, size, &n);
#else
    (void)comm;
#endif
}

int ft_agree (MPI_Comm comm, int *flag)
{
    int in = *flag;

#if HAVE_ULFM
    if (ft_available ())
        return MPIX_Comm_agree (comm, flag);
#endif
    return MPI_Allreduce (&in, flag, 1, MPI_INT, MPI_BAND, comm);
}

int ft_agree_robust (MPI_Comm comm, int *flag)
{
#if HAVE_ULFM
    int rc, eclass, f;

    if (!ft_available ())
        return ft_agree (comm, flag);
    for (int tries = 0; tries < 1000; tries++) {
        ft_ack (comm);
        f = *flag;
        rc = MPIX_Comm_agree (comm, &f);
        if (rc == MPI_SUCCESS) {
            *flag = f;
            return MPI_SUCCESS;
        }
        MPI_Error_class (rc, &eclass);
        if (eclass != MPIX_ERR_PROC_FAILED)
            return rc;
    }
    return MPI_ERR_OTHER;
#else
    return ft_agree (comm, flag);
#endif
}

int ft_shrink (MPI_Comm comm, MPI_Comm *out)
{
#if HAVE_ULFM
    int rc = MPI_ERR_OTHER;

    if (!ft_available ())
        return rc;
    for (int tries = 0; tries < 100; tries++) {
        if ((rc = MPIX_Comm_shrink (comm, out)) == MPI_SUCCESS) {
            MPI_Comm_set_errhandler (*out, MPI_ERRORS_RETURN);
            return MPI_SUCCESS;
        }
    }
    return rc;
#else
    (void)comm;
    (void)out;
    return MPI_ERR_OTHER;
#endif
}

int ft_waitall (int n, MPI_Request *reqs, MPI_Comm comm)
{
    int rc, first = MPI_SUCCESS;

    if (n == 0)
        return MPI_SUCCESS;
    rc = MPI_Waitall (n, reqs, MPI_STATUSES_IGNORE);
    if (rc == MPI_SUCCESS)
        return MPI_SUCCESS;
    first = rc;
    ft_revoke (comm);
    /* After the revoke every pending request completes (in error). */
    for (int i = 0; i < n; i++) {
        if (reqs[i] != MPI_REQUEST_NULL) {
            rc = MPI_Wait (&reqs[i], MPI_STATUS_IGNORE);
            if (reqs[i] != MPI_REQUEST_NULL) {
                MPI_Request_free (&reqs[i]);
                reqs[i] = MPI_REQUEST_NULL;
            }
        }
    }
    return first;
}

int ft_drain (MPI_Comm comm, int tag)
{
    MPI_Request *reqs;
    int size, rank, n = 0, rc = MPI_SUCCESS, wrc;

    if ((rc = MPI_Comm_size (comm, &size)) != MPI_SUCCESS ||
        (rc = MPI_Comm_rank (comm, &rank)) != MPI_SUCCESS)
        return rc;
    if (size == 1)
        return MPI_SUCCESS;
    if (!(reqs = malloc (2 * (size_t)(size - 1) * sizeof (*reqs)))) {
        ft_revoke (comm);
        return MPI_ERR_NO_MEM;
    }
    /* peers in rank + 1, rank + 2, ... order: no process is everyone's first */
    for (int i = 1; i < size && rc == MPI_SUCCESS; i++) {
        rc = MPI_Irecv (NULL, 0, MPI_BYTE, (rank + size - i) % size, tag, comm, &reqs[n]);
        if (rc == MPI_SUCCESS)
            n++;
    }
    for (int i = 1; i < size && rc == MPI_SUCCESS; i++) {
        rc = MPI_Isend (NULL, 0, MPI_BYTE, (rank + i) % size, tag, comm, &reqs[n]);
        if (rc == MPI_SUCCESS)
            n++;
    }
    if (rc != MPI_SUCCESS)
        ft_revoke (comm);
    if ((wrc = ft_waitall (n, reqs, comm)) != MPI_SUCCESS && rc == MPI_SUCCESS)
        rc = wrc;
    free (reqs);
    return rc;
}

void ft_free (MPI_Comm *comm)
{
    if (comm && *comm != MPI_COMM_NULL && *comm != MPI_COMM_WORLD &&
        *comm != MPI_COMM_SELF)
        MPI_Comm_free (comm);
    if (comm)
        *comm = MPI_COMM_NULL;
}

void ft_skip_finalize_fence (void)
{
#if HAVE_ULFM && defined(OPEN_MPI) && OPEN_MPI
    /* the variable behind the MCA parameter async_mpi_finalize */
    bool *skip;
    if (!ft_available ())
        return;
    skip = dlsym (RTLD_DEFAULT, "ompi_async_mpi_finalize");
    if (skip)
        *skip = true;
#endif
}

const char *ft_strerror (int mpi_err, char *buf, int size)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, eclass = -1;

    if (MPI_Error_string (mpi_err, s, &len) != MPI_SUCCESS)
        snprintf (s, sizeof (s), "unknown MPI error");
    MPI_Error_class (mpi_err, &eclass);
    snprintf (buf, size, "MPI error %d (class %d): %s", mpi_err, eclass, s);
    return buf;
}
