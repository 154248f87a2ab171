/* launch.c - run one mpirun attempt: stderr through a parser, signals */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "launch.h"

static int sig_pipe[2] = {-1, -1};

static void on_signal (int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;

    if (write (sig_pipe[1], &c, 1) < 0) {
        /* the pipe is full: the signal is already pending in it */
    }
    errno = saved;
}

double launch_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int launch_signals_init (void)
{
    static const int sigs[] = {SIGTERM, SIGUSR1, SIGINT, SIGHUP, SIGCHLD};
    struct sigaction sa;

    if (sig_pipe[0] >= 0)
        return 0;
    if (pipe2 (sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    memset (&sa, 0, sizeof (sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset (&sa.sa_mask);
    for (size_t i = 0; i < sizeof (sigs) / sizeof (sigs[0]); i++)
        if (sigaction (sigs[i], &sa, NULL) < 0)
            return -1;
    signal (SIGPIPE, SIG_IGN);
    return 0;
}

static int is_preempt (int sig)
{
    return sig == SIGTERM || sig == SIGUSR1;
}

static int is_interrupt (int sig)
{
    return sig == SIGINT || sig == SIGHUP;
}

int launch_wait_signal (double wait)
{
    double deadline = launch_now () + wait;

    for (;;) {
        struct pollfd p = {.fd = sig_pipe[0], .events = POLLIN};
        unsigned char c;
        double left = deadline - launch_now ();
        while (read (sig_pipe[0], &c, 1) == 1)
            if (is_preempt (c) || is_interrupt (c))
                return c;
        if (left <= 0)
            return 0;
        if (poll (&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
            return 0;
    }
}

/* Feed complete lines of buf to the parser; keep the partial tail. */
static void
feed (struct launch_result *res, char *line, size_t *len, const char *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (data[i] == '\n' || *len + 1 >= 2048) {
            line[*len] = '\0';
            if (report_feed_line (&res->rep, line) > 0 && res->t_failure == 0)
                res->t_failure = launch_now ();
            *len = 0;
            if (data[i] == '\n')
                continue;
        }
        line[(*len)++] = data[i];
    }
}

static void write_all (int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write (fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

int launch_run (char *const argv[],
                double suspend_timeout,
                struct launch_result *res,
                char *err,
                size_t errsz)
{
    int errp[2], status = 0, exited = 0, out_open = 1;
    double suspend_deadline = 0, kill_deadline = 0, drain_deadline = 0;
    char line[2048];
    size_t llen = 0;
    pid_t pid;

    memset (res, 0, sizeof (*res));
    report_init (&res->rep);
    if (pipe2 (errp, O_CLOEXEC) < 0) {
        snprintf (err, errsz, "pipe: %s", strerror (errno));
        return -1;
    }
    res->t_start = launch_now ();
    if ((pid = fork ()) < 0) {
        snprintf (err, errsz, "fork: %s", strerror (errno));
        close (errp[0]);
        close (errp[1]);
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset (&none);
        sigprocmask (SIG_SETMASK, &none, NULL);
        signal (SIGTERM, SIG_DFL);
        signal (SIGUSR1, SIG_DFL);
        signal (SIGINT, SIG_DFL);
        signal (SIGHUP, SIG_DFL);
        signal (SIGCHLD, SIG_DFL);
        signal (SIGPIPE, SIG_DFL);
        dup2 (errp[1], 2);
        execvp (argv[0], argv);
        fprintf (
            stderr, "elastic-mpirun: cannot run %s: %s\n", argv[0], strerror (errno));
        _exit (127);
    }
    close (errp[1]);

    for (;;) {
        struct pollfd p[2] = {{.fd = sig_pipe[0], .events = POLLIN},
                              {.fd = errp[0], .events = POLLIN}};
        double now = launch_now ();
        unsigned char c;
        int timeout = 200;

        if (exited && (!out_open || now > drain_deadline))
            break;
        if (poll (p, out_open ? 2 : 1, timeout) < 0 && errno != EINTR)
            break;
        while (read (sig_pipe[0], &c, 1) == 1) {
            if (exited || c == SIGCHLD)
                continue;
            if (is_preempt (c)) {
                if (!res->preempt_signal) {
                    res->preempt_signal = c;
                    suspend_deadline = launch_now () + suspend_timeout;
                    log_warn (
                        "%s received: asking the ranks to suspend to a snapshot (SIGUSR1 "
                        "through mpirun); waiting up to %.0f s for them to exit %d",
                        strsignal (c),
                        suspend_timeout,
                        75);
                    kill (pid, SIGUSR1);
                } else if (!kill_deadline) {
                    log_warn ("%s received again: stopping mpirun", strsignal (c));
                    kill (pid, SIGTERM);
                    res->forced = 1;
                    kill_deadline = launch_now () + 15;
                }
            } else if (is_interrupt (c)) {
                if (!res->interrupt_signal) {
                    res->interrupt_signal = c;
                    log_warn ("%s received: stopping the job (no relaunch)",
                              strsignal (c));
                    kill (pid, SIGTERM);
                    kill_deadline = launch_now () + 15;
                } else
                    kill (pid, SIGKILL);
            }
        }
        now = launch_now ();
        if (!exited && suspend_deadline && !kill_deadline && now > suspend_deadline) {
            log_warn ("the ranks did not suspend within %.0f s: stopping mpirun",
                      suspend_timeout);
            kill (pid, SIGTERM);
            res->forced = 1;
            kill_deadline = now + 15;
        }
        if (!exited && kill_deadline && now > kill_deadline) {
            kill (pid, SIGKILL);
            kill_deadline = now + 3600;
        }
        if (out_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[8192];
            ssize_t n = read (errp[0], buf, sizeof (buf));
            if (n > 0) {
                /* PRRTE 3.0 writes the terminating NUL of each help message:
                 * drop NULs, which would put binary bytes in the job's log
                 * and hide the dashed line that opens the next message */
                size_t k = 0;
                for (ssize_t i = 0; i < n; i++)
                    if (buf[i] != '\0')
                        buf[k++] = buf[i];
                write_all (STDERR_FILENO, buf, k);
                feed (res, line, &llen, buf, k);
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                out_open = 0;
            }
        }
        if (!exited) {
            pid_t w = waitpid (pid, &status, WNOHANG);
            if (w == pid) {
                exited = 1;
                res->t_end = launch_now ();
                /* ranks that outlive mpirun may hold the pipe: drain briefly */
                drain_deadline = res->t_end + 2;
            }
        }
    }
    if (llen > 0) {
        line[llen] = '\0';
        if (report_feed_line (&res->rep, line) > 0 && res->t_failure == 0)
            res->t_failure = launch_now ();
    }
    if (report_finish (&res->rep) > 0 && res->t_failure == 0)
        res->t_failure = res->t_end;
    close (errp[0]);
    if (WIFEXITED (status))
        res->exit_code = WEXITSTATUS (status);
    else if (WIFSIGNALED (status)) {
        res->mpirun_signal = WTERMSIG (status);
        res->exit_code = 128 + res->mpirun_signal;
    }
    return 0;
}
