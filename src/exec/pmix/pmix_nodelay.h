/* pmix_nodelay.h - TCP_NODELAY for the sockets of the hosted PMIx server
 *
 * OpenPMIx (4.2 and 5.0) never sets TCP_NODELAY on its client sockets, and
 * it writes a message's header and body separately, so a small event
 * message waits for the peer's delayed ACK (~40 ms): that, not ULFM, made a
 * failure reach the survivors in ~50 ms under mpirun.  PMIx offers no
 * option and gives the host no socket, but Linux copies TCP_NODELAY from a
 * listening socket to every socket accept() returns.  So the listening
 * sockets PMIx_server_init opens (found by comparing this process's
 * listening TCP sockets before and after it) get TCP_NODELAY, once, before
 * any client connects.
 */
#ifndef ELASTIC_EXEC_PMIX_NODELAY_H
#define ELASTIC_EXEC_PMIX_NODELAY_H

#include <sys/types.h>

#define NODELAY_MAX 8

struct nodelay_set {
    int n;
    int fd[NODELAY_MAX];
    ino_t ino[NODELAY_MAX];
    int port[NODELAY_MAX]; /* local TCP port */
};

/* Fill *s with this process's listening TCP sockets (the first
 * NODELAY_MAX).  Returns -1 with errno if /proc/self/fd cannot be read. */
int nodelay_listeners (struct nodelay_set *s);

/* Set TCP_NODELAY on every listening TCP socket not in *before and store
 * them in *added.  Returns how many were set, -1 with errno on failure. */
int nodelay_apply (const struct nodelay_set *before, struct nodelay_set *added);

/* Count the established sockets accepted on the listeners in *set (same
 * local port) that lack TCP_NODELAY; *total (may be NULL) gets how many
 * there are.  Returns -1 with errno if /proc/self/fd cannot be read. */
int nodelay_check (const struct nodelay_set *set, int *total);

#endif /* ELASTIC_EXEC_PMIX_NODELAY_H */
