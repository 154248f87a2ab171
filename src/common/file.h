/* file.h - files and paths: mkdir -p, rm -rf, whole writes and reads */
#ifndef ELASTIC_COMMON_FILE_H
#define ELASTIC_COMMON_FILE_H

#include <stddef.h>

/* mkdir -p with mode 0755.  Returns 0, or -1 with errno. */
int mkdir_p (const char *path);

/* rm -rf of a directory tree (no symlink following).  Returns 0 or -1. */
int remove_tree (const char *path);

/* Write all of buf to fd, retrying on EINTR and short writes.  Returns 0 or
 * -1 with errno. */
int write_all (int fd, const void *buf, size_t len);

/* Read a whole (small) file into a malloc'ed NUL-terminated buffer of at
 * most max bytes.  Returns NULL with errno (EFBIG when larger). */
char *read_file (const char *path, size_t max, size_t *lenp);

/* snprintf for paths: returns 0, or -1 with errno ENAMETOOLONG when the
 * result does not fit. */
int pathfmt (char *buf, size_t size, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

#endif /* ELASTIC_COMMON_FILE_H */
