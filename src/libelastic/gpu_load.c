/* gpu_load.c - libcudart and libnccl, loaded with dlopen on first use
 *
 * libelastic is linked into every rank and stays dependency-light: the CUDA
 * runtime and NCCL headers are used at compile time only, and the
 * libraries are opened (RTLD_NOW | RTLD_GLOBAL, so that an application
 * linked with the shared runtime shares the one already loaded) the first
 * time a device array is registered or NCCL is enabled.  ELASTIC_LIBCUDART
 * and ELASTIC_LIBNCCL name other files.  Calls return 0, or -1 with the
 * library's error string.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
/* tests/t1031: this file compiled as a build without CUDA and NCCL */
#ifdef ELASTIC_GPU_OFF
#undef HAVE_CUDA
#undef HAVE_NCCL
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu.h"

#if HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if HAVE_NCCL
#include <nccl.h>
#endif

static const struct gpu_cuda_ops *cuda_test_ops;
static const struct gpu_nccl_ops *nccl_test_ops;

void gpu_set_cuda_ops (const struct gpu_cuda_ops *ops)
{
    cuda_test_ops = ops;
}

void gpu_set_nccl_ops (const struct gpu_nccl_ops *ops)
{
    nccl_test_ops = ops;
}

#if HAVE_CUDA || HAVE_NCCL
/* dlopen the first of names (a NULL-terminated list, env's file first)
 * that loads; NULL with every name and dlerror in why. */
static void *open_first (const char *env, const char *const *names, char *why, size_t len)
{
    const char *e = getenv (env);
    size_t used = 0;
    void *h;

    if (e && *e) {
        if ((h = dlopen (e, RTLD_NOW | RTLD_GLOBAL)))
            return h;
        snprintf (why, len, "%s=%s: %s", env, e, dlerror ());
        return NULL;
    }
    why[0] = '\0';
    for (int i = 0; names[i]; i++) {
        if ((h = dlopen (names[i], RTLD_NOW | RTLD_GLOBAL)))
            return h;
        if (used < len)
            used += snprintf (why + used, len - used, "%s%s", i ? "; " : "", dlerror ());
    }
    return NULL;
}

/* dlsym every name into fns; -1 with the missing one in why. */
static int resolve (
    void *h, const char *lib, const char *const *names, void **fns, char *why, size_t len)
{
    for (int i = 0; names[i]; i++) {
        if (!(fns[i] = dlsym (h, names[i]))) {
            snprintf (why, len, "%s has no %s", lib, names[i]);
            return -1;
        }
    }
    return 0;
}
#endif

/* ------------------------------------------------------------------ CUDA */
#if HAVE_CUDA
#define CUDART_MAJOR  (CUDART_VERSION / 1000)
#define STR_(x)       #x
#define STR(x)        STR_ (x)
#define CUDART_SONAME "libcudart.so." STR (CUDART_MAJOR)

static const char *const cuda_names[] = {
    "cudaGetDeviceCount",
    "cudaGetDevice",
    "cudaMallocHost",
    "cudaFreeHost",
    "cudaPointerGetAttributes",
    "cudaStreamCreateWithFlags",
    "cudaStreamDestroy",
    "cudaEventCreateWithFlags",
    "cudaEventDestroy",
    "cudaEventRecord",
    "cudaStreamWaitEvent",
    "cudaEventSynchronize",
    "cudaStreamQuery",
    "cudaMemcpyAsync",
    "cudaMemcpy",
    "cudaGetErrorString",
    "cudaGetLastError",
    "cudaHostRegister",
    "cudaHostUnregister",
    "cudaMalloc",
    "cudaFree",
    NULL,
};

static struct {
    cudaError_t (*device_count) (int *);
    cudaError_t (*get_device) (int *);
    cudaError_t (*malloc_host) (void **, size_t);
    cudaError_t (*free_host) (void *);
    cudaError_t (*ptr_attr) (struct cudaPointerAttributes *, const void *);
    cudaError_t (*stream_create) (cudaStream_t *, unsigned int);
    cudaError_t (*stream_destroy) (cudaStream_t);
    cudaError_t (*event_create) (cudaEvent_t *, unsigned int);
    cudaError_t (*event_destroy) (cudaEvent_t);
    cudaError_t (*event_record) (cudaEvent_t, cudaStream_t);
    cudaError_t (*stream_wait_event) (cudaStream_t, cudaEvent_t, unsigned int);
    cudaError_t (*event_sync) (cudaEvent_t);
    cudaError_t (*stream_query) (cudaStream_t);
    cudaError_t (*memcpy_async) (
        void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
    cudaError_t (*memcpy) (void *, const void *, size_t, enum cudaMemcpyKind);
    const char *(*error_string) (cudaError_t);
    cudaError_t (*last_error) (void);
    cudaError_t (*host_register) (void *, size_t, unsigned int);
    cudaError_t (*host_unregister) (void *);
    cudaError_t (*dev_malloc) (void **, size_t);
    cudaError_t (*dev_free) (void *);
} cu;

static int cu_err (cudaError_t e, const char *call, char *why, size_t len)
{
    if (e == cudaSuccess)
        return 0;
    snprintf (why, len, "%s: %s", call, cu.error_string (e));
    return -1;
}

static int cu_device_count (int *n, char *why, size_t len)
{
    *n = 0;
    return cu_err (cu.device_count (n), "cudaGetDeviceCount", why, len);
}

static int cu_get_device (int *dev, char *why, size_t len)
{
    *dev = -1;
    return cu_err (cu.get_device (dev), "cudaGetDevice", why, len);
}

static int cu_host_alloc (void **p, size_t size, char *why, size_t len)
{
    return cu_err (cu.malloc_host (p, size > 0 ? size : 1), "cudaMallocHost", why, len);
}

static void cu_host_free (void *p)
{
    if (p)
        cu.free_host (p);
}

static int cu_is_device_ptr (const void *p, char *why, size_t len)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cu.ptr_attr (&a, p);

    if (e != cudaSuccess) {
        cu.last_error (); /* not sticky: clear it */
        return cu_err (e, "cudaPointerGetAttributes", why, len);
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static int cu_stream_create (void **s, char *why, size_t len)
{
    /* cudaStreamDefault: a blocking stream, ordered with the legacy default
     * stream both ways */
    return cu_err (cu.stream_create ((cudaStream_t *)s, cudaStreamDefault),
                   "cudaStreamCreateWithFlags",
                   why,
                   len);
}

static int cu_stream_create_nb (void **s, char *why, size_t len)
{
    return cu_err (cu.stream_create ((cudaStream_t *)s, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags",
                   why,
                   len);
}

static int cu_dev_alloc (void **p, size_t size, char *why, size_t len)
{
    cudaError_t e = cu.dev_malloc (p, size > 0 ? size : 1);
    if (e != cudaSuccess)
        cu.last_error (); /* out of memory is not sticky: clear it */
    return cu_err (e, "cudaMalloc", why, len);
}

static void cu_dev_free (void *p)
{
    if (p)
        cu.dev_free (p);
}

static int
cu_memcpy_d2d_async (void *dst, const void *src, size_t n, void *s, char *why, size_t len)
{
    return cu_err (
        cu.memcpy_async (dst, src, n, cudaMemcpyDeviceToDevice, (cudaStream_t)s),
        "cudaMemcpyAsync",
        why,
        len);
}

static void cu_stream_destroy (void *s)
{
    if (s)
        cu.stream_destroy ((cudaStream_t)s);
}

static int cu_event_create (void **ev, char *why, size_t len)
{
    return cu_err (cu.event_create ((cudaEvent_t *)ev, cudaEventDisableTiming),
                   "cudaEventCreateWithFlags",
                   why,
                   len);
}

static void cu_event_destroy (void *ev)
{
    if (ev)
        cu.event_destroy ((cudaEvent_t)ev);
}

static int cu_event_record (void *ev, void *s, char *why, size_t len)
{
    return cu_err (
        cu.event_record ((cudaEvent_t)ev, (cudaStream_t)s), "cudaEventRecord", why, len);
}

static int cu_stream_wait_event (void *s, void *ev, char *why, size_t len)
{
    return cu_err (cu.stream_wait_event ((cudaStream_t)s, (cudaEvent_t)ev, 0),
                   "cudaStreamWaitEvent",
                   why,
                   len);
}

static int cu_event_sync (void *ev, char *why, size_t len)
{
    return cu_err (cu.event_sync ((cudaEvent_t)ev), "cudaEventSynchronize", why, len);
}

static int cu_stream_query (void *s, char *why, size_t len)
{
    cudaError_t e = cu.stream_query ((cudaStream_t)s);
    if (e == cudaErrorNotReady) {
        cu.last_error ();
        return 0;
    }
    return cu_err (e, "cudaStreamQuery", why, len) < 0 ? -1 : 1;
}

static int
cu_memcpy_d2h_async (void *dst, const void *src, size_t n, void *s, char *why, size_t len)
{
    return cu_err (cu.memcpy_async (dst, src, n, cudaMemcpyDeviceToHost, (cudaStream_t)s),
                   "cudaMemcpyAsync",
                   why,
                   len);
}

static int cu_memcpy_h2d (void *dst, const void *src, size_t n, char *why, size_t len)
{
    return cu_err (
        cu.memcpy (dst, src, n, cudaMemcpyHostToDevice), "cudaMemcpy", why, len);
}

static int cu_host_register (void *p, size_t n, char *why, size_t len)
{
    cudaError_t e = cu.host_register (p, n, cudaHostRegisterDefault);
    if (e != cudaSuccess)
        cu.last_error ();
    return cu_err (e, "cudaHostRegister", why, len);
}

static void cu_host_unregister (void *p)
{
    if (p)
        cu.host_unregister (p);
}

static const struct gpu_cuda_ops cuda_real = {
    .name = CUDART_SONAME,
    .device_count = cu_device_count,
    .get_device = cu_get_device,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .is_device_ptr = cu_is_device_ptr,
    .stream_create = cu_stream_create,
    .stream_create_nb = cu_stream_create_nb,
    .dev_alloc = cu_dev_alloc,
    .dev_free = cu_dev_free,
    .memcpy_d2d_async = cu_memcpy_d2d_async,
    .stream_destroy = cu_stream_destroy,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .stream_wait_event = cu_stream_wait_event,
    .event_sync = cu_event_sync,
    .stream_query = cu_stream_query,
    .memcpy_d2h_async = cu_memcpy_d2h_async,
    .memcpy_h2d = cu_memcpy_h2d,
    .host_register = cu_host_register,
    .host_unregister = cu_host_unregister,
};

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static int cuda_loaded;
static char cuda_why[512];

static void cuda_load (void)
{
    static const char *const libs[] = {CUDART_SONAME, "libcudart.so", NULL};
    void *h = open_first ("ELASTIC_LIBCUDART", libs, cuda_why, sizeof (cuda_why));

    if (!h)
        return;
    if (resolve (
            h, CUDART_SONAME, cuda_names, (void **)&cu, cuda_why, sizeof (cuda_why)) == 0)
        cuda_loaded = 1;
}
#endif

const struct gpu_cuda_ops *gpu_cuda (char *why, size_t len)
{
    if (cuda_test_ops)
        return cuda_test_ops;
#if HAVE_CUDA
    pthread_once (&cuda_once, cuda_load);
    if (cuda_loaded)
        return &cuda_real;
    snprintf (why, len, "cannot load the CUDA runtime (%s)", cuda_why);
#else
    snprintf (why, len, "libelastic was built without CUDA (configure --with-cuda)");
#endif
    return NULL;
}

/* ------------------------------------------------------------------ NCCL */
#if HAVE_NCCL
static const char *const nccl_names[] = {
    "ncclGetUniqueId",
    "ncclCommInitRankConfig",
    "ncclCommRevoke",
    "ncclCommShrink",
    "ncclCommAbort",
    "ncclCommGetAsyncError",
    "ncclCommCount",
    "ncclCommUserRank",
    "ncclGetErrorString",
    NULL,
};

static struct {
    ncclResult_t (*unique_id) (ncclUniqueId *);
    ncclResult_t (*init_config) (ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*revoke) (ncclComm_t, int);
    ncclResult_t (*shrink) (ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int);
    ncclResult_t (*abort) (ncclComm_t);
    ncclResult_t (*async_error) (ncclComm_t, ncclResult_t *);
    ncclResult_t (*count) (const ncclComm_t, int *);
    ncclResult_t (*user_rank) (const ncclComm_t, int *);
    const char *(*error_string) (ncclResult_t);
} nc;

static double nccl_timeout (void)
{
    const char *e = getenv ("ELASTIC_NCCL_TIMEOUT");
    double t = e ? strtod (e, NULL) : 0;
    return t > 0 ? t : 60.0;
}

static double now_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A non-blocking call's result r: poll the communicator's async error
 * while it is ncclInProgress, under the deadline. */
static int
nc_wait (ncclComm_t comm, ncclResult_t r, const char *call, char *why, size_t len)
{
    double end = now_s () + nccl_timeout ();

    while (r == ncclInProgress && comm) {
        struct timespec ms = {0, 1000000};
        if (now_s () > end) {
            snprintf (why,
                      len,
                      "%s: not done after %.0f s (ELASTIC_NCCL_TIMEOUT)",
                      call,
                      nccl_timeout ());
            return -1;
        }
        nanosleep (&ms, NULL);
        if (nc.async_error (comm, &r) != ncclSuccess)
            break;
    }
    if (r == ncclSuccess)
        return 0;
    snprintf (why, len, "%s: %s", call, nc.error_string (r));
    return -1;
}

static ncclConfig_t nc_config (void)
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    c.blocking = 0;
    return c;
}

static int nc_unique_id (unsigned char *id, char *why, size_t len)
{
    ncclUniqueId u;
    ncclResult_t r = nc.unique_id (&u);
    if (r != ncclSuccess) {
        snprintf (why, len, "ncclGetUniqueId: %s", nc.error_string (r));
        return -1;
    }
    memcpy (id, u.internal, GPU_NCCL_ID_BYTES);
    return 0;
}

static int nc_init (
    void **comm, int nranks, const unsigned char *id, int rank, char *why, size_t len)
{
    ncclUniqueId u;
    ncclConfig_t c = nc_config ();
    ncclComm_t cm = NULL;
    ncclResult_t r;

    memcpy (u.internal, id, GPU_NCCL_ID_BYTES);
    r = nc.init_config (&cm, nranks, u, rank, &c);
    if (nc_wait (cm, r, "ncclCommInitRankConfig", why, len) < 0) {
        if (cm)
            nc.abort (cm);
        return -1;
    }
    *comm = cm;
    return 0;
}

static int nc_revoke (void *comm, char *why, size_t len)
{
    ncclResult_t r = nc.revoke ((ncclComm_t)comm, NCCL_REVOKE_DEFAULT);
    return nc_wait ((ncclComm_t)comm, r, "ncclCommRevoke", why, len);
}

static int
nc_shrink (void *comm, int *excl, int nexcl, void **child, char *why, size_t len)
{
    ncclConfig_t c = nc_config ();
    ncclComm_t cm = NULL;
    ncclResult_t r =
        nc.shrink ((ncclComm_t)comm, excl, nexcl, &cm, &c, NCCL_SHRINK_ABORT);

    if (r != ncclSuccess && r != ncclInProgress) {
        snprintf (why, len, "ncclCommShrink: %s", nc.error_string (r));
        return -1;
    }
    if (nc_wait (cm, r, "ncclCommShrink", why, len) < 0) {
        if (cm)
            nc.abort (cm);
        return -1;
    }
    *child = cm;
    return 0;
}

static void nc_abort (void *comm)
{
    if (comm)
        nc.abort ((ncclComm_t)comm);
}

static int nc_async_error (void *comm, char *why, size_t len)
{
    ncclResult_t a = ncclSuccess, r = nc.async_error ((ncclComm_t)comm, &a);
    if (r != ncclSuccess)
        a = r;
    if (a == ncclSuccess)
        return 0;
    if (a == ncclInProgress)
        return 2;
    snprintf (why, len, "ncclCommGetAsyncError: %s", nc.error_string (a));
    return 1;
}

static int nc_count (void *comm, int *n, char *why, size_t len)
{
    ncclResult_t r = nc.count ((ncclComm_t)comm, n);
    if (r == ncclSuccess)
        return 0;
    snprintf (why, len, "ncclCommCount: %s", nc.error_string (r));
    return -1;
}

static int nc_user_rank (void *comm, int *rank, char *why, size_t len)
{
    ncclResult_t r = nc.user_rank ((ncclComm_t)comm, rank);
    if (r == ncclSuccess)
        return 0;
    snprintf (why, len, "ncclCommUserRank: %s", nc.error_string (r));
    return -1;
}

static const struct gpu_nccl_ops nccl_real = {
    .name = "libnccl.so.2",
    .unique_id = nc_unique_id,
    .init = nc_init,
    .revoke = nc_revoke,
    .shrink = nc_shrink,
    .abort = nc_abort,
    .async_error = nc_async_error,
    .count = nc_count,
    .user_rank = nc_user_rank,
};

static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static int nccl_loaded;
static char nccl_why[512];

static void nccl_load (void)
{
    static const char *const libs[] = {"libnccl.so.2", "libnccl.so", NULL};
    void *h = open_first ("ELASTIC_LIBNCCL", libs, nccl_why, sizeof (nccl_why));

    if (!h)
        return;
    if (resolve (
            h, "libnccl.so.2", nccl_names, (void **)&nc, nccl_why, sizeof (nccl_why)) ==
        0)
        nccl_loaded = 1;
}
#endif

const struct gpu_nccl_ops *gpu_nccl (char *why, size_t len)
{
    if (nccl_test_ops)
        return nccl_test_ops;
#if HAVE_NCCL
    pthread_once (&nccl_once, nccl_load);
    if (nccl_loaded)
        return &nccl_real;
    snprintf (why, len, "cannot load NCCL (%s)", nccl_why);
#else
    snprintf (why, len, "libelastic was built without NCCL (configure --with-nccl)");
#endif
    return NULL;
}
