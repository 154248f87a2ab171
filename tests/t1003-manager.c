/* t1003-manager.c - the manager API on one process (an MPI singleton):
 * creation errors, registration, snapshots, the calls that are only valid
 * in a handler, and a non-elastic MPI error handed back unchanged */
#include "config.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#if HAVE_ULFM
#include <mpi-ext.h>
#endif
#include <elastic.h>
#include "lib/tap.h"

/* 1 if ULFM is compiled in and this job runs with it (MPIX_FT attribute) */
static int ulfm_on (void)
{
#if HAVE_ULFM && defined(MPIX_FT)
    int *val = NULL, flag = 0;
    return MPI_Comm_get_attr (MPI_COMM_WORLD, MPIX_FT, &val, &flag) == MPI_SUCCESS &&
           flag && val && *val;
#else
    return HAVE_ULFM + 0;
#endif
}

static int handler_calls;

static int handler (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    handler_calls++;
    return 0;
}

static int events;
static void on_event (const char *json, void *arg)
{
    events++;
}

int main (int argc, char **argv)
{
    elastic_manager_t *m = NULL;
    elastic_config_t cfg;
    elastic_error_t err;
    elastic_info_t info;
    int64_t step = 0;
    double a[10], b[10];
    uint64_t off, cnt, glob;
    int active = -1, rc, mrc;
    void *bufs[1];
    size_t sizes[1];
    int want[1] = {0};

    MPI_Init (&argc, &argv);

    /* creation */
    is_int (elastic_manager_create (MPI_COMM_WORLD, NULL, NULL, &err),
            ELASTIC_ERR_INVAL,
            "mp NULL");
    elastic_config_init (&cfg);
    cfg.snapshot_period = -3;
    is_int (elastic_manager_create (MPI_COMM_WORLD, &cfg, &m, &err),
            ELASTIC_ERR_INVAL,
            "invalid config rejected");
    is_str (err.text,
            "snapshot_period: -3 is invalid (expected an integer >= 1)",
            "named field, value, range");
    ok (m == NULL, "no manager on error");
    elastic_config_init (&cfg);
    cfg.spare_ranks = 1;
    is_int (elastic_manager_create (MPI_COMM_WORLD, &cfg, &m, &err),
            ELASTIC_ERR_INVAL,
            "spares need a worker");
    is_str (err.text,
            "spare_ranks: 1 is invalid (expected an integer from 0 to 0: at least one of "
            "the 1 ranks must work)",
            "spare_ranks checked against the communicator");
    setenv ("ELASTIC_SNAPSHOT_BUFFER_SIZE", "zero", 1);
    is_int (elastic_manager_create (MPI_COMM_WORLD, NULL, &m, &err),
            ELASTIC_ERR_INVAL,
            "invalid variable rejected");
    is_str (err.text,
            "ELASTIC_SNAPSHOT_BUFFER_SIZE: 'zero' is invalid (expected an integer from 2 "
            "to 1024)",
            "the variable is named");
    unsetenv ("ELASTIC_SNAPSHOT_BUFFER_SIZE");
    setenv ("ELASTIC_TEST_KILL", "1:2:nowhere", 1);
    is_int (elastic_manager_create (MPI_COMM_WORLD, NULL, &m, &err),
            ELASTIC_ERR_INVAL,
            "a bad test hook is rejected");
    unsetenv ("ELASTIC_TEST_KILL");

    elastic_config_init (&cfg);
    cfg.snapshot_period = 5;
    is_int (elastic_manager_create (MPI_COMM_WORLD, &cfg, &m, &err),
            ELASTIC_OK,
            "created over MPI_COMM_WORLD");
    elastic_manager_set_event_callback (m, on_event, NULL);
    ok (elastic_manager_comm (m) != MPI_COMM_NULL, "a working communicator");
    is_int (elastic_maybe_snapshot (m, 0, &err),
            ELASTIC_ERR_STATE,
            "maybe_snapshot before start");
    for (int i = 0; i < 10; i++)
        a[i] = i;
    is_int (elastic_register_value (m, "step", &step, sizeof (step), &err),
            ELASTIC_OK,
            "register a value");
    is_int (elastic_register_array (m, "a", a, sizeof (double), 10, &err),
            ELASTIC_OK,
            "register an array");
    is_int (elastic_register_array (m, "a", a, sizeof (double), 10, &err),
            ELASTIC_ERR_EXISTS,
            "twice: EXISTS");
    is_int (
        elastic_register_blob (m, "blob", b, 16, &err), ELASTIC_OK, "register a blob");
    is_int (elastic_array_set_diff (m, "nope", ELASTIC_DIFF_ON, &err),
            ELASTIC_ERR_NOT_FOUND,
            "set_diff: an unknown array");
    is_int (elastic_array_set_diff (m, "a", 7, &err),
            ELASTIC_ERR_INVAL,
            "set_diff: a bad mode");
    is_str (
        err.text,
        "elastic_array_set_diff: mode 7 is invalid (expected ELASTIC_DIFF_AUTO, _ON or "
        "_OFF)",
        "set_diff: the message names the mode and what is accepted");
    is_int (elastic_array_set_diff (m, "a", ELASTIC_DIFF_OFF, &err),
            ELASTIC_OK,
            "set_diff: off");
    is_int (elastic_manager_start (m, handler, NULL, &active, &err), ELASTIC_OK, "start");
    is_int (active, 1, "a working rank is active at once");
    is_int (elastic_manager_start (m, handler, NULL, &active, &err),
            ELASTIC_ERR_STATE,
            "start twice");
    is_int (elastic_register_value (m, "late", &step, sizeof (step), &err),
            ELASTIC_ERR_STATE,
            "no registration after start");

    is_int (elastic_array_block (m, "a", &off, &cnt, &glob), ELASTIC_OK, "array_block");
    ok (off == 0 && cnt == 10 && glob == 10, "the whole array is here");
    is_int (elastic_array_block (m, "nope", &off, &cnt, &glob),
            ELASTIC_ERR_NOT_FOUND,
            "unknown array");
    is_int (elastic_array_restore (m, "a", b, 10, &err),
            ELASTIC_ERR_STATE,
            "array_restore outside a handler");
    is_int (elastic_blob_fetch (m, "blob", 1, want, bufs, sizes, &err),
            ELASTIC_ERR_STATE,
            "blob_fetch outside a handler");

    elastic_manager_info (m, &info);
    is_int (info.snapshot_step, -1, "no snapshot yet");
    for (step = 0; step < 12; step++)
        if ((rc = elastic_maybe_snapshot (m, step, &err)) != ELASTIC_OK)
            break;
    is_int (rc, ELASTIC_OK, "12 steps of maybe_snapshot");
    elastic_manager_info (m, &info);
    is_int (info.snapshot_step, 10, "the newest snapshot is of step 10 (period 5)");
    is_int (info.size, 1, "working size 1");
    is_int (info.events, 0, "no events");
    is_int (elastic_maybe_snapshot (m, -1, &err), ELASTIC_ERR_INVAL, "negative step");

    /* not a failure: handed back, nothing touched */
    mrc = MPI_Send (&step, 1, MPI_INT64_T, 5, 0, elastic_manager_comm (m));
    ok (mrc != MPI_SUCCESS,
        "an MPI_Send to a bad rank fails (MPI_ERRORS_RETURN on the working "
        "communicator)");
    /* ULFM compiled in runs only when the job switched it on (a singleton
     * does not, mpirun --with-ft ulfm does): otherwise relaunch-only */
    if (ulfm_on ()) {
        is_int (elastic_maybe_reshard_down (m, mrc, handler, NULL, &err),
                ELASTIC_ERR_MPI,
                "a non-elastic error is returned");
        ok (strstr (err.text, "not a process failure, returned unchanged") != NULL &&
                strstr (err.text, "MPI_ERR_RANK"),
            "the message quotes MPI's: %s",
            err.text);
    } else {
        is_int (elastic_maybe_reshard_down (m, mrc, handler, NULL, &err),
                ELASTIC_ERR_NO_ULFM,
                "no ULFM at run time: relaunch");
        ok (strstr (err.text,
                    HAVE_ULFM ? "runs without ULFM fault tolerance" : "no ULFM") != NULL,
            "the message says why: %s",
            err.text);
    }
    is_int (elastic_maybe_reshard_down (m, MPI_SUCCESS, handler, NULL, &err),
            ELASTIC_OK,
            "MPI_SUCCESS: nothing to do");
    is_int (elastic_maybe_reshard_up (m, 10, handler, NULL, &rc, &err),
            ELASTIC_OK,
            "maybe_reshard_up: nothing to do");
    is_int (rc, 0, "nothing resharded");
    is_int (handler_calls, 0, "the handler was never called");
    is_int (events, 0, "no events");
    ok (elastic_manager_comm (m) != MPI_COMM_NULL, "the communicator is still usable");
    rc = MPI_Barrier (elastic_manager_comm (m));
    is_int (rc, MPI_SUCCESS, "a barrier on it works");

    errno = ENOTTY;
    elastic_manager_destroy (m);
    elastic_manager_destroy (NULL);
    ok (errno == ENOTTY, "destroy (and destroy NULL) preserve errno");
    MPI_Finalize ();
    return done_testing ();
}
