/* guardian.c - kill the workers' process groups if the agent dies, and
 * remove what the agent would have removed (its temporary directories,
 * the ranks' /dev/shm segments) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guardian.h"
#include "util.h"

#define GUARDIAN_MAX   65536
#define GUARDIAN_NPATH 16
#define GUARDIAN_DEPTH 12

struct guardian {
    pid_t pid;
    int wfd;
    void *stack; /* the guardian's stack when it shares our memory */
};

/* The guardian's paths: 'D' a directory tree, 'S' a /dev/shm prefix. */
struct gpath {
    char kind;
    char path[PATH_MAX];
};

/* The entries of directory fd, by getdents64 (async-signal-safe, unlike
 * readdir). */
struct gdirent {
    unsigned long long ino;
    long long off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* rm -rf of what directory fd holds (fd is closed; async-signal-safe). */
static void remove_contents (int fd, int depth)
{
    char buf[4096];
    long n;

    while ((n = syscall (SYS_getdents64, fd, buf, sizeof (buf))) > 0) {
        for (long off = 0; off < n;) {
            struct gdirent *d = (struct gdirent *)(buf + off);
            off += d->reclen;
            if (!strcmp (d->name, ".") || !strcmp (d->name, ".."))
                continue;
            if (unlinkat (fd, d->name, 0) == 0 || errno != EISDIR)
                continue;
            if (depth < GUARDIAN_DEPTH) {
                int sub = openat (fd, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
                if (sub >= 0)
                    remove_contents (sub, depth + 1);
            }
            unlinkat (fd, d->name, AT_REMOVEDIR);
        }
    }
    close (fd);
}

static void remove_path (const struct gpath *p)
{
    size_t len = strlen (p->path);
    char buf[4096];
    long n;
    int fd;

    if (p->kind == 'D') {
        if ((fd = open (p->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)) >= 0)
            remove_contents (fd, 0);
        rmdir (p->path);
        return;
    }
    if ((fd = open ("/dev/shm", O_RDONLY | O_DIRECTORY)) < 0)
        return;
    while ((n = syscall (SYS_getdents64, fd, buf, sizeof (buf))) > 0) {
        for (long off = 0; off < n;) {
            struct gdirent *d = (struct gdirent *)(buf + off);
            off += d->reclen;
            if (!strncmp (d->name, p->path, len))
                unlinkat (fd, d->name, 0);
        }
    }
    close (fd);
}

/* The guardian's whole life; async-signal-safe calls only (the agent may
 * have threads when it forks). */
static void __attribute__ ((noreturn)) guardian_main (int rfd)
{
    static pid_t groups[GUARDIAN_MAX];
    static struct gpath paths[GUARDIAN_NPATH];
    static char buf[PATH_MAX + 64];
    int npaths = 0;
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigset_t none;
    int n = 0;
    size_t len = 0;

    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD && sig != SIGSEGV &&
            sig != SIGBUS && sig != SIGFPE && sig != SIGILL && sig != SIGABRT)
            sigaction (sig, &ign, NULL);
    setsid ();
    if (chdir ("/") < 0) {
        /* stay where we are */
    }
    if (rfd != 0) {
        dup2 (rfd, 0);
        close (rfd);
    }
#ifdef SYS_close_range
    syscall (SYS_close_range, 1, ~0u, 0);
#else
    for (int fd = 1; fd < 1024; fd++)
        close (fd);
#endif
    for (;;) {
        ssize_t r = read (0, buf + len, sizeof (buf) - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < len; i++) {
            if (buf[i] != '\n')
                continue;
            char op = buf[start];
            long v = 0;
            if (op == 'D' || op == 'S' || op == 'd' || op == 's') {
                /* a path (or prefix) to remove when the agent dies: D/S
                 * add it, d/s forget it */
                size_t plen = i - start - 1;
                int add = op == 'D' || op == 'S';
                buf[i] = '\0';
                if (plen == 0 || plen >= PATH_MAX)
                    add = -1; /* not a path: ignored */
                if (add == 1 && npaths < GUARDIAN_NPATH) {
                    paths[npaths].kind = op;
                    memcpy (paths[npaths].path, buf + start + 1, plen + 1);
                    npaths++;
                } else if (add == 0) {
                    for (int k = 0; k < npaths; k++) {
                        if (paths[k].kind == op - 'a' + 'A' &&
                            !strcmp (paths[k].path, buf + start + 1)) {
                            paths[k] = paths[--npaths];
                            break;
                        }
                    }
                }
                start = i + 1;
                continue;
            }
            for (size_t j = start + 1; j < i && buf[j] >= '0' && buf[j] <= '9'; j++)
                v = v * 10 + (buf[j] - '0');
            if (v > 1 && op == '+' && n < GUARDIAN_MAX)
                groups[n++] = (pid_t)v;
            else if (v > 1 && op == '-') {
                for (int k = 0; k < n; k++) {
                    if (groups[k] == (pid_t)v) {
                        groups[k] = groups[--n];
                        break;
                    }
                }
            }
            start = i + 1;
        }
        memmove (buf, buf + start, len - start);
        len -= start;
        if (len == sizeof (buf))
            len = 0;
    }
    for (int k = 0; k < n; k++)
        kill (-groups[k], SIGKILL);
    /* the agent died without cleaning up (it forgets what it removes) */
    for (int k = 0; k < npaths; k++)
        remove_path (&paths[k]);
    _exit (0);
}

/* The guardian shares the agent's memory (clone with CLONE_VM, not fork):
 * no copy of the agent's page tables and no copy-on-write fault in the
 * agent afterwards, which on a virtual machine with shadow page tables
 * were most of a wrapper's start (B7).  It runs on a stack of its own and
 * touches only guardian_main's static state, which nothing else uses (one
 * guardian per process); it keeps the memory alive when the agent dies.
 * Sanitizer runtimes keep per-thread state the child would share, and
 * valgrind refuses the flags: there, and wherever clone fails, fork. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GUARDIAN_SHARED_VM 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GUARDIAN_SHARED_VM 0
#endif
#endif
#ifndef GUARDIAN_SHARED_VM
#define GUARDIAN_SHARED_VM 1
#endif
#define GUARDIAN_STACK ((size_t)512 << 10)

static int guardian_entry (void *arg)
{
    guardian_main ((int)(intptr_t)arg);
}

static pid_t guardian_spawn (struct guardian *g, int rfd)
{
    pid_t pid = -1;

#if GUARDIAN_SHARED_VM
    void *stk = mmap (NULL,
                      GUARDIAN_STACK,
                      PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                      -1,
                      0);
    if (stk != MAP_FAILED) {
        pid = clone (guardian_entry,
                     (char *)stk + GUARDIAN_STACK,
                     CLONE_VM | SIGCHLD,
                     (void *)(intptr_t)rfd);
        if (pid > 0) {
            g->stack = stk;
            return pid;
        }
        munmap (stk, GUARDIAN_STACK);
    }
#endif
    if ((pid = fork ()) == 0)
        guardian_main (rfd);
    return pid;
}

struct guardian *guardian_start (elastic_error_t *err)
{
    struct guardian *g;
    int p[2];

    if (!(g = calloc (1, sizeof (*g)))) {
        errprintf (err, "guardian: out of memory");
        return NULL;
    }
    if (pipe2 (p, O_CLOEXEC) < 0) {
        errprintf (err, "guardian: pipe: %s", strerror (errno));
        free (g);
        return NULL;
    }
    g->pid = guardian_spawn (g, p[0]);
    if (g->pid < 0) {
        errprintf (err, "guardian: fork: %s", strerror (errno));
        close (p[0]);
        close (p[1]);
        free (g);
        return NULL;
    }
    close (p[0]);
    g->wfd = p[1];
    return g;
}

static int send_op (struct guardian *g, char op, pid_t pgid)
{
    char line[32];
    int n = snprintf (line, sizeof (line), "%c%d\n", op, (int)pgid);

    if (!g || g->wfd < 0) {
        errno = EINVAL;
        return -1;
    }
    return write_all (g->wfd, line, (size_t)n);
}

static int send_path (struct guardian *g, char op, const char *path)
{
    char line[PATH_MAX + 8];
    int n;

    if (!g || g->wfd < 0 || !path || !*path || strchr (path, '\n') ||
        strlen (path) >= PATH_MAX) {
        errno = EINVAL;
        return -1;
    }
    n = snprintf (line, sizeof (line), "%c%s\n", op, path);
    return write_all (g->wfd, line, (size_t)n);
}

/* The guardian runs in "/": it needs absolute paths. */
static int send_dir (struct guardian *g, char op, const char *path)
{
    char abs[PATH_MAX];

    if (path && path[0] && path[0] != '/') {
        if (!realpath (path, abs))
            return -1;
        path = abs;
    }
    return send_path (g, op, path);
}

int guardian_add_dir (struct guardian *g, const char *path)
{
    return send_dir (g, 'D', path);
}

int guardian_remove_dir (struct guardian *g, const char *path)
{
    return send_dir (g, 'd', path);
}

int guardian_add_shm (struct guardian *g, const char *prefix)
{
    return send_path (g, 'S', prefix);
}

int guardian_remove_shm (struct guardian *g, const char *prefix)
{
    return send_path (g, 's', prefix);
}

int guardian_add (struct guardian *g, pid_t pgid)
{
    return send_op (g, '+', pgid);
}

int guardian_remove (struct guardian *g, pid_t pgid)
{
    return send_op (g, '-', pgid);
}

pid_t guardian_pid (struct guardian *g)
{
    return g ? g->pid : -1;
}

void guardian_stop (struct guardian *g)
{
    int saved = errno;

    if (g) {
        if (g->wfd >= 0)
            close (g->wfd);
        while (waitpid (g->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        if (g->stack)
            munmap (g->stack, GUARDIAN_STACK);
        free (g);
    }
    errno = saved;
}
