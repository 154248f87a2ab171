/* gpu_device.c - device arrays: pinned mirrors, staging copies, restore
 *
 * A device array is a registered array whose registry data is a pinned
 * host mirror the library owns; the snapshot code (snapshot.c) sees host
 * bytes.  At a snapshot step gpu_stage_begin enqueues one cudaMemcpyAsync
 * per array from the device into its mirror on the library's own stream,
 * after the application's work: the stream is a blocking one, so it is
 * ordered after earlier work on the legacy default stream and before later
 * work there; with elastic_device_set_stream an event on the application's
 * stream orders it after that stream's work, and the application's stream
 * waits for the copy before its next work.  The host returns at once;
 * snapshot.c waits for the copy (gpu_stage_wait) before the L1 bytes of
 * the arrays are needed: at the next library call for an overlapped
 * snapshot, at once for a synchronous one.  A restore assembles each
 * array's new block in its mirror, and the placement hook (or
 * elastic_array_restore's device buffer) receives it by cudaMemcpy.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "gpu.h"
#include "log.h"
#include "manager.h"
#include "registry.h"

struct gpu_state *gpu_state_get (struct elastic_manager *m)
{
    if (!m->gpu)
        m->gpu = calloc (1, sizeof (*m->gpu));
    return m->gpu;
}

void gpu_state_destroy (struct gpu_state *g)
{
    if (!g)
        return;
    if (g->comm && g->nccl)
        g->nccl->abort (g->comm); /* local: never waits on a peer */
    if (g->cuda) {
        if (g->staged) {
            char why[256];
            g->cuda->event_sync (g->done_ev, why, sizeof (why));
        }
        g->cuda->event_destroy (g->done_ev);
        g->cuda->event_destroy (g->app_ev);
        g->cuda->event_destroy (g->stage_ev);
        g->cuda->stream_destroy (g->stream);
        g->cuda->stream_destroy (g->stream_nb);
    }
    free (g->members);
    free (g);
}

/* The CUDA runtime with a device, for fn: ELASTIC_OK or
 * ELASTIC_ERR_UNSUPPORTED naming the library or the missing device. */
static int cuda_ready (struct gpu_state *g, const char *fn, elastic_error_t *err)
{
    char why[512];
    int n = 0;

    if (g->cuda)
        return ELASTIC_OK;
    if (!(g->cuda = gpu_cuda (why, sizeof (why))))
        return errcodef (err, ELASTIC_ERR_UNSUPPORTED, "%s: %s", fn, why);
    if (g->cuda->device_count (&n, why, sizeof (why)) < 0 || n == 0) {
        g->cuda = NULL;
        return errcodef (err,
                         ELASTIC_ERR_UNSUPPORTED,
                         "%s: no CUDA device (%s)",
                         fn,
                         n == 0 && !why[0] ? "cudaGetDeviceCount: 0 devices" : why);
    }
    /* the rank's current device: where its buffers, the library's stream
     * and the NCCL communicator live (elastic-exec's binding makes the
     * nearest GPU device 0 through CUDA_VISIBLE_DEVICES) */
    if (g->cuda->get_device (&g->device, why, sizeof (why)) < 0)
        el_log (EL_WARN, "%s: %s", fn, why);
    else {
        const char *v = getenv ("CUDA_VISIBLE_DEVICES");
        el_log (EL_DEBUG,
                "CUDA device %d of %d (%s, CUDA_VISIBLE_DEVICES=%s)",
                g->device,
                n,
                g->cuda->name,
                v ? v : "(unset)");
    }
    return ELASTIC_OK;
}

int gpu_mirror_reserve (struct reg_array *ra, uint64_t count)
{
    const struct gpu_cuda_ops *cuda;
    size_t bytes = (size_t)count * ra->elem_size;
    char why[256];
    void *p = NULL;

    if (bytes <= ra->mirror_cap && ra->data)
        return 0;
    if (!(cuda = gpu_cuda (why, sizeof (why))))
        return -1;
    if (cuda->host_alloc (&p, bytes, why, sizeof (why)) < 0) {
        el_log (EL_ERROR, "device array '%s': %s (%zu bytes)", ra->name, why, bytes);
        return -1;
    }
    cuda->host_free (ra->data);
    ra->data = p;
    ra->mirror_cap = bytes;
    return 0;
}

void gpu_array_free (struct reg_array *ra)
{
    const struct gpu_cuda_ops *cuda;
    char why[256];

    if (!ra->is_dev || !ra->data)
        return;
    if ((cuda = gpu_cuda (why, sizeof (why)))) {
        cuda->host_free (ra->data);
        cuda->dev_free (ra->stage);
    }
    ra->data = NULL;
    ra->stage = NULL;
    ra->stage_cap = 0;
}

int gpu_register_array (struct elastic_manager *m,
                        const char *name,
                        void *dev,
                        size_t elem_size,
                        uint64_t count,
                        elastic_error_t *err)
{
    static const char fn[] = "elastic_register_device_array";
    struct gpu_state *g;
    struct reg_array *ra;
    void *mirror = NULL;
    char why[512];
    int rc, a;

    if (!name || !*name)
        return errcodef (err, ELASTIC_ERR_INVAL, "%s: name is NULL or empty", fn);
    if (elem_size == 0)
        return errcodef (
            err, ELASTIC_ERR_INVAL, "%s: array '%s': elem_size 0 is invalid", fn, name);
    if (count > 0 && !dev)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "%s: array '%s': data is NULL with count %llu",
                         fn,
                         name,
                         (unsigned long long)count);
    if (count > 0 && elem_size > SIZE_MAX / count)
        return errcodef (err,
                         ELASTIC_ERR_INVAL,
                         "%s: array '%s': count %llu x elem_size %zu overflows",
                         fn,
                         name,
                         (unsigned long long)count,
                         elem_size);
    if (!(g = gpu_state_get (m)))
        return errcodef (err, ELASTIC_ERR_NOMEM, "%s: out of memory", fn);
    if ((rc = cuda_ready (g, fn, err)) != ELASTIC_OK)
        return rc;
    if (g->ndev == 0) {
        const char *s = getenv ("ELASTIC_DEVICE_STAGING");
        if (s && strcmp (s, "0") != 0 && strcmp (s, "1") != 0)
            return errcodef (
                err,
                ELASTIC_ERR_INVAL,
                "ELASTIC_DEVICE_STAGING: '%s' is invalid (expected 1 to copy "
                "device arrays on the device first, 0 not to)",
                s);
        g->staging = !s || strcmp (s, "1") == 0;
    }
    if (count > 0) {
        int d = g->cuda->is_device_ptr (dev, why, sizeof (why));
        if (d <= 0)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "%s: array '%s': data %p is not device memory%s%s",
                             fn,
                             name,
                             dev,
                             d < 0 ? ": " : "",
                             d < 0 ? why : "");
    }
    /* the mirror first, then the registry's checks (name taken, frozen):
     * a failure leaves nothing registered */
    if (g->cuda->host_alloc (&mirror, (size_t)count * elem_size, why, sizeof (why)) < 0)
        return errcodef (err,
                         ELASTIC_ERR_NOMEM,
                         "%s: array '%s': no pinned host memory for %llu bytes: %s",
                         fn,
                         name,
                         (unsigned long long)(count * elem_size),
                         why);
    if ((rc = registry_add_array (m->reg, name, mirror, elem_size, count, err)) !=
        ELASTIC_OK) {
        g->cuda->host_free (mirror);
        return rc;
    }
    a = registry_find_array (m->reg, name);
    ra = &m->reg->a[a];
    ra->is_dev = 1;
    ra->dev = dev;
    ra->mirror_cap = (size_t)count * elem_size;
    g->ndev++;
    return ELASTIC_OK;
}

int gpu_has_arrays (const struct elastic_manager *m)
{
    return m->gpu && m->gpu->ndev > 0;
}

int gpu_set_stream (struct elastic_manager *m, void *stream, elastic_error_t *err)
{
    struct gpu_state *g;
    int rc;

    if (!(g = gpu_state_get (m)))
        return errcodef (
            err, ELASTIC_ERR_NOMEM, "elastic_device_set_stream: out of memory");
    if ((rc = cuda_ready (g, "elastic_device_set_stream", err)) != ELASTIC_OK)
        return rc;
    g->app_stream = stream;
    return ELASTIC_OK;
}

int gpu_pin (void *p, size_t n)
{
    const struct gpu_cuda_ops *c;
    char why[256];

    if (!(c = gpu_cuda (why, sizeof (why))))
        return -1;
    if (c->host_register (p, n, why, sizeof (why)) < 0) {
        el_log (EL_DEBUG, "snapshot buffer of %zu bytes not page-locked: %s", n, why);
        return -1;
    }
    return 0;
}

void gpu_unpin (void *p)
{
    const struct gpu_cuda_ops *c;
    char why[256];

    if ((c = gpu_cuda (why, sizeof (why))))
        c->host_unregister (p);
}

/* The device staging copies of a periodic snapshot: one device buffer per
 * array, made on first use; none when there is no room (a warning, then
 * the direct copy for the rest of the run).  0, or -1: stage directly. */
static int stage_reserve (struct elastic_manager *m)
{
    struct gpu_state *g = m->gpu;
    char why[256];

    for (int a = 0; a < m->reg->na; a++) {
        struct reg_array *ra = &m->reg->a[a];
        size_t bytes = (size_t)ra->count * ra->elem_size;
        void *p = NULL;
        if (!ra->is_dev || bytes <= ra->stage_cap)
            continue;
        if (g->cuda->dev_alloc (&p, bytes, why, sizeof (why)) < 0) {
            el_log (EL_WARN,
                    "device array '%s': no device memory for its staging copy (%zu "
                    "bytes: %s): its snapshots copy straight to the host, which the "
                    "next step's device work waits for",
                    ra->name,
                    bytes,
                    why);
            g->staging = 0;
            return -1;
        }
        g->cuda->dev_free (ra->stage);
        ra->stage = p;
        ra->stage_cap = bytes;
    }
    return 0;
}

/* A periodic snapshot's copies through the device staging buffers: on the
 * library's blocking stream, ordered after the application's work and
 * before its next, each array is copied on the device (HBM bandwidth:
 * what the next step waits for); the copies to the host then run on a
 * non-blocking stream, beside the next step's device work. */
static int stage_via_device (struct elastic_manager *m, void *l1, char *why, size_t len)
{
    struct gpu_state *g = m->gpu;
    const struct gpu_cuda_ops *c = g->cuda;
    struct reg_item it;
    size_t off = 0;

    if ((!g->stream_nb && c->stream_create_nb (&g->stream_nb, why, len) < 0) ||
        (!g->stage_ev && c->event_create (&g->stage_ev, why, len) < 0))
        return -1;
    REG_FOREACH (m->reg, it)
    {
        struct reg_array *ra = it.kind == REG_ARRAY ? &m->reg->a[it.index] : NULL;
        if (ra && ra->is_dev && it.bytes > 0 &&
            c->memcpy_d2d_async (ra->stage, ra->dev, it.bytes, g->stream, why, len) < 0)
            return -1;
    }
    if (c->event_record (g->stage_ev, g->stream, why, len) < 0 ||
        c->stream_wait_event (g->stream_nb, g->stage_ev, why, len) < 0)
        return -1;
    REG_FOREACH (m->reg, it)
    {
        struct reg_array *ra = it.kind == REG_ARRAY ? &m->reg->a[it.index] : NULL;
        void *dst = (char *)l1 + off;
        off += it.bytes;
        if (ra && ra->is_dev && it.bytes > 0 &&
            c->memcpy_d2h_async (dst, ra->stage, it.bytes, g->stream_nb, why, len) < 0)
            return -1;
    }
    if (c->event_record (g->done_ev, g->stream_nb, why, len) < 0)
        return -1;
    g->staged = 1;
    /* the application's next work waits for the device-side copies only */
    if (g->app_stream && c->stream_wait_event (g->app_stream, g->stage_ev, why, len) < 0)
        return -1;
    return 0;
}

int gpu_stage_begin (struct elastic_manager *m, void *l1, char *why, size_t len)
{
    struct gpu_state *g = m->gpu;
    const struct gpu_cuda_ops *c;
    struct reg_item it;
    size_t off = 0;

    if (!gpu_has_arrays (m))
        return 0;
    c = g->cuda;
    if (g->staged && gpu_stage_wait (m, why, len) < 0)
        return -1;
    if (!g->stream && (c->stream_create (&g->stream, why, len) < 0 ||
                       c->event_create (&g->done_ev, why, len) < 0 ||
                       c->event_create (&g->app_ev, why, len) < 0))
        return -1;
    if (g->app_stream && (c->event_record (g->app_ev, g->app_stream, why, len) < 0 ||
                          c->stream_wait_event (g->stream, g->app_ev, why, len) < 0))
        return -1;
    /* a periodic snapshot (into its page-locked L1 slot) */
    if (l1 && g->staging && stage_reserve (m) == 0)
        return stage_via_device (m, l1, why, len);
    /* in the order of a serialized snapshot (snapshot.h) */
    REG_FOREACH (m->reg, it)
    {
        struct reg_array *ra = it.kind == REG_ARRAY ? &m->reg->a[it.index] : NULL;
        void *dst = l1 ? (char *)l1 + off : it.data;
        off += it.bytes;
        if (!ra || !ra->is_dev || it.bytes == 0)
            continue;
        if (c->memcpy_d2h_async (dst, ra->dev, it.bytes, g->stream, why, len) < 0)
            return -1;
    }
    if (c->event_record (g->done_ev, g->stream, why, len) < 0)
        return -1;
    g->staged = 1;
    /* the application's next work waits for the copy */
    if (g->app_stream && c->stream_wait_event (g->app_stream, g->done_ev, why, len) < 0)
        return -1;
    return 0;
}

int gpu_stage_wait (struct elastic_manager *m, char *why, size_t len)
{
    struct gpu_state *g = m->gpu;

    if (!g || !g->staged)
        return 0;
    g->staged = 0;
    return g->cuda->event_sync (g->done_ev, why, len);
}

int gpu_place_arrays (struct elastic_manager *m)
{
    char why[512];

    if (!gpu_has_arrays (m))
        return 0;
    for (int a = 0; a < m->reg->na; a++) {
        struct reg_array *ra = &m->reg->a[a];
        size_t bytes = (size_t)ra->rcount * ra->elem_size;
        void *q;
        ra->dev_placed = 0;
        if (!ra->is_dev || !ra->place)
            continue;
        q = ra->place (ra->dev, ra->count, ra->rcount, ra->place_arg);
        if (!q && ra->rcount > 0) {
            el_log (EL_ERROR,
                    "device array '%s': the placement hook returned NULL for %llu "
                    "elements",
                    ra->name,
                    (unsigned long long)ra->rcount);
            return -1;
        }
        if (bytes > 0 &&
            m->gpu->cuda->memcpy_h2d (q, ra->rbuf, bytes, why, sizeof (why)) < 0) {
            el_log (EL_ERROR, "device array '%s': restore: %s", ra->name, why);
            return -1;
        }
        ra->dev = q;
        ra->count = ra->rcount;
        ra->dev_placed = 1;
    }
    return 0;
}

int gpu_array_restore (struct elastic_manager *m,
                       struct reg_array *ra,
                       void *buf,
                       uint64_t count,
                       elastic_error_t *err)
{
    const struct gpu_cuda_ops *c = m->gpu->cuda;
    size_t bytes = (size_t)count * ra->elem_size;
    char why[512];

    if (count > 0 && !(buf == ra->dev && ra->dev_placed)) {
        int d = c->is_device_ptr (buf, why, sizeof (why));
        if (d <= 0)
            return errcodef (err,
                             ELASTIC_ERR_INVAL,
                             "elastic_array_restore: device array '%s': buf %p is not "
                             "device memory%s%s",
                             ra->name,
                             buf,
                             d < 0 ? ": " : "",
                             d < 0 ? why : "");
        if (c->memcpy_h2d (buf, ra->rbuf, bytes, why, sizeof (why)) < 0)
            return errcodef (err,
                             ELASTIC_ERR_IO,
                             "elastic_array_restore: device array '%s': %s",
                             ra->name,
                             why);
    }
    ra->dev = buf;
    ra->count = count;
    ra->restored = 1;
    ra->in_place = 0; /* the mirror is not the array's storage: never adopted */
    return ELASTIC_OK;
}
