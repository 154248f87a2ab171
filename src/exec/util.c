/* util.c - helpers of the agent that the other components do not need */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <fcntl.h>
#include <stdarg.h>
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

char proc_state (pid_t pid)
{
    char path[64], buf[512], *p;
    ssize_t n;
    int fd;

    snprintf (path, sizeof (path), "/proc/%d/stat", (int)pid);
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

int proc_stopped (pid_t pid)
{
    char st = proc_state (pid);

    return st == 'T' || st == 't';
}
