/* output.c - a worker's stdout or stderr, routed line by line */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#include "output.h"
#include "util.h"

#define OSTREAM_BUF (64 * 1024)

struct ostream {
    int rfd;
    int file_fd;
    int console_fd;
    int dup_fd;
    char *const *filters;
    int nfilters;
    char prefix[256];
    size_t prefix_len;
    int raw; /* no prefix, no filters: the bytes pass unchanged (whole lines
                still, so that workers sharing a console do not mix theirs;
                a partial line gets no newline added) */
    char buf[OSTREAM_BUF];
    size_t len;
};

struct ostream *ostream_create (int rfd,
                                int file_fd,
                                int console_fd,
                                int dup_fd,
                                char *const *filters,
                                int nfilters,
                                const char *prefix)
{
    struct ostream *s;

    if (!(s = calloc (1, sizeof (*s))))
        return NULL;
    s->rfd = rfd;
    s->file_fd = file_fd;
    s->console_fd = console_fd;
    s->dup_fd = dup_fd;
    s->filters = filters;
    s->nfilters = nfilters;
    if (prefix)
        strncpy (s->prefix, prefix, sizeof (s->prefix) - 1);
    s->prefix_len = strlen (s->prefix);
    s->raw = s->prefix_len == 0 && (dup_fd < 0 || nfilters == 0);
    return s;
}

int output_pty (int *master, int *slave)
{
    struct termios t;
    char name[64];
    int m, sl = -1;

    if ((m = posix_openpt (O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
        return -1;
    if (grantpt (m) < 0 || unlockpt (m) < 0 || ptsname_r (m, name, sizeof (name)) != 0 ||
        (sl = open (name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
        goto error;
    /* raw: the bytes pass unchanged (no "\r\n", no echo, no line editing,
     * no signals from control characters) */
    if (tcgetattr (sl, &t) < 0)
        goto error;
    cfmakeraw (&t);
    if (tcsetattr (sl, TCSANOW, &t) < 0)
        goto error;
    if (fcntl (m, F_SETFL, fcntl (m, F_GETFL) | O_NONBLOCK) < 0)
        goto error;
    *master = m;
    *slave = sl;
    return 0;
error : {
    int saved = errno;
    if (sl >= 0)
        close (sl);
    close (m);
    errno = saved;
    return -1;
}
}

int ostream_fd (struct ostream *s)
{
    return s->rfd;
}

/* writev all of a prefix and a line; give up quietly if the console is gone */
static void write_prefixed (
    int fd, const char *prefix, size_t plen, const char *line, size_t len, int add_nl)
{
    struct iovec iov[3] = {
        {(void *)prefix, plen},
        {(void *)line, len},
        {(void *)"\n", add_nl ? 1 : 0},
    };
    int i = 0;

    while (i < 3) {
        ssize_t n = writev (fd, iov + i, 3 - i);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        while (i < 3 && (size_t)n >= iov[i].iov_len) {
            n -= (ssize_t)iov[i].iov_len;
            i++;
        }
        if (i < 3) {
            iov[i].iov_base = (char *)iov[i].iov_base + n;
            iov[i].iov_len -= (size_t)n;
        }
    }
}

static int matches (struct ostream *s, const char *line, size_t len)
{
    for (int i = 0; i < s->nfilters; i++) {
        size_t fl = strlen (s->filters[i]);
        if (fl == 0 || fl > len)
            continue;
        if (memmem (line, len, s->filters[i], fl))
            return 1;
    }
    return 0;
}

/* Route one line (len bytes, including its newline if complete). */
static void route (struct ostream *s, const char *line, size_t len, int complete)
{
    if (s->file_fd >= 0)
        (void)write_all (s->file_fd, line, len);
    if (s->console_fd >= 0)
        write_prefixed (
            s->console_fd, s->prefix, s->prefix_len, line, len, !complete && !s->raw);
    if (s->dup_fd >= 0 && matches (s, line, len))
        write_prefixed (s->dup_fd, s->prefix, s->prefix_len, line, len, !complete);
}

int ostream_read (struct ostream *s, int budget)
{
    for (int reads = 0; budget <= 0 || reads < budget; reads++) {
        ssize_t n = read (s->rfd, s->buf + s->len, sizeof (s->buf) - s->len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EIO)
                return 0; /* a pty whose worker side is closed, and read out */
            return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
        }
        if (n == 0)
            return 0;
        s->len += (size_t)n;
        char *start = s->buf, *nl;
        while ((nl = memchr (start, '\n', s->len - (size_t)(start - s->buf)))) {
            route (s, start, (size_t)(nl - start) + 1, 1);
            start = nl + 1;
        }
        s->len -= (size_t)(start - s->buf);
        if (s->len == sizeof (s->buf)) {
            /* a line longer than the buffer: pass it on in pieces */
            route (s, s->buf, s->len, 0);
            s->len = 0;
        } else if (start != s->buf)
            memmove (s->buf, start, s->len);
    }
    return 1;
}

void ostream_destroy (struct ostream *s)
{
    int saved = errno;

    if (s) {
        if (s->rfd >= 0) {
            (void)ostream_read (s, 0);
            close (s->rfd);
        }
        if (s->len > 0)
            route (s, s->buf, s->len, 0);
        if (s->file_fd >= 0)
            close (s->file_fd);
        free (s);
    }
    errno = saved;
}
