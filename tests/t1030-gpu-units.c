/* t1030-gpu-units.c - the GPU part of libelastic without a GPU: the NCCL
 * rebuild plan and its exclude list (gpu_plan.c), and the argument checks
 * of every new public call, on an MPI singleton.
 *
 * Built twice: as t1030-gpu-units against the library as configured (CUDA
 * and NCCL found: the libraries are loaded; without a device the calls say
 * so), and as t1031-gpu-off with ELASTIC_GPU_OFF, where the library's
 * loader (gpu_load.c) is compiled into the program as in a build without
 * CUDA and NCCL: every call must then return ELASTIC_ERR_UNSUPPORTED after
 * its argument checks. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include <elastic.h>
#include "libelastic/gpu.h"
#include "lib/tap.h"

#define N(a) ((int)(sizeof (a) / sizeof ((a)[0])))

static void plan_tests (void)
{
    int excl[8], nexcl = -1;
    const int old4[] = {0, 1, 2, 3};

    /* a loss: the survivors shrink, the list is the lost NCCL ranks */
    {
        const int nw[] = {0, 1, 3};
        is_int (nccl_plan_decide (old4, 4, nw, 3, 1, excl, &nexcl),
                NCCL_SHRINK,
                "rank 2 lost: shrink");
        is_int (nexcl, 1, "rank 2 lost: one excluded");
        is_int (excl[0], 2, "rank 2 lost: NCCL rank 2 excluded");
    }
    {
        const int old[] = {5, 7, 9, 11, 13}, nw[] = {5, 11};
        is_int (nccl_plan_decide (old, 5, nw, 2, 1, excl, &nexcl),
                NCCL_SHRINK,
                "three lost of five: shrink");
        ok (nexcl == 3 && excl[0] == 1 && excl[1] == 2 && excl[2] == 4,
            "three lost of five: NCCL ranks 1 2 4, ascending (got %d: %d %d %d)",
            nexcl,
            excl[0],
            excl[1],
            excl[2]);
    }
    /* same members: kept, unless there was a failure (then shrunk by none) */
    is_int (nccl_plan_decide (old4, 4, old4, 4, 0, excl, &nexcl),
            NCCL_KEEP,
            "same members, no failure: keep");
    is_int (nccl_plan_decide (old4, 4, old4, 4, 1, excl, &nexcl),
            NCCL_NEW,
            "same members after a failure: new (NCCL refuses to shrink by none)");
    is_int (nexcl, 0, "same members after a failure: none excluded");
    /* a spare takes a place: new */
    {
        const int nw[] = {0, 1, 4, 3};
        is_int (nccl_plan_decide (old4, 4, nw, 4, 1, excl, &nexcl),
                NCCL_NEW,
                "a spare replaces rank 2: new");
        is_int (nexcl, 0, "new: no exclude list");
    }
    {
        const int nw[] = {0, 1, 3, 4};
        is_int (
            nccl_plan_decide (old4, 3, nw, 4, 0, excl, &nexcl), NCCL_NEW, "a grow: new");
    }
    {
        const int nw[] = {1, 0};
        is_int (nccl_plan_decide (old4, 4, nw, 2, 1, excl, &nexcl),
                NCCL_NEW,
                "a new order: new");
    }
    is_int (nccl_plan_decide (NULL, 0, old4, 4, 0, excl, &nexcl),
            NCCL_NEW,
            "no communicator yet: new");
    {
        int a[] = {2}, b[] = {3};
        ok (nccl_plan_hash (NCCL_SHRINK, a, 1) == nccl_plan_hash (NCCL_SHRINK, a, 1),
            "the plan hash is stable");
        ok (nccl_plan_hash (NCCL_SHRINK, a, 1) != nccl_plan_hash (NCCL_SHRINK, b, 1),
            "the plan hash tells exclude lists apart");
        ok (nccl_plan_hash (NCCL_SHRINK, a, 0) != nccl_plan_hash (NCCL_KEEP, a, 0),
            "the plan hash tells plans apart");
    }
    is_str (nccl_plan_name (NCCL_SHRINK), "shrink", "plan names");
}

static int handler (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    return 0;
}

/* The code of a call that passed its argument checks: UNSUPPORTED in a
 * build without (t1031), or here without a device; on a GPU machine a
 * host pointer is not device memory (INVAL). */
static int have_device (void)
{
#ifdef ELASTIC_GPU_OFF
    return 0;
#else
    char why[512];
    const struct gpu_cuda_ops *c = gpu_cuda (why, sizeof (why));
    int n = 0;
    if (!c) {
        diag ("CUDA: %s", why);
        return 0;
    }
    if (c->device_count (&n, why, sizeof (why)) < 0) {
        diag ("CUDA loaded, no device: %s", why);
        return 0;
    }
    return n > 0;
#endif
}

static void api_tests (void)
{
    elastic_manager_t *m = NULL;
    elastic_error_t err;
    struct ncclComm *comm = (struct ncclComm *)&err;
    double host[4] = {0};
    int64_t step = 0;
    int active = 0, dev = have_device (), rc;
    int nccl_built;
    char why[512];

    nccl_built = gpu_nccl (why, sizeof (why)) != NULL;
    diag ("NCCL: %s", nccl_built ? "loaded" : why);
    is_int (elastic_manager_create (MPI_COMM_WORLD, NULL, &m, &err),
            ELASTIC_OK,
            "manager created");

    /* elastic_register_device_array */
    is_int (elastic_register_device_array (NULL, "x", host, 8, 4, &err),
            ELASTIC_ERR_INVAL,
            "register_device_array: NULL manager");
    is_int (elastic_register_device_array (m, NULL, host, 8, 4, &err),
            ELASTIC_ERR_INVAL,
            "register_device_array: NULL name");
    is_int (elastic_register_device_array (m, "", host, 8, 4, &err),
            ELASTIC_ERR_INVAL,
            "register_device_array: empty name");
    is_int (elastic_register_device_array (m, "x", host, 0, 4, &err),
            ELASTIC_ERR_INVAL,
            "register_device_array: elem_size 0");
    ok (strstr (err.text, "elem_size 0") != NULL, "... names the value: %s", err.text);
    is_int (elastic_register_device_array (m, "x", NULL, 8, 4, &err),
            ELASTIC_ERR_INVAL,
            "register_device_array: NULL data with count 4");
    ok (strstr (err.text, "count 4") != NULL, "... names the value: %s", err.text);
    is_int (elastic_register_device_array (m, "x", host, (size_t)1 << 62, 64, &err),
            ELASTIC_ERR_INVAL,
            "register_device_array: count x elem_size overflows");
    rc = elastic_register_device_array (m, "x", host, 8, 4, &err);
    if (dev) {
        is_int (rc, ELASTIC_ERR_INVAL, "register_device_array: a host pointer");
        ok (strstr (err.text, "not device memory") != NULL, "... says so: %s", err.text);
    } else {
        is_int (
            rc, ELASTIC_ERR_UNSUPPORTED, "register_device_array: no CUDA (or device)");
        ok (strstr (err.text, "elastic_register_device_array") &&
                (strstr (err.text, "without CUDA") ||
                 strstr (err.text, "no CUDA device") || strstr (err.text, "libcudart")),
            "... says what is missing: %s",
            err.text);
    }
    /* elastic_device_set_stream */
    is_int (elastic_device_set_stream (NULL, NULL, &err),
            ELASTIC_ERR_INVAL,
            "device_set_stream: NULL manager");
    rc = elastic_device_set_stream (m, NULL, &err);
    is_int (rc,
            dev ? ELASTIC_OK : ELASTIC_ERR_UNSUPPORTED,
            "device_set_stream: %s",
            dev ? "ok" : "unsupported");

    /* elastic_nccl_comm before enable */
    is_int (elastic_nccl_comm (NULL, &comm, &err),
            ELASTIC_ERR_INVAL,
            "nccl_comm: NULL manager");
    is_int (elastic_nccl_comm (m, NULL, &err), ELASTIC_ERR_INVAL, "nccl_comm: NULL comm");
    is_int (elastic_nccl_comm (m, &comm, &err),
            nccl_built ? ELASTIC_ERR_STATE : ELASTIC_ERR_UNSUPPORTED,
            "nccl_comm: not enabled (%s)",
            err.text);
    ok (comm == NULL, "nccl_comm: *comm NULL on error");
    /* elastic_nccl_check */
    is_int (elastic_nccl_check (NULL, NULL, 1.0, &err),
            ELASTIC_ERR_INVAL,
            "nccl_check: NULL manager");
    is_int (elastic_nccl_check (m, NULL, -1.0, &err),
            ELASTIC_ERR_INVAL,
            "nccl_check: timeout -1");
    ok (strstr (err.text, "-1") != NULL, "... names the value: %s", err.text);
    is_int (elastic_nccl_check (m, NULL, NAN, &err),
            ELASTIC_ERR_INVAL,
            "nccl_check: timeout NaN");
    is_int (elastic_nccl_check (m, NULL, 0.0, &err),
            nccl_built ? ELASTIC_ERR_STATE : ELASTIC_ERR_UNSUPPORTED,
            "nccl_check: not enabled (%s)",
            err.text);
    /* elastic_nccl_enable */
    is_int (
        elastic_nccl_enable (NULL, &err), ELASTIC_ERR_INVAL, "nccl_enable: NULL manager");
    rc = elastic_nccl_enable (m, &err);
    if (nccl_built) {
        /* enabled: a one-rank communicator would need a GPU at start; take
         * it back by not starting this manager with it */
        is_int (rc, ELASTIC_OK, "nccl_enable: ok (NCCL loaded)");
    } else {
        is_int (rc, ELASTIC_ERR_UNSUPPORTED, "nccl_enable: unsupported");
        ok (strstr (err.text, "NCCL") != NULL, "... says what is missing: %s", err.text);
    }
    elastic_manager_destroy (m);

    /* after start: enable is too late; ELASTIC_NCCL_ERROR without NCCL */
    m = NULL;
    is_int (elastic_manager_create (MPI_COMM_WORLD, NULL, &m, &err),
            ELASTIC_OK,
            "second manager created");
    elastic_register_value (m, "step", &step, sizeof (step), &err);
    is_int (
        elastic_manager_start (m, handler, NULL, &active, &err), ELASTIC_OK, "started");
    is_int (elastic_nccl_enable (m, &err),
            nccl_built ? ELASTIC_ERR_STATE : ELASTIC_ERR_UNSUPPORTED,
            "nccl_enable after start (%s)",
            err.text);
    is_int (elastic_maybe_reshard_down (m, ELASTIC_NCCL_ERROR, handler, NULL, &err),
            ELASTIC_ERR_STATE,
            "reshard_down(ELASTIC_NCCL_ERROR) without NCCL enabled");
    ok (strstr (err.text, "elastic_nccl_enable") != NULL, "... says why: %s", err.text);
    elastic_manager_destroy (m);
}

int main (int argc, char **argv)
{
    MPI_Init (&argc, &argv);
    plan_tests ();
    api_tests ();
    MPI_Finalize ();
    return done_testing ();
}
