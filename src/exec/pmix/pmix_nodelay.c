/* pmix_nodelay.c - TCP_NODELAY for the sockets of the hosted PMIx server */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "pmix_nodelay.h"

/* Call fn(fd, st, arg) for every socket of this process. */
static int foreach_socket (int (*fn) (int fd, const struct stat *st, void *arg),
                           void *arg)
{
    DIR *d;
    struct dirent *de;
    int self;

    if (!(d = opendir ("/proc/self/fd")))
        return -1;
    self = dirfd (d);
    while ((de = readdir (d))) {
        struct stat st;
        char *end;
        long fd = strtol (de->d_name, &end, 10);

        if (*end != '\0' || end == de->d_name || fd == self)
            continue;
        if (fstat ((int)fd, &st) < 0 || !S_ISSOCK (st.st_mode))
            continue;
        if (fn ((int)fd, &st, arg) < 0)
            break;
    }
    closedir (d);
    return 0;
}

/* The local port of a TCP socket (IPv4 or IPv6), or -1. */
static int tcp_port (int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof (ss);
    int type;
    socklen_t tlen = sizeof (type);

    if (getsockopt (fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_STREAM)
        return -1;
    if (getsockname (fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs (((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs (((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

static int is_listening (int fd)
{
    int v = 0;
    socklen_t len = sizeof (v);

    return getsockopt (fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) == 0 && v;
}

static int add_listener (int fd, const struct stat *st, void *arg)
{
    struct nodelay_set *s = arg;
    int port;

    if (!is_listening (fd) || (port = tcp_port (fd)) < 0)
        return 0;
    if (s->n == NODELAY_MAX)
        return -1;
    s->fd[s->n] = fd;
    s->ino[s->n] = st->st_ino;
    s->port[s->n] = port;
    s->n++;
    return 0;
}

int nodelay_listeners (struct nodelay_set *s)
{
    memset (s, 0, sizeof (*s));
    return foreach_socket (add_listener, s);
}

int nodelay_apply (const struct nodelay_set *before, struct nodelay_set *added)
{
    struct nodelay_set now;
    int one = 1;

    memset (added, 0, sizeof (*added));
    if (nodelay_listeners (&now) < 0)
        return -1;
    for (int i = 0; i < now.n; i++) {
        int old = 0;
        for (int j = 0; j < before->n; j++)
            if (before->fd[j] == now.fd[i] && before->ino[j] == now.ino[i])
                old = 1;
        if (old)
            continue;
        if (setsockopt (now.fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one)) < 0)
            return -1;
        added->fd[added->n] = now.fd[i];
        added->ino[added->n] = now.ino[i];
        added->port[added->n] = now.port[i];
        added->n++;
    }
    return added->n;
}

struct check {
    const struct nodelay_set *set;
    int total;
    int without;
};

static int check_one (int fd, const struct stat *st, void *arg)
{
    struct check *c = arg;
    int port, v = 0;
    socklen_t len = sizeof (v);

    (void)st;
    if (is_listening (fd) || (port = tcp_port (fd)) < 0)
        return 0;
    for (int i = 0; i < c->set->n; i++) {
        if (c->set->port[i] == port) {
            c->total++;
            if (getsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &v, &len) < 0 || !v)
                c->without++;
            break;
        }
    }
    return 0;
}

int nodelay_check (const struct nodelay_set *set, int *total)
{
    struct check c = {.set = set};

    if (foreach_socket (check_one, &c) < 0)
        return -1;
    if (total)
        *total = c.total;
    return c.without;
}
