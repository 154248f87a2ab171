/* agent_link.c - what a worker tells its supervisor (elastic-exec, torchrun)
 *
 * The progress heartbeat (ELASTIC_HEARTBEAT_FILE, see common/heartbeat.h) and
 * torchelastic's error file (ELASTIC_ERROR_FILE or TORCHELASTIC_ERROR_FILE).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <elastic.h>
#include "common/clock.h"
#include "common/heartbeat.h"
#include "common/json.h"
#include "initreport.h"
#include "manager.h"

static struct elastic_heartbeat *hb;
static int hb_tried;

static struct elastic_heartbeat *heartbeat_attach (void)
{
    const char *path;
    struct stat st;
    void *p;
    int fd;

    if (hb || hb_tried)
        return hb;
    hb_tried = 1;
    if (!(path = getenv ("ELASTIC_HEARTBEAT_FILE")) || *path == '\0')
        return NULL;
    if ((fd = open (path, O_RDWR | O_CLOEXEC)) < 0)
        return NULL;
    /* grow a file an older agent made, never shrink one (its mapping) */
    if (fstat (fd, &st) < 0 ||
        ((size_t)st.st_size < sizeof (*hb) && ftruncate (fd, sizeof (*hb)) < 0)) {
        close (fd);
        return NULL;
    }
    p = mmap (NULL, sizeof (*hb), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close (fd);
    if (p == MAP_FAILED)
        return NULL;
    hb = p;
    __atomic_store_n (&hb->version, ELASTIC_HEARTBEAT_VERSION, __ATOMIC_RELAXED);
    __atomic_store_n (&hb->pid, (int64_t)getpid (), __ATOMIC_RELAXED);
    __atomic_store_n (&hb->last_snapshot_step, (int64_t)-1, __ATOMIC_RELAXED);
    __atomic_store_n (&hb->magic, ELASTIC_HEARTBEAT_MAGIC, __ATOMIC_RELEASE);
    return hb;
}

int elastic_progress (int64_t step)
{
    struct elastic_heartbeat *h;

    initreport_mpi_ready ();
    h = heartbeat_attach ();

    if (!h)
        return ELASTIC_OK;
    __atomic_store_n (&h->step, step, __ATOMIC_RELAXED);
    __atomic_add_fetch (&h->count, 1, __ATOMIC_RELAXED);
    __atomic_store_n (&h->updated_ns, mono_ns (), __ATOMIC_RELEASE);
    return ELASTIC_OK;
}

int elastic_progress_snapshot (int64_t step)
{
    struct elastic_heartbeat *h = heartbeat_attach ();

    if (!h)
        return ELASTIC_OK;
    __atomic_store_n (&h->last_snapshot_step, step, __ATOMIC_RELAXED);
    __atomic_store_n (&h->updated_ns, mono_ns (), __ATOMIC_RELEASE);
    return ELASTIC_OK;
}

void heartbeat_flag (uint32_t flag)
{
    struct elastic_heartbeat *h = heartbeat_attach ();

    if (!h)
        return;
    __atomic_or_fetch (&h->flags, flag, __ATOMIC_RELEASE);
    __atomic_store_n (&h->updated_ns, mono_ns (), __ATOMIC_RELEASE);
}

void heartbeat_touch (void)
{
    heartbeat_flag (0);
}

int heartbeat_supervised (void)
{
    const char *path = getenv ("ELASTIC_HEARTBEAT_FILE");

    return path && *path && access (path, R_OK | W_OK) == 0;
}

int heartbeat_capacity (void)
{
    struct elastic_heartbeat *h = heartbeat_attach ();

    return h ? (int)__atomic_load_n (&h->capacity, __ATOMIC_ACQUIRE) : -1;
}

void heartbeat_world_change (uint32_t kind,
                             int64_t step,
                             int old_size,
                             int new_size,
                             int new_ranks,
                             const double *phases)
{
    struct elastic_heartbeat *h = heartbeat_attach ();
    uint32_t n;

    if (!h)
        return;
    __atomic_store_n (&h->change_kind, kind, __ATOMIC_RELAXED);
    __atomic_store_n (&h->change_step, step, __ATOMIC_RELAXED);
    __atomic_store_n (&h->change_old_size, (int32_t)old_size, __ATOMIC_RELAXED);
    __atomic_store_n (&h->change_new_size, (int32_t)new_size, __ATOMIC_RELAXED);
    __atomic_store_n (&h->change_new_ranks, (int32_t)new_ranks, __ATOMIC_RELAXED);
    for (int i = 0; i < ELASTIC_HEARTBEAT_NPHASES; i++)
        __atomic_store_n (&h->change_us[i],
                          phases[i] > 0 ? (uint64_t)(phases[i] * 1e6 + 0.5) : 0,
                          __ATOMIC_RELAXED);
    n = __atomic_load_n (&h->changes, __ATOMIC_RELAXED);
    __atomic_store_n (&h->changes, n + 1, __ATOMIC_RELEASE);
}

int elastic_progress_end (void)
{
    heartbeat_flag (ELASTIC_HEARTBEAT_ENDED);
    return ELASTIC_OK;
}

int elastic_record_error (const char *fmt, ...)
{
    const char *path = getenv ("ELASTIC_ERROR_FILE");
    char msg[4096], tmp[4096];
    va_list ap;
    FILE *f;
    int fd;

    if (!fmt)
        return ELASTIC_ERR_INVAL;
    if (!path || *path == '\0')
        path = getenv ("TORCHELASTIC_ERROR_FILE");
    if (!path || *path == '\0')
        return ELASTIC_OK;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof (msg), fmt, ap);
    va_end (ap);
    /* torchelastic's format; written to a temporary name and renamed so the
     * agent never reads half a file. */
    if (snprintf (tmp, sizeof (tmp), "%s.tmp.%d", path, (int)getpid ()) >=
        (int)sizeof (tmp))
        return ELASTIC_ERR_INVAL;
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return ELASTIC_ERR_IO;
    if (!(f = fdopen (fd, "w"))) {
        close (fd);
        unlink (tmp);
        return ELASTIC_ERR_IO;
    }
    fputs ("{\"message\": {\"message\": ", f);
    json_fputs (f, msg);
    fprintf (f,
             ", \"extraInfo\": {\"py_callstack\": \"\", \"timestamp\": \"%lld\"}}}\n",
             (long long)time (NULL));
    if (fclose (f) != 0 || rename (tmp, path) != 0) {
        unlink (tmp);
        return ELASTIC_ERR_IO;
    }
    return ELASTIC_OK;
}
