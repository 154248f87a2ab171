/* l3_dir.c - the L3 snapshot directory: names, listing, commit, retention */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "l3_dir.h"
#include "l3_format.h"

void l3_snap_name (char *buf, size_t len, int64_t step, int temporary)
{
    snprintf (buf,
              len,
              temporary ? ".snap-%012" PRId64 ".h5.tmp" : "snap-%012" PRId64 ".h5",
              step);
}

/* Parse "snap-DIGITS.h5" or ".snap-DIGITS.h5.tmp".  0 on a match. */
static int parse_name (const char *name, int64_t *step, int *temporary)
{
    const char *p = name, *digits;
    int64_t v = 0;

    *temporary = 0;
    if (*p == '.') {
        *temporary = 1;
        p++;
    }
    if (strncmp (p, "snap-", 5) != 0)
        return -1;
    p += 5;
    digits = p;
    while (*p >= '0' && *p <= '9') {
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*p++ - '0');
    }
    if (p == digits || p - digits > 19)
        return -1;
    if (strcmp (p, *temporary ? ".h5.tmp" : ".h5") != 0)
        return -1;
    *step = v;
    return 0;
}

static int cmp_entry (const void *a, const void *b)
{
    const struct l3_entry *x = a, *y = b;

    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->temporary != y->temporary)
        return x->temporary - y->temporary;
    return strcmp (x->name, y->name);
}

void l3_dir_free (struct l3_entry *e, int n)
{
    if (!e)
        return;
    int saved = errno;
    for (int i = 0; i < n; i++) {
        free (e[i].name);
        free (e[i].path);
    }
    free (e);
    errno = saved;
}

int l3_dir_list (const char *dir, struct l3_entry **out, int *n, elastic_error_t *err)
{
    DIR *d;
    struct dirent *de;
    struct l3_entry *v = NULL;
    int count = 0, cap = 0;

    if (!(d = opendir (dir))) {
        errprintf (err, "cannot read directory '%s': %s", dir, strerror (errno));
        return -1;
    }
    while ((de = readdir (d))) {
        struct l3_entry e = {0};
        struct stat sb;

        if (parse_name (de->d_name, &e.step, &e.temporary) < 0)
            continue;
        if (count == cap) {
            struct l3_entry *nv;
            cap = cap ? 2 * cap : 16;
            if (!(nv = realloc (v, sizeof (*v) * (size_t)cap)))
                goto nomem;
            v = nv;
        }
        if (!(e.name = strdup (de->d_name)) ||
            asprintf (&e.path, "%s/%s", dir, de->d_name) < 0) {
            free (e.name);
            goto nomem;
        }
        e.size = stat (e.path, &sb) == 0 ? sb.st_size : -1;
        v[count++] = e;
    }
    closedir (d);
    if (count > 0)
        qsort (v, (size_t)count, sizeof (*v), cmp_entry);
    *out = v;
    *n = count;
    return 0;
nomem:
    errprintf (err, "out of memory listing '%s'", dir);
    closedir (d);
    l3_dir_free (v, count);
    return -1;
}

int l3_mkdir_p (const char *dir)
{
    char *p, *s;
    struct stat sb;

    if (stat (dir, &sb) == 0) {
        if (S_ISDIR (sb.st_mode))
            return 0;
        errno = ENOTDIR;
        return -1;
    }
    if (!(s = strdup (dir)))
        return -1;
    for (p = s + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir (s, 0777) < 0 && errno != EEXIST) {
            int saved = errno;
            free (s);
            errno = saved;
            return -1;
        }
        *p = '/';
    }
    free (s);
    if (mkdir (dir, 0777) < 0 && errno != EEXIST)
        return -1;
    if (stat (dir, &sb) < 0)
        return -1;
    if (!S_ISDIR (sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int l3_dir_clean (const char *dir, elastic_error_t *err)
{
    struct l3_entry *e;
    int n, removed = 0;

    if (l3_dir_list (dir, &e, &n, err) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (e[i].temporary && unlink (e[i].path) == 0)
            removed++;
    l3_dir_free (e, n);
    return removed;
}

static int fsync_path (const char *path, int flags)
{
    int fd, rc;

    if ((fd = open (path, O_RDONLY | O_CLOEXEC | flags)) < 0)
        return -1;
    rc = fsync (fd);
    if (rc < 0 && errno == EINVAL) /* a file system without fsync (a pipe?) */
        rc = 0;
    if (close (fd) < 0 && rc == 0)
        rc = -1;
    return rc;
}

/* Release the blocks reserved beyond the end of the file (the writer's
 * fallocate with FALLOC_FL_KEEP_SIZE) and fsync it. */
static int sync_file (const char *path)
{
    struct stat sb;
    int fd, rc = -1;

    if ((fd = open (path, O_WRONLY | O_CLOEXEC)) < 0)
        return -1;
    if (fstat (fd, &sb) == 0 && ftruncate (fd, sb.st_size) == 0 && fsync (fd) == 0)
        rc = 0;
    if (close (fd) < 0)
        rc = -1;
    return rc;
}

int l3_dir_commit (const char *dir, int64_t step, elastic_error_t *err)
{
    char name[64], tmp[PATH_MAX], final[PATH_MAX], link_tmp[PATH_MAX], link[PATH_MAX];

    l3_snap_name (name, sizeof (name), step, 1);
    snprintf (tmp, sizeof (tmp), "%s/%s", dir, name);
    l3_snap_name (name, sizeof (name), step, 0);
    snprintf (final, sizeof (final), "%s/%s", dir, name);
    if (sync_file (tmp) < 0) {
        errprintf (err, "cannot sync '%s': %s", tmp, strerror (errno));
        return -1;
    }
    if (rename (tmp, final) < 0) {
        errprintf (err, "cannot rename '%s' to '%s': %s", tmp, name, strerror (errno));
        return -1;
    }
    if (fsync_path (dir, O_DIRECTORY) < 0) {
        errprintf (err, "cannot sync directory '%s': %s", dir, strerror (errno));
        return -1;
    }
    snprintf (link_tmp, sizeof (link_tmp), "%s/.latest.tmp", dir);
    snprintf (link, sizeof (link), "%s/latest", dir);
    (void)unlink (link_tmp);
    if (symlink (name, link_tmp) < 0 || rename (link_tmp, link) < 0) {
        errprintf (err, "committed, but cannot update '%s': %s", link, strerror (errno));
        (void)unlink (link_tmp);
        return 1;
    }
    (void)fsync_path (dir, O_DIRECTORY);
    return 0;
}

/* Remove dir/latest if it no longer points at a file. */
static void latest_check (const char *dir)
{
    char link[PATH_MAX];
    struct stat sb;

    snprintf (link, sizeof (link), "%s/latest", dir);
    if (lstat (link, &sb) == 0 && S_ISLNK (sb.st_mode) && stat (link, &sb) < 0 &&
        errno == ENOENT)
        (void)unlink (link);
}

enum { OURS, UNREADABLE, OTHER_RUN };

/* The run ids classify() read, by the file's identity: opening a file
 * with HDF5 and loading its catalog costs 0.4 ms or more, and every commit
 * prunes the whole directory, so without it a run's own files were read
 * again at each commit (all of them where nothing is removed: --keep 0).
 * A file that is replaced or written to gets another identity (inode,
 * size, modification time).  Only readable files are remembered: an
 * unreadable one may still be being written. */
#define SEEN_MAX 256

static struct seen {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    char run_id[sizeof (((struct l3_header *)0)->run_id)];
} seen[SEEN_MAX];
static int nseen, seen_next;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static int same_file (const struct seen *e, const struct stat *sb)
{
    return e->dev == sb->st_dev && e->ino == sb->st_ino && e->size == sb->st_size &&
           e->mtime.tv_sec == sb->st_mtim.tv_sec &&
           e->mtime.tv_nsec == sb->st_mtim.tv_nsec;
}

static int class_of (int readable, const char *file_run, const char *run_id)
{
    if (!readable)
        return UNREADABLE;
    return !run_id || !strcmp (file_run, run_id) ? OURS : OTHER_RUN;
}

static int classify (const char *path, const char *run_id)
{
    struct l3_h5quiet q;
    struct l3_catalog *c = NULL;
    struct stat sb;
    struct seen e = {0};
    int kind, readable = 0, have = stat (path, &sb) == 0;
    hid_t f;

    if (have) {
        pthread_mutex_lock (&seen_lock);
        for (int i = 0; i < nseen; i++) {
            if (same_file (&seen[i], &sb)) {
                int cls = class_of (1, seen[i].run_id, run_id);
                pthread_mutex_unlock (&seen_lock);
                return cls;
            }
        }
        pthread_mutex_unlock (&seen_lock);
    }
    l3_h5quiet_begin (&q);
    if ((f = l3_file_open_serial (path, &kind, NULL)) >= 0) {
        if (l3_catalog_load (f, &c, NULL) == L3_GOOD) {
            readable = 1;
            snprintf (e.run_id, sizeof (e.run_id), "%s", c->hdr.run_id);
            l3_catalog_destroy (c);
        }
        H5Fclose (f);
    }
    l3_h5quiet_end (&q);
    if (have && readable) {
        e.dev = sb.st_dev;
        e.ino = sb.st_ino;
        e.size = sb.st_size;
        e.mtime = sb.st_mtim;
        pthread_mutex_lock (&seen_lock);
        seen[seen_next] = e;
        seen_next = (seen_next + 1) % SEEN_MAX;
        if (nseen < SEEN_MAX)
            nseen++;
        pthread_mutex_unlock (&seen_lock);
    }
    return class_of (readable, e.run_id, run_id);
}

int l3_dir_prune (const char *dir,
                  int keep,
                  const char *run_id,
                  int64_t newest_step,
                  l3_unlink_f unlink_fn,
                  l3_removed_f removed,
                  void *arg,
                  elastic_error_t *err)
{
    struct l3_entry *e;
    int n, count = 0, kept = 0;
    int *cls = NULL;
    int64_t cutoff = -1;
    char reason[128];

    if (l3_dir_list (dir, &e, &n, err) < 0)
        return -1;
    if (n > 0 && !(cls = calloc ((size_t)n, sizeof (*cls)))) {
        errprintf (err, "out of memory");
        l3_dir_free (e, n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        cls[i] = e[i].temporary ? OTHER_RUN : classify (e[i].path, run_id);
    for (int i = n - 1; i >= 0; i--) {
        if (cls[i] == OTHER_RUN)
            continue;
        if (newest_step >= 0 && e[i].step > newest_step) {
            snprintf (reason,
                      sizeof (reason),
                      "step %lld is after the newest committed step %lld",
                      (long long)e[i].step,
                      (long long)newest_step);
        } else if (cutoff >= 0 && e[i].step < cutoff) {
            snprintf (reason, sizeof (reason), "older than the newest %d", keep);
        } else {
            if (cls[i] == OURS && keep > 0 && ++kept == keep)
                cutoff = e[i].step;
            continue;
        }
        if ((unlink_fn ? unlink_fn (e[i].path, arg) : unlink (e[i].path)) == 0) {
            count++;
            if (removed)
                removed (e[i].path, reason, arg);
        }
    }
    latest_check (dir);
    free (cls);
    l3_dir_free (e, n);
    return count;
}

int l3_dir_newest (const char *dir,
                   const char *run_id,
                   int64_t *step,
                   elastic_error_t *err)
{
    struct l3_entry *e;
    struct stat sb;
    int n, found = 0;

    if (stat (dir, &sb) < 0 && errno == ENOENT)
        return 0;
    if (l3_dir_list (dir, &e, &n, err) < 0)
        return -1;
    for (int i = n - 1; i >= 0 && !found; i--) {
        if (!e[i].temporary && classify (e[i].path, run_id) == OURS) {
            *step = e[i].step;
            found = 1;
        }
    }
    l3_dir_free (e, n);
    return found;
}

int l3_file_run_id (const char *path, char *buf, size_t len)
{
    struct l3_h5quiet q;
    struct l3_catalog *c = NULL;
    int kind, found = 0;
    hid_t f;
    struct stat sb;

    if (stat (path, &sb) < 0)
        return 0;
    l3_h5quiet_begin (&q);
    if ((f = l3_file_open_serial (path, &kind, NULL)) >= 0) {
        if (l3_catalog_load (f, &c, NULL) == L3_GOOD) {
            snprintf (buf, len, "%s", c->hdr.run_id);
            found = 1;
            l3_catalog_destroy (c);
        }
        H5Fclose (f);
    }
    l3_h5quiet_end (&q);
    return found;
}
