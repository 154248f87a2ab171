/* gpu.h - device arrays and the NCCL communicator (internal)
 *
 * The optional GPU part of libelastic (doc/gpu.md).  libcudart and libnccl
 * are not linked: they are loaded with dlopen on first use (gpu_load.c),
 * so a rank that registers no device array and asks for no NCCL
 * communicator never loads them.  Every CUDA and NCCL call goes through an
 * ops table; the real tables come from the loaded libraries, and a test
 * may install its own (gpu_set_cuda_ops, gpu_set_nccl_ops) to run the
 * library's code path up to those calls on a machine without a GPU.
 *
 * Built without CUDA (or NCCL) the real tables do not exist and the public
 * calls return ELASTIC_ERR_UNSUPPORTED.
 */
#ifndef ELASTIC_GPU_H
#define ELASTIC_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <elastic.h>

struct elastic_manager;
struct reg_array;

/* CUDA runtime calls libelastic makes.  Each returns 0, or -1 with why
 * (the runtime's error string) filled. */
struct gpu_cuda_ops {
    const char *name; /* "libcudart.so.13", or a test's name */
    int (*device_count) (int *n, char *why, size_t len);
    int (*get_device) (int *dev, char *why, size_t len); /* the current one */
    int (*host_alloc) (void **p, size_t size, char *why, size_t len); /* pinned */
    void (*host_free) (void *p);
    int (*is_device_ptr) (const void *p, char *why, size_t len); /* 1, 0, -1 */
    int (*stream_create) (void **stream, char *why, size_t len); /* blocking */
    /* a non-blocking stream: not ordered with the legacy default stream */
    int (*stream_create_nb) (void **stream, char *why, size_t len);
    int (*dev_alloc) (void **p, size_t size, char *why, size_t len); /* cudaMalloc */
    void (*dev_free) (void *p);
    int (*memcpy_d2d_async) (
        void *dst, const void *src, size_t n, void *stream, char *why, size_t len);
    void (*stream_destroy) (void *stream);
    int (*event_create) (void **ev, char *why, size_t len);
    void (*event_destroy) (void *ev);
    int (*event_record) (void *ev, void *stream, char *why, size_t len);
    int (*stream_wait_event) (void *stream, void *ev, char *why, size_t len);
    int (*event_sync) (void *ev, char *why, size_t len);
    int (*stream_query) (void *stream, char *why, size_t len); /* 1 done, 0 busy */
    int (*memcpy_d2h_async) (
        void *dst, const void *src, size_t n, void *stream, char *why, size_t len);
    int (*memcpy_h2d) (void *dst, const void *src, size_t n, char *why, size_t len);
    /* page-lock existing host memory (cudaHostRegister) and undo it */
    int (*host_register) (void *p, size_t n, char *why, size_t len);
    void (*host_unregister) (void *p);
};

/* NCCL calls libelastic makes (comms are ncclComm_t, ids ncclUniqueId's
 * 128 bytes).  Each returns 0, or -1 with why filled; the real ones use
 * non-blocking communicators and poll ncclCommGetAsyncError under the
 * deadline ELASTIC_NCCL_TIMEOUT (seconds, 60). */
#define GPU_NCCL_ID_BYTES 128
struct gpu_nccl_ops {
    const char *name;
    int (*unique_id) (unsigned char *id, char *why, size_t len);
    int (*init) (void **comm,
                 int nranks,
                 const unsigned char *id,
                 int rank,
                 char *why,
                 size_t len);
    int (*revoke) (void *comm, char *why, size_t len);
    /* child without the excluded ranks, NCCL_SHRINK_ABORT (excl is a copy:
     * NCCL sorts it) */
    int (*shrink) (void *comm, int *excl, int nexcl, void **child, char *why, size_t len);
    void (*abort) (void *comm);
    /* 0 none, 1 an error (why), 2 an operation still in progress */
    int (*async_error) (void *comm, char *why, size_t len);
    int (*count) (void *comm, int *n, char *why, size_t len);
    int (*user_rank) (void *comm, int *rank, char *why, size_t len);
};

/* The loaded tables (loading on first call), or NULL with why filled:
 * not built in, or the library cannot be loaded (its name and dlerror). */
const struct gpu_cuda_ops *gpu_cuda (char *why, size_t len);
const struct gpu_nccl_ops *gpu_nccl (char *why, size_t len);

/* Tests: use ops instead of the libraries (NULL: the libraries again). */
void gpu_set_cuda_ops (const struct gpu_cuda_ops *ops);
void gpu_set_nccl_ops (const struct gpu_nccl_ops *ops);

/* ---- the plan of an NCCL rebuild (gpu_plan.c: pure, no CUDA, no MPI) ---- */

enum nccl_plan {
    NCCL_KEEP = 0,   /* same members, no failure: keep the communicator */
    NCCL_SHRINK = 1, /* survivors of the old one, in its order: shrink */
    NCCL_NEW = 2,    /* anything else: abort the old one, create anew */
};

/* Decide how the communicator of old members old[nold] (original ranks in
 * NCCL rank order; nold 0: this rank has none) becomes one over new
 * members nw[nnew] (original ranks in new rank order), failure 1 after a
 * process failure (or an NCCL error).  For NCCL_SHRINK, excl[] (room for
 * nold) gets the old NCCL ranks to exclude, ascending, and *nexcl their
 * number: identical on every survivor that computes it from the same
 * lists.  Never fails. */
enum nccl_plan nccl_plan_decide (const int *old,
                                 int nold,
                                 const int *nw,
                                 int nnew,
                                 int failure,
                                 int *excl,
                                 int *nexcl);

/* A hash of a plan and its exclude list, compared across the ranks before
 * acting on it. */
uint64_t nccl_plan_hash (enum nccl_plan plan, const int *excl, int nexcl);

/* The name of a plan ("keep", "shrink", "new"). */
const char *nccl_plan_name (enum nccl_plan plan);

/* ---- the manager's GPU state (gpu_device.c, gpu_nccl.c) ---- */

/* The manager's GPU state (m->gpu, created on first use). */
struct gpu_state {
    const struct gpu_cuda_ops *cuda; /* loaded (device arrays, a stream) */
    void *stream;                    /* the library's own (blocking) stream */
    void *done_ev;                   /* recorded after the staging copies */
    void *app_ev;                    /* recorded on the application's stream */
    void *app_stream;                /* elastic_device_set_stream (NULL: legacy) */
    void *stream_nb;                 /* non-blocking: staging -> host copies */
    void *stage_ev;                  /* recorded after the device-side copies */
    int staging;                     /* 1: stage on the device first (default),
                                      * 0: ELASTIC_DEVICE_STAGING=0 or no room */
    int staged;                      /* copies enqueued, not yet waited for */
    int ndev;                        /* device arrays registered */
    int device;                      /* the rank's current device at first use */

    const struct gpu_nccl_ops *nccl; /* loaded when enabled */
    int nccl_enabled;                /* elastic_nccl_enable */
    int group;                       /* ranks per communicator (0: all; tests) */
    void *comm;                      /* over members[], NULL: none */
    int *members;                    /* [nmembers] original ranks by NCCL rank */
    int nmembers;
    int revoked;              /* comm revoked (an NCCL failure) */
    int failed_here;          /* an NCCL failure reported on this rank */
    enum nccl_plan last_plan; /* the last rebuild's plan ... */
    int last_nexcl;           /* ... its exclude count */
    int last_fallback;        /* ... 1 if a shrink fell back to a new one */
    uint64_t rebuilds;        /* rebuilds that changed the communicator */
};

/* m's GPU state, created on first use; NULL if memory runs out. */
struct gpu_state *gpu_state_get (struct elastic_manager *m);

/* Free it (NULL-safe): the stream, the events, an NCCL communicator
 * (aborted: local, never blocks). */
void gpu_state_destroy (struct gpu_state *g);

/* Device arrays: register (the pinned mirror allocated, the array entered
 * in the registry with the mirror as its data). */
int gpu_register_array (struct elastic_manager *m,
                        const char *name,
                        void *dev,
                        size_t elem_size,
                        uint64_t count,
                        elastic_error_t *err);

/* Free a device array's mirror (registry_destroy). */
void gpu_array_free (struct reg_array *ra);

/* Make a device array's mirror hold count elements (contents not kept):
 * 0, or -1 (memory). */
int gpu_mirror_reserve (struct reg_array *ra, uint64_t count);

/* elastic_device_set_stream (stream NULL: the legacy default stream). */
int gpu_set_stream (struct elastic_manager *m, void *stream, elastic_error_t *err);

/* elastic_nccl_enable, elastic_nccl_comm, elastic_nccl_check. */
int gpu_nccl_enable (struct elastic_manager *m, elastic_error_t *err);
int gpu_nccl_comm (const struct elastic_manager *m, void **comm, elastic_error_t *err);
int gpu_nccl_check (struct elastic_manager *m,
                    void *stream,
                    double timeout_s,
                    elastic_error_t *err);

/* 1 if m has device arrays. */
int gpu_has_arrays (const struct elastic_manager *m);

/* Enqueue the copy of every device array on the library's stream, ordered
 * after the application's work (its stream's event, or the legacy default
 * stream), and record the event that ends it: into its mirror (l1 NULL),
 * or straight to its place in a serialized snapshot at l1 (page-locked
 * with gpu_pin; the offsets of snapshot.h's layout).  0, or -1 with why
 * filled. */
int gpu_stage_begin (struct elastic_manager *m, void *l1, char *why, size_t len);

/* Page-lock n bytes at p for copies from the device (a snapshot buffer):
 * 0, or -1 (then copies go through the mirrors).  gpu_unpin undoes it. */
int gpu_pin (void *p, size_t n);
void gpu_unpin (void *p);

/* Wait for the copies gpu_stage_begin enqueued.  0, or -1 with why. */
int gpu_stage_wait (struct elastic_manager *m, char *why, size_t len);

/* Before a handler: for each device array with a placement hook, ask the
 * hook for a device buffer of its new count and copy the restored block
 * (in the mirror) into it.  0, or -1 (logged). */
int gpu_place_arrays (struct elastic_manager *m);

/* elastic_array_restore for a device array: buf is a device pointer. */
int gpu_array_restore (struct elastic_manager *m,
                       struct reg_array *ra,
                       void *buf,
                       uint64_t count,
                       elastic_error_t *err);

/* Collective over m's working ranks when NCCL is enabled (a no-op
 * otherwise): make the NCCL communicator match the working world
 * (nccl_plan_decide, agreed; revoke, shrink, abort; or a new one).
 * ELASTIC_OK, ELASTIC_ERR_PROC_FAILED (an MPI failure: m->work revoked) or
 * another error with err filled. */
int gpu_nccl_rebuild (struct elastic_manager *m, int failure, elastic_error_t *err);

/* An NCCL failure reported by the application (ELASTIC_NCCL_ERROR):
 * revoke the communicator locally.  ELASTIC_OK, or ELASTIC_ERR_STATE when
 * NCCL is not enabled. */
int gpu_nccl_failed (struct elastic_manager *m, elastic_error_t *err);

#endif /* ELASTIC_GPU_H */
