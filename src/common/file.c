/* file.c - files and paths (see file.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

int mkdir_p (const char *path)
{
    char tmp[PATH_MAX];
    size_t len = strlen (path);

    if (len == 0 || len >= sizeof (tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy (tmp, path, len + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir (tmp, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir (tmp, 0755) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static int remove_at (int parent, const char *name)
{
    struct stat st;
    int fd, rc = 0;
    DIR *d;
    struct dirent *e;

    if (fstatat (parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR (st.st_mode))
        return unlinkat (parent, name, 0);
    if ((fd = openat (parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return -1;
    if (!(d = fdopendir (fd))) {
        close (fd);
        return -1;
    }
    while ((e = readdir (d))) {
        if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
            continue;
        if (remove_at (dirfd (d), e->d_name) < 0)
            rc = -1;
    }
    closedir (d);
    if (unlinkat (parent, name, AT_REMOVEDIR) < 0)
        rc = -1;
    return rc;
}

int remove_tree (const char *path)
{
    return remove_at (AT_FDCWD, path);
}

int write_all (int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write (fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

char *read_file (const char *path, size_t max, size_t *lenp)
{
    char *buf = NULL;
    size_t len = 0;
    int fd, saved;

    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return NULL;
    if (!(buf = malloc (max + 1)))
        goto error;
    for (;;) {
        ssize_t n = read (fd, buf + len, max + 1 - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto error;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max) {
            errno = EFBIG;
            goto error;
        }
    }
    close (fd);
    buf[len] = '\0';
    if (lenp)
        *lenp = len;
    return buf;
error:
    saved = errno;
    free (buf);
    close (fd);
    errno = saved;
    return NULL;
}

int pathfmt (char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start (ap, fmt);
    n = vsnprintf (buf, size, fmt, ap);
    va_end (ap);
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}
