/* l3_bg.c - the background half of an L3 write: a thread that copies this
 * rank's bytes into the laid-out temporary file (pwrite, crc32, fdatasync)
 *
 * The thread calls no MPI and no HDF5 function (see l3_bg.h).  It writes
 * in pieces of PIECE bytes and checks between pieces whether it was
 * abandoned, so that a recovery never waits for more than one piece.  It
 * writes the 4 KiB-aligned middle of each extent with O_DIRECT through a
 * bounce buffer of its own (2 MiB pages): no copy into the page cache and
 * no contention on the file's lock with the other ranks' threads, which
 * were three quarters of the thread's CPU time (B6L3, doc/benchmarks.md);
 * the unaligned ends, and every byte where the file system refuses
 * O_DIRECT (tmpfs), go through the page cache as before.  It
 * runs at nice ELASTIC_PERSIST_NICE (0..19, default THREAD_NICE, the
 * ranks' own; Linux: a thread's own nice value, and with it its I/O
 * priority).  A higher value makes it take a core from a rank less often,
 * at the price of its bandwidth while the cores are busy: B6L3 measured
 * nice 10 at 12 % of dd's bandwidth and nice 0 at 95 %, and could not
 * tell their overheads apart (doc/benchmarks.md).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "l3_bg.h"
#include "l3_format.h"
#include "log.h"

#define PIECE       ((size_t)4 << 20)
#define THREAD_NICE 0
#define DIO_ALIGN   ((uint64_t)4096) /* offsets, lengths and buffer of O_DIRECT */
#define HUGE_PAGE   ((size_t)2 << 20)

struct extent {
    uint64_t off;
    const char *src;
    size_t len;
    uint64_t crc_off;
};

struct l3_bg {
    char *path;
    int64_t step;
    struct extent *x;
    int n, cap;
    void (*hook) (void *);
    void *hook_arg;
    int nice; /* the thread's nice value */

    pthread_t tid;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    enum l3_bg_phase phase; /* under mu */
    int orphan;             /* under mu: abandoned, the thread frees b */
    atomic_int abort;

    int rc;
    elastic_error_t err;
    uint64_t bytes, direct; /* data bytes written, of them with O_DIRECT */
    double t0, t_release, t_done;
};

static double now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct l3_bg *l3_bg_create (const char *path, int64_t step)
{
    struct l3_bg *b = calloc (1, sizeof (*b));

    if (!b)
        return NULL;
    if (!(b->path = strdup (path))) {
        free (b);
        return NULL;
    }
    b->step = step;
    pthread_mutex_init (&b->mu, NULL);
    pthread_cond_init (&b->cv, NULL);
    atomic_init (&b->abort, 0);
    return b;
}

int l3_bg_add (
    struct l3_bg *b, uint64_t off, const void *src, size_t len, uint64_t crc_off)
{
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 8;
        struct extent *x = realloc (b->x, (size_t)cap * sizeof (*x));
        if (!x)
            return -1;
        b->x = x;
        b->cap = cap;
    }
    b->x[b->n++] = (struct extent){off, src, len, crc_off};
    return 0;
}

void l3_bg_set_hook (struct l3_bg *b, void (*hook) (void *), void *arg)
{
    b->hook = hook;
    b->hook_arg = arg;
}

static void set_phase (struct l3_bg *b, enum l3_bg_phase p)
{
    pthread_mutex_lock (&b->mu);
    b->phase = p;
    if (p == L3_BG_FLUSHING)
        b->t_release = now () - b->t0;
    if (p == L3_BG_DONE)
        b->t_done = now () - b->t0;
    pthread_cond_broadcast (&b->cv);
    pthread_mutex_unlock (&b->mu);
}

static int pwrite_all (int fd, const void *buf, size_t len, uint64_t off)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t k = pwrite (fd, p, len, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        p += k;
        len -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/* ELASTIC_PERSIST_DIRECT=0 writes everything through the page cache (for
 * comparison; any other value or none: O_DIRECT where it can). */
static int direct_wanted (void)
{
    const char *s = getenv ("ELASTIC_PERSIST_DIRECT");
    return !(s && !strcmp (s, "0"));
}

/* Test hold: ELASTIC_TEST_L3_BG_HOLD=STEP:PATH keeps the thread writing
 * STEP, before it writes any data, waiting while PATH exists (or until
 * abandoned). */
static void test_hold (struct l3_bg *b)
{
    const char *s = getenv ("ELASTIC_TEST_L3_BG_HOLD"), *path;
    struct timespec nap = {0, 10 * 1000 * 1000};
    char *end;

    if (!s || !*s || strtoll (s, &end, 10) != b->step || *end != ':')
        return;
    path = end + 1;
    if (access (path, F_OK) != 0)
        return;
    fprintf (stderr,
             "elastic-test: pid %d holds the background L3 write of step %lld\n",
             (int)getpid (),
             (long long)b->step);
    fflush (stderr);
    while (access (path, F_OK) == 0 && !atomic_load (&b->abort))
        nanosleep (&nap, NULL);
}

/* ELASTIC_TEST_L3_PAUSE=STEP: as in l3_write, after the data, until killed. */
static void test_pause (struct l3_bg *b)
{
    const char *s = getenv ("ELASTIC_TEST_L3_PAUSE");

    if (!s || !*s || strtoll (s, NULL, 10) != b->step)
        return;
    fprintf (stderr,
             "elastic-test: pid %d paused in l3_write before the commit of step %lld\n",
             (int)getpid (),
             (long long)b->step);
    fflush (stderr);
    for (;;)
        pause ();
}

/* The bounce buffer of the O_DIRECT writes: PIECE bytes on 2 MiB pages
 * (two faults, not a thousand; a fresh 4 KiB page costs ~20 us on the PVM
 * guests the benchmarks ran on), or NULL. */
static char *bounce_alloc (void **map)
{
    size_t len = PIECE + HUGE_PAGE;
    char *p =
        mmap (NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED)
        return NULL;
    *map = p;
    p = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
#ifdef MADV_HUGEPAGE
    madvise (p, PIECE, MADV_HUGEPAGE); /* advice only */
#endif
    return p;
}

/* Write len bytes of src at off: the DIO_ALIGN-aligned middle through the
 * bounce buffer to *dfd (O_DIRECT), the rest to fd.  A refused direct
 * write (EINVAL: an alignment this file system does not take) closes *dfd
 * and the bytes go to fd. */
static int write_piece (struct l3_bg *b,
                        int fd,
                        int *dfd,
                        char *bounce,
                        const char *src,
                        size_t len,
                        uint64_t off)
{
    uint64_t a0 = (off + DIO_ALIGN - 1) / DIO_ALIGN * DIO_ALIGN;
    uint64_t a1 = (off + len) / DIO_ALIGN * DIO_ALIGN;

    if (*dfd < 0 || !bounce || a1 <= a0)
        return pwrite_all (fd, src, len, off);
    if (a0 > off && pwrite_all (fd, src, (size_t)(a0 - off), off) < 0)
        return -1;
    memcpy (bounce, src + (a0 - off), (size_t)(a1 - a0));
    if (pwrite_all (*dfd, bounce, (size_t)(a1 - a0), a0) < 0) {
        if (errno != EINVAL)
            return -1;
        close (*dfd);
        *dfd = -1;
        if (pwrite_all (fd, src + (a0 - off), (size_t)(a1 - a0), a0) < 0)
            return -1;
    } else
        b->direct += a1 - a0;
    if (off + len > a1 &&
        pwrite_all (fd, src + (a1 - off), (size_t)(off + len - a1), a1) < 0)
        return -1;
    return 0;
}

/* Write every extent; the source is released on return.  Pieces are cut at
 * multiples of PIECE in the file, so that only an extent's two ends are
 * unaligned. */
static int write_extents (struct l3_bg *b, int fd, int *dfd, char *bounce)
{
    for (int i = 0; i < b->n; i++) {
        const struct extent *x = &b->x[i];
        uint32_t crc = 0;
        uint64_t crc64;

        for (size_t done = 0, k; done < x->len; done += k) {
            uint64_t at = x->off + done;
            k = (size_t)(PIECE - at % PIECE);
            if (k > x->len - done)
                k = x->len - done;
            if (atomic_load (&b->abort))
                return errcodef (&b->err,
                                 ELASTIC_ERR_IO,
                                 "the background write of '%s' was abandoned",
                                 b->path);
            crc = l3_crc32 (crc, x->src + done, k);
            if (write_piece (b, fd, dfd, bounce, x->src + done, k, at) < 0)
                return errcodef (&b->err,
                                 ELASTIC_ERR_IO,
                                 "cannot write %zu bytes to '%s' at offset %llu: %s",
                                 k,
                                 b->path,
                                 (unsigned long long)at,
                                 strerror (errno));
            b->bytes += k;
        }
        crc64 = crc;
        if (pwrite_all (fd, &crc64, sizeof (crc64), x->crc_off) < 0)
            return errcodef (&b->err,
                             ELASTIC_ERR_IO,
                             "cannot write a checksum to '%s': %s",
                             b->path,
                             strerror (errno));
    }
    return ELASTIC_OK;
}

static void bg_free (struct l3_bg *b)
{
    pthread_mutex_destroy (&b->mu);
    pthread_cond_destroy (&b->cv);
    free (b->x);
    free (b->path);
    free (b);
}

static void *run (void *arg)
{
    struct l3_bg *b = arg;
    int fd, orphan;

#ifdef SYS_gettid
    if (b->started && b->nice > 0) /* not l3_bg_start's fallback */
        (void)setpriority (PRIO_PROCESS, (id_t)syscall (SYS_gettid), b->nice);
#endif
    test_hold (b);
    if ((fd = open (b->path, O_WRONLY | O_CLOEXEC)) < 0)
        b->rc = errcodef (
            &b->err, ELASTIC_ERR_IO, "cannot open '%s': %s", b->path, strerror (errno));
    else {
        void *map = NULL;
        char *bounce = direct_wanted () ? bounce_alloc (&map) : NULL;
        /* EINVAL where the file system has no O_DIRECT (tmpfs): fd only */
        int dfd = bounce ? open (b->path, O_WRONLY | O_CLOEXEC | O_DIRECT) : -1;
        b->rc = write_extents (b, fd, &dfd, bounce);
        if (dfd >= 0 && close (dfd) < 0 && b->rc == ELASTIC_OK)
            b->rc = errcodef (&b->err,
                              ELASTIC_ERR_IO,
                              "cannot close '%s': %s",
                              b->path,
                              strerror (errno));
        if (map)
            munmap (map, PIECE + HUGE_PAGE);
    }
    set_phase (b, L3_BG_FLUSHING); /* the source is no longer read */
    if (fd >= 0 && b->rc == ELASTIC_OK && !atomic_load (&b->abort)) {
        test_pause (b);
        if (b->hook)
            b->hook (b->hook_arg);
        if (fdatasync (fd) < 0)
            b->rc = errcodef (&b->err,
                              ELASTIC_ERR_IO,
                              "cannot flush '%s': %s",
                              b->path,
                              strerror (errno));
    }
    if (fd >= 0 && close (fd) < 0 && b->rc == ELASTIC_OK)
        b->rc = errcodef (
            &b->err, ELASTIC_ERR_IO, "cannot close '%s': %s", b->path, strerror (errno));
    /* the orphan check and the end are one step: l3_bg_abandon decides
     * under the same lock whether it joins or leaves b to this thread */
    pthread_mutex_lock (&b->mu);
    orphan = b->orphan;
    if (!orphan) {
        b->phase = L3_BG_DONE;
        b->t_done = now () - b->t0;
        pthread_cond_broadcast (&b->cv);
    }
    pthread_mutex_unlock (&b->mu);
    if (orphan)
        bg_free (b); /* abandoned and detached: nobody waits for this */
    return NULL;
}

/* ELASTIC_PERSIST_NICE, or THREAD_NICE (a bad value: one warning). */
static int thread_nice (void)
{
    static int warned;
    const char *s = getenv ("ELASTIC_PERSIST_NICE");
    char *end;
    long v;

    if (!s)
        return THREAD_NICE;
    v = strtol (s, &end, 10);
    if (*s && !*end && v >= 0 && v <= 19)
        return (int)v;
    if (!warned++)
        el_log (EL_WARN,
                "ELASTIC_PERSIST_NICE: '%s' is invalid (expected an integer from 0 to "
                "19); using %d",
                s,
                THREAD_NICE);
    return THREAD_NICE;
}

void l3_bg_start (struct l3_bg *b)
{
    sigset_t all, old;
    int e;

    b->nice = thread_nice ();
    sigfillset (&all);
    pthread_sigmask (SIG_SETMASK, &all, &old); /* inherited by the thread */
    b->t0 = now ();
    b->phase = L3_BG_WRITING;
    b->started = 1; /* before the thread reads it */
    e = pthread_create (&b->tid, NULL, run, b);
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    if (e == 0)
        return;
    b->started = 0;
    el_log (EL_WARN,
            "cannot start the background L3 writer (%s): writing step %lld here",
            strerror (e),
            (long long)b->step);
    run (b); /* not started: the waits return at once */
}

enum l3_bg_phase l3_bg_phase (struct l3_bg *b)
{
    enum l3_bg_phase p;

    pthread_mutex_lock (&b->mu);
    p = b->phase;
    pthread_mutex_unlock (&b->mu);
    return p;
}

void l3_bg_wait (struct l3_bg *b, enum l3_bg_phase p)
{
    pthread_mutex_lock (&b->mu);
    while (b->started && b->phase < p)
        pthread_cond_wait (&b->cv, &b->mu);
    pthread_mutex_unlock (&b->mu);
}

int l3_bg_result (struct l3_bg *b, uint64_t *bytes, elastic_error_t *err)
{
    if (bytes)
        *bytes = b->bytes;
    if (b->rc != ELASTIC_OK && err)
        *err = b->err;
    return b->rc;
}

uint64_t l3_bg_direct (struct l3_bg *b)
{
    return b->direct;
}

void l3_bg_times (struct l3_bg *b, double *t_release, double *t_done)
{
    *t_release = b->t_release;
    *t_done = b->t_done;
}

void l3_bg_abandon (struct l3_bg *b)
{
    int detach = 0;

    if (!b)
        return;
    if (!b->started) {
        bg_free (b);
        return;
    }
    atomic_store (&b->abort, 1);
    pthread_mutex_lock (&b->mu);
    while (b->phase < L3_BG_FLUSHING)
        pthread_cond_wait (&b->cv, &b->mu);
    if (b->phase < L3_BG_DONE) {
        b->orphan = 1; /* the flush goes on: the thread frees b */
        detach = 1;
    }
    pthread_mutex_unlock (&b->mu);
    if (detach) {
        pthread_detach (b->tid);
        return;
    }
    pthread_join (b->tid, NULL);
    bg_free (b);
}

void l3_bg_destroy (struct l3_bg *b)
{
    if (!b)
        return;
    if (b->started) {
        l3_bg_wait (b, L3_BG_DONE);
        pthread_join (b->tid, NULL);
    }
    bg_free (b);
}

/* --- retention's unlinks, in the background ---------------------------- */

struct l3_reaper {
    char **path;
    int n, cap;
};

static pthread_t reaper_tid;
static int reaper_running;

struct l3_reaper *l3_reaper_create (void)
{
    return calloc (1, sizeof (struct l3_reaper));
}

static void reaper_free (struct l3_reaper *r)
{
    for (int i = 0; i < r->n; i++)
        free (r->path[i]);
    free (r->path);
    free (r);
}

int l3_reaper_retire (const char *path, void *reaper)
{
    struct l3_reaper *r = reaper;
    const char *base = strrchr (path, '/');
    size_t dlen = base ? (size_t)(base - path + 1) : 0;
    char *tmp;

    base = base ? base + 1 : path;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        char **p = realloc (r->path, (size_t)cap * sizeof (*p));
        if (!p)
            return unlink (path);
        r->path = p;
        r->cap = cap;
    }
    /* dir/snap-S.h5 -> dir/.snap-S.h5.tmp, the temporary name of its step */
    if (asprintf (&tmp, "%.*s.%s.tmp", (int)dlen, path, base) < 0)
        return unlink (path);
    if (rename (path, tmp) < 0) {
        int saved = errno;
        free (tmp);
        errno = saved;
        return -1;
    }
    r->path[r->n++] = tmp;
    return 0;
}

static void *reaper_main (void *arg)
{
    struct l3_reaper *r = arg;

    for (int i = 0; i < r->n; i++)
        (void)unlink (r->path[i]);
    reaper_free (r);
    return NULL;
}

void l3_reaper_wait (void)
{
    if (reaper_running) {
        pthread_join (reaper_tid, NULL);
        reaper_running = 0;
    }
}

void l3_reaper_start (struct l3_reaper *r)
{
    sigset_t all, old;
    int rc;

    if (!r)
        return;
    l3_reaper_wait ();
    if (r->n == 0) {
        reaper_free (r);
        return;
    }
    sigfillset (&all);
    pthread_sigmask (SIG_SETMASK, &all, &old); /* inherited by the thread */
    rc = pthread_create (&reaper_tid, NULL, reaper_main, r);
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    if (rc != 0)
        reaper_main (r); /* no thread: here and now */
    else
        reaper_running = 1;
}
