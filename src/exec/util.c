/* util.c - small helpers of the agent: clocks, paths, signal names, text */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

double mono_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double wall_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t mono_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void format_iso_time (double t, char *buf, size_t size)
{
    time_t sec = (time_t)t;
    long usec = (long)((t - (double)sec) * 1e6);
    struct tm tm;
    size_t n;

    if (usec < 0)
        usec = 0;
    if (usec > 999999)
        usec = 999999;
    gmtime_r (&sec, &tm);
    n = strftime (buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf (buf + n, size - n, ".%06ldZ", usec);
}

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

static const struct {
    int num;
    const char *name;
} signals[] = {
    {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
    {SIGILL, "SIGILL"},       {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
    {SIGBUS, "SIGBUS"},       {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
    {SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
    {SIGCHLD, "SIGCHLD"},     {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"},
    {SIGTSTP, "SIGTSTP"},     {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"},
    {SIGURG, "SIGURG"},       {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
    {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"},
    {SIGIO, "SIGIO"},         {SIGPWR, "SIGPWR"},   {SIGSYS, "SIGSYS"},
};

const char *signal_name (int signum)
{
    static char buf[32];

    for (size_t i = 0; i < sizeof (signals) / sizeof (signals[0]); i++)
        if (signals[i].num == signum)
            return signals[i].name;
    if (signum >= SIGRTMIN && signum <= SIGRTMAX)
        snprintf (buf, sizeof (buf), "SIGRTMIN+%d", signum - SIGRTMIN);
    else
        snprintf (buf, sizeof (buf), "SIG%d", signum);
    return buf;
}

int signal_parse (const char *s)
{
    char *end;
    long v;

    if (!s || *s == '\0')
        return -1;
    if (isdigit ((unsigned char)*s)) {
        errno = 0;
        v = strtol (s, &end, 10);
        if (errno || *end || v <= 0 || v >= NSIG)
            return -1;
        return (int)v;
    }
    if (strncasecmp (s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof (signals) / sizeof (signals[0]); i++)
        if (strcasecmp (s, signals[i].name + 3) == 0)
            return signals[i].num;
    return -1;
}

int signal_list_parse (
    const char *what, const char *s, sigset_t *set, char *err, size_t errsz)
{
    char buf[1024], *tok, *save = NULL;

    sigemptyset (set);
    if (!s || strlen (s) >= sizeof (buf)) {
        snprintf (err, errsz, "%s: value too long", what);
        return -1;
    }
    strcpy (buf, s);
    for (tok = strtok_r (buf, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        while (isspace ((unsigned char)*tok))
            tok++;
        for (char *e = tok + strlen (tok); e > tok && isspace ((unsigned char)e[-1]); e--)
            e[-1] = '\0';
        int sig = signal_parse (tok);
        if (sig < 0 || sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD) {
            snprintf (
                err,
                errsz,
                "%s: '%s' is not a signal that can be handled (expected names such as "
                "SIGTERM,SIGUSR1 or numbers, not SIGKILL/SIGSTOP/SIGCHLD)",
                what,
                tok);
            return -1;
        }
        sigaddset (set, sig);
    }
    return 0;
}

void signal_list_format (const sigset_t *set, char *buf, size_t size)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int sig = 1; sig < NSIG; sig++) {
        if (sigismember (set, sig) != 1)
            continue;
        int len = snprintf (buf + n, size - n, "%s%s", n ? "," : "", signal_name (sig));
        if (len < 0 || (size_t)len >= size - n)
            break;
        n += (size_t)len;
    }
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

int parse_bool (const char *s, int *out)
{
    static const char *yes[] = {"1", "true", "yes", "on"};
    static const char *no[] = {"0", "false", "no", "off"};

    if (!s)
        return -1;
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp (s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp (s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

const char *host_name (void)
{
    static char name[256];

    if (name[0] == '\0') {
        if (gethostname (name, sizeof (name) - 1) < 0)
            strcpy (name, "localhost");
        name[sizeof (name) - 1] = '\0';
    }
    return name;
}

int errfmt (char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start (ap, fmt);
    n = vsnprintf (buf, size, fmt, ap);
    va_end (ap);
    return n;
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

int signal_default_terminates (int sig)
{
    switch (sig) {
        case SIGCHLD:
        case SIGCONT:
        case SIGSTOP:
        case SIGTSTP:
        case SIGTTIN:
        case SIGTTOU:
        case SIGURG:
        case SIGWINCH:
            return 0;
    }
    return sig > 0 && sig < NSIG;
}
