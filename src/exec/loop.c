/* loop.c - the agent's one event loop: file descriptors over epoll */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "loop.h"

struct watcher {
    int fd;
    loop_fn cb;
    void *arg;
    int dead;
    struct watcher *next;
};

struct loop {
    int epfd;
    struct watcher *list;
    int dispatching;
};

struct loop *loop_create (void)
{
    struct loop *l;

    if (!(l = calloc (1, sizeof (*l))))
        return NULL;
    if ((l->epfd = epoll_create1 (EPOLL_CLOEXEC)) < 0) {
        free (l);
        return NULL;
    }
    return l;
}

void loop_destroy (struct loop *l)
{
    int saved = errno;

    if (l) {
        struct watcher *w = l->list;
        while (w) {
            struct watcher *next = w->next;
            free (w);
            w = next;
        }
        close (l->epfd);
        free (l);
    }
    errno = saved;
}

static struct watcher *find (struct loop *l, int fd)
{
    for (struct watcher *w = l->list; w; w = w->next)
        if (w->fd == fd && !w->dead)
            return w;
    return NULL;
}

int loop_add (struct loop *l, int fd, loop_fn cb, void *arg)
{
    struct epoll_event ev = {.events = EPOLLIN};
    struct watcher *w;

    if (fd < 0 || !cb) {
        errno = EINVAL;
        return -1;
    }
    if (find (l, fd)) {
        errno = EEXIST;
        return -1;
    }
    if (!(w = calloc (1, sizeof (*w))))
        return -1;
    w->fd = fd;
    w->cb = cb;
    w->arg = arg;
    ev.data.ptr = w;
    if (epoll_ctl (l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        free (w);
        return -1;
    }
    w->next = l->list;
    l->list = w;
    return 0;
}

/* Free watchers marked dead (never while their events may be pending). */
static void sweep (struct loop *l)
{
    struct watcher **pp = &l->list;

    while (*pp) {
        struct watcher *w = *pp;
        if (w->dead) {
            *pp = w->next;
            free (w);
        } else
            pp = &w->next;
    }
}

int loop_remove (struct loop *l, int fd)
{
    struct watcher *w = find (l, fd);

    if (!w) {
        errno = ENOENT;
        return -1;
    }
    (void)epoll_ctl (l->epfd, EPOLL_CTL_DEL, fd, NULL);
    w->dead = 1;
    if (!l->dispatching)
        sweep (l);
    return 0;
}

int loop_run_once (struct loop *l, double timeout)
{
    struct epoll_event ev[32];
    int ms, n, count = 0;

    if (timeout < 0)
        ms = -1;
    else if (timeout > 3600)
        ms = 3600 * 1000;
    else
        ms = (int)(timeout * 1000.0 + 0.999);
    n = epoll_wait (l->epfd, ev, 32, ms);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    l->dispatching++;
    for (int i = 0; i < n; i++) {
        struct watcher *w = ev[i].data.ptr;
        int revents = 0;
        if (w->dead)
            continue;
        if (ev[i].events & EPOLLIN)
            revents |= POLLIN;
        if (ev[i].events & EPOLLHUP)
            revents |= POLLHUP;
        if (ev[i].events & EPOLLERR)
            revents |= POLLERR;
        w->cb (l, w->fd, revents, w->arg);
        count++;
    }
    if (--l->dispatching == 0)
        sweep (l);
    return count;
}
