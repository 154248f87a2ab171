/* guardian.c - kill the workers' process groups if the agent dies */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guardian.h"
#include "util.h"

#define GUARDIAN_MAX 65536

struct guardian {
    pid_t pid;
    int wfd;
};

/* The guardian's whole life; async-signal-safe calls only (the agent may
 * have threads when it forks). */
static void __attribute__ ((noreturn)) guardian_main (int rfd)
{
    static pid_t groups[GUARDIAN_MAX];
    static char buf[4096];
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
    _exit (0);
}

struct guardian *guardian_start (char *err, size_t errsz)
{
    struct guardian *g;
    int p[2];

    if (!(g = calloc (1, sizeof (*g)))) {
        snprintf (err, errsz, "guardian: out of memory");
        return NULL;
    }
    if (pipe2 (p, O_CLOEXEC) < 0) {
        snprintf (err, errsz, "guardian: pipe: %s", strerror (errno));
        free (g);
        return NULL;
    }
    g->pid = fork ();
    if (g->pid < 0) {
        snprintf (err, errsz, "guardian: fork: %s", strerror (errno));
        close (p[0]);
        close (p[1]);
        free (g);
        return NULL;
    }
    if (g->pid == 0) {
        close (p[1]);
        guardian_main (p[0]);
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
        free (g);
    }
    errno = saved;
}
