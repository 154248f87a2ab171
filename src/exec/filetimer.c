/* filetimer.c - torchelastic's file-based watchdog timer, server side */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "filetimer.h"

#define FT_MAX_TIMERS 4096
#define FT_LINE_MAX   4096 /* PIPE_BUF: torchelastic's client limit */

struct timer {
    pid_t pid;
    int signum;
    double expiration;
    char scope[128];
};

struct filetimer {
    char path[PATH_MAX];
    int fd;
    struct timer t[FT_MAX_TIMERS];
    int n;
    char buf[FT_LINE_MAX * 2];
    size_t len;
    int discarding; /* inside an oversized line */
};

struct filetimer *filetimer_create (const char *path, elastic_error_t *err)
{
    struct filetimer *ft;
    struct stat st;

    if (!(ft = calloc (1, sizeof (*ft)))) {
        errprintf (err, "file timer: out of memory");
        return NULL;
    }
    ft->fd = -1;
    if (snprintf (ft->path, sizeof (ft->path), "%s", path) >= (int)sizeof (ft->path)) {
        errprintf (err, "file timer: path too long: %s", path);
        goto error;
    }
    if (lstat (path, &st) == 0) {
        if (!S_ISFIFO (st.st_mode) && !S_ISREG (st.st_mode)) {
            errprintf (err, "file timer: %s exists and is not a FIFO or a file", path);
            goto error;
        }
        unlink (path);
    }
    if (mkfifo (path, 0600) < 0) {
        errprintf (err, "file timer: mkfifo %s: %s", path, strerror (errno));
        goto error;
    }
    /* O_RDWR keeps a writer open, so the FIFO never reports EOF between
     * clients and opening never blocks. */
    if ((ft->fd = open (path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
        errprintf (err, "file timer: open %s: %s", path, strerror (errno));
        unlink (path);
        goto error;
    }
    return ft;
error:
    filetimer_destroy (ft);
    return NULL;
}

void filetimer_destroy (struct filetimer *ft)
{
    int saved = errno;

    if (ft) {
        if (ft->fd >= 0) {
            close (ft->fd);
            unlink (ft->path);
        }
        free (ft);
    }
    errno = saved;
}

int filetimer_fd (struct filetimer *ft)
{
    return ft->fd;
}

static struct timer *lookup (struct filetimer *ft, pid_t pid, const char *scope)
{
    for (int i = 0; i < ft->n; i++)
        if (ft->t[i].pid == pid && strcmp (ft->t[i].scope, scope) == 0)
            return &ft->t[i];
    return NULL;
}

static void remove_at (struct filetimer *ft, int i)
{
    ft->t[i] = ft->t[--ft->n];
}

static int apply_line (struct filetimer *ft, const char *line, size_t len)
{
    json_error_t jerr;
    json_t *o, *jpid, *jscope, *jexp, *jsig;
    struct timer *t;
    const char *scope;
    double exp;
    long long pid;
    int sig;
    /* the line is not NUL-terminated: show at most its first 80 bytes */
    int shown = len < 80 ? (int)len : 80;

    if (len == 0)
        return 0;
    if (!(o = json_loadb (line, len, 0, &jerr)) || !json_is_object (o)) {
        log_warn (
            "file timer: dropped a request that is not a JSON object: %.*s", shown, line);
        json_decref (o);
        return 0;
    }
    jpid = json_object_get (o, "pid");
    jscope = json_object_get (o, "scope_id");
    jexp = json_object_get (o, "expiration_time");
    jsig = json_object_get (o, "signal");
    if (!json_is_integer (jpid) || !json_is_string (jscope) || !json_is_number (jexp) ||
        (jsig && !json_is_integer (jsig))) {
        log_warn (
            "file timer: dropped a request without pid/scope_id/expiration_time: %.*s",
            shown,
            line);
        json_decref (o);
        return 0;
    }
    pid = json_integer_value (jpid);
    scope = json_string_value (jscope);
    exp = json_number_value (jexp);
    sig = jsig ? (int)json_integer_value (jsig) : 0;
    if (pid <= 0 || pid > INT_MAX || strlen (scope) >= sizeof (t->scope) || sig < 0 ||
        sig >= NSIG) {
        log_warn ("file timer: dropped a request with a bad pid, scope or signal: %.*s",
                  shown,
                  line);
        json_decref (o);
        return 0;
    }
    t = lookup (ft, (pid_t)pid, scope);
    if (exp < 0) {
        if (t)
            remove_at (ft, (int)(t - ft->t));
    } else if (t) {
        t->expiration = exp;
        t->signum = sig;
    } else if (ft->n < FT_MAX_TIMERS) {
        t = &ft->t[ft->n++];
        t->pid = (pid_t)pid;
        t->signum = sig;
        t->expiration = exp;
        snprintf (t->scope, sizeof (t->scope), "%s", scope);
    } else
        log_warn ("file timer: %d timers armed; dropped scope '%s' of pid %lld",
                  FT_MAX_TIMERS,
                  scope,
                  pid);
    json_decref (o);
    return 1;
}

int filetimer_read (struct filetimer *ft)
{
    int applied = 0;

    /* bounded, so that a flood of requests cannot starve the agent's loop */
    for (int reads = 0; reads < 64; reads++) {
        ssize_t n = read (ft->fd, ft->buf + ft->len, sizeof (ft->buf) - ft->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ft->len += (size_t)n;
        char *start = ft->buf, *nl;
        while ((nl = memchr (start, '\n', ft->len - (size_t)(start - ft->buf)))) {
            if (ft->discarding)
                ft->discarding = 0;
            else
                applied += apply_line (ft, start, (size_t)(nl - start));
            start = nl + 1;
        }
        ft->len -= (size_t)(start - ft->buf);
        memmove (ft->buf, start, ft->len);
        if (ft->len > FT_LINE_MAX) {
            if (!ft->discarding)
                log_warn ("file timer: dropped a request longer than %d bytes",
                          FT_LINE_MAX);
            ft->discarding = 1;
            ft->len = 0;
        }
    }
    return applied;
}

double filetimer_next (struct filetimer *ft)
{
    double next = 0;

    for (int i = 0; i < ft->n; i++)
        if (next == 0 || ft->t[i].expiration < next)
            next = ft->t[i].expiration;
    return next;
}

void filetimer_clear_pid (struct filetimer *ft, pid_t pid)
{
    for (int i = 0; i < ft->n;) {
        if (ft->t[i].pid == pid)
            remove_at (ft, i);
        else
            i++;
    }
}

void filetimer_clear (struct filetimer *ft)
{
    ft->n = 0;
}

int filetimer_count (struct filetimer *ft)
{
    return ft->n;
}

int filetimer_expire (struct filetimer *ft,
                      double now,
                      struct filetimer_expired *out,
                      int max)
{
    int count = 0;

    while (count < max) {
        pid_t pid = 0;
        int best = -1;
        /* the next pid with an expired timer */
        for (int i = 0; i < ft->n; i++) {
            if (ft->t[i].expiration <= now) {
                pid = ft->t[i].pid;
                break;
            }
        }
        if (pid == 0)
            break;
        /* its earliest expired timer that carries a signal */
        for (int i = 0; i < ft->n; i++) {
            struct timer *t = &ft->t[i];
            if (t->pid != pid || t->expiration > now || t->signum <= 0)
                continue;
            if (best < 0 || t->expiration < ft->t[best].expiration)
                best = i;
        }
        if (best >= 0) {
            out[count].pid = pid;
            out[count].signum = ft->t[best].signum;
            out[count].expiration = ft->t[best].expiration;
            snprintf (
                out[count].scope, sizeof (out[count].scope), "%s", ft->t[best].scope);
            count++;
        } else
            log_info ("file timer: pid %d expired with no signal; not killed", (int)pid);
        filetimer_clear_pid (ft, pid);
    }
    return count;
}
