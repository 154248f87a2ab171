/* util.c - helpers of the agent that the other components do not need */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

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

/* The state letter of the /proc stat file at path, or 0. */
static char stat_state (const char *path)
{
    char buf[512], *p;
    ssize_t n;
    int fd;

    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "PID (COMM) S ...": COMM may hold spaces and parentheses */
    if (!(p = strrchr (buf, ')')) || p[1] != ' ')
        return 0;
    return p[2];
}

char proc_state (pid_t pid)
{
    char path[64];

    snprintf (path, sizeof (path), "/proc/%d/stat", (int)pid);
    return stat_state (path);
}

/* The first line of a small /proc file into buf (empty if unreadable). */
static void proc_line (const char *path, char *buf, size_t size)
{
    ssize_t n = -1;
    int fd;

    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) >= 0) {
        n = read (fd, buf, size - 1);
        close (fd);
    }
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn (buf, "\n")] = '\0';
}

void proc_threads_describe (pid_t pid, char *buf, size_t size)
{
    char dir[64], path[384], wchan[64], sys[64];
    struct dirent *d;
    size_t len = 0;
    int n = 0;
    DIR *t;

    buf[0] = '\0';
    snprintf (dir, sizeof (dir), "/proc/%d/task", (int)pid);
    if (!(t = opendir (dir))) {
        snprintf (buf, size, "gone from /proc");
        return;
    }
    while ((d = readdir (t)) && len + 1 < size) {
        int k;
        if (d->d_name[0] < '0' || d->d_name[0] > '9')
            continue;
        snprintf (path, sizeof (path), "%s/%s/stat", dir, d->d_name);
        char st = stat_state (path);
        snprintf (path, sizeof (path), "%s/%s/wchan", dir, d->d_name);
        proc_line (path, wchan, sizeof (wchan));
        snprintf (path, sizeof (path), "%s/%s/syscall", dir, d->d_name);
        proc_line (path, sys, sizeof (sys));
        sys[strcspn (sys, " ")] = '\0'; /* the number (or "running") only */
        if (strcmp (sys, "-1") == 0)
            sys[0] = '\0'; /* blocked outside a system call */
        k = snprintf (buf + len,
                      size - len,
                      "%s%s %c%s%s%s%s",
                      n ? ", " : "",
                      d->d_name,
                      st ? st : '?',
                      wchan[0] && strcmp (wchan, "0") ? " in " : "",
                      wchan[0] && strcmp (wchan, "0") ? wchan : "",
                      sys[0] ? " syscall " : "",
                      sys);
        if (k < 0 || (size_t)k >= size - len) {
            buf[len] = '\0';
            break;
        }
        len += (size_t)k;
        n++;
    }
    closedir (t);
    if (n == 0)
        snprintf (buf, size, "no threads left (a zombie)");
}

int proc_stopped (pid_t pid)
{
    char st = proc_state (pid);

    return st == 'T' || st == 't';
}
