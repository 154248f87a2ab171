/* join.c - the newcomer's side of the admission handshake (mesh.h:
 * mesh_join_request; elastic-exec --join)
 *
 * One blocking connection, outside any mesh (the newcomer has none yet):
 *
 *   newcomer -> member  HELLO, flags JOIN | PORT (| CRED under munge):
 *                       source 0, target = the member's id, size 0, its
 *                       nonce, its listening port
 *   member -> newcomer  CHALLENGE: the member's nonce and its proof over
 *                       both nonces, MESH_NEWCOMER, its own id and size 0
 *   newcomer -> member  AUTH: the newcomer's proof
 *   member -> newcomer  ADMIT (sealed): admitted (slot, view, the owner's
 *                       blob) or refused, and why; then it closes
 *
 * The proofs bind MESH_NEWCOMER where a member's bind its id, so neither
 * passes for the other.  Everything read is bounded (MESH_MAX_PREAUTH
 * before the member proved itself) and decoded by mesh_msg_decode.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mesh_impl.h"

#define ADMIT_MAX (16u << 20) /* the longest ADMIT taken: 65536 slots fit */

static double now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait for fd to be ready for events until deadline.  0 or -1 (errno). */
static int wait_fd (int fd, short events, double deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        double left = deadline - now ();
        int r;

        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        r = poll (&p, 1, (int)(left * 1000) + 1);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static int write_all (int fd, const uint8_t *p, size_t n, double deadline)
{
    while (n > 0) {
        ssize_t w = send (fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd (fd, POLLOUT, deadline) < 0)
                return -1;
            continue;
        }
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read exactly n bytes.  0, or -1 (errno; EPIPE: closed). */
static int read_all (int fd, uint8_t *p, size_t n, double deadline)
{
    while (n > 0) {
        ssize_t r = recv (fd, p, n, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd (fd, POLLIN, deadline) < 0)
                return -1;
            continue;
        }
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = EPIPE;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Read one message of at most max payload bytes (sealed: its MAC trailer
 * checked under rx_key, number seq) into *buf (malloc'ed) and decode it.
 * Returns 0, or -1 with err. */
static int read_msg (int fd,
                     uint32_t max,
                     const uint8_t *rx_key,
                     uint64_t seq,
                     uint8_t **buf,
                     struct mesh_msg *msg,
                     double deadline,
                     elastic_error_t *err)
{
    uint8_t hdr[MESH_HDR_SIZE];
    struct mesh_hdr h;
    size_t whole;

    *buf = NULL;
    if (read_all (fd, hdr, sizeof (hdr), deadline) < 0)
        return errprintf (err,
                          "%s",
                          errno == EPIPE       ? "the connection closed before an answer"
                          : errno == ETIMEDOUT ? "no answer in time"
                                               : strerror (errno));
    if (mesh_hdr_decode (hdr, sizeof (hdr), max, &h, err) < 0)
        return -1;
    whole = MESH_HDR_SIZE + (size_t)h.length;
    if (!(*buf = malloc (whole + MESH_MAC_SIZE)))
        return errprintf (err, "out of memory");
    memcpy (*buf, hdr, sizeof (hdr));
    if (read_all (fd,
                  *buf + MESH_HDR_SIZE,
                  whole - MESH_HDR_SIZE + (rx_key ? MESH_MAC_SIZE : 0),
                  deadline) < 0)
        return errprintf (err,
                          "%s",
                          errno == EPIPE ? "the connection closed mid-message"
                                         : "no whole message in time");
    if (rx_key && mesh_auth_msg_verify (rx_key, seq, *buf, whole, *buf + whole) < 0)
        return errprintf (err, "a message with a bad MAC");
    return mesh_msg_decode (*buf, whole, max, msg, err);
}

static int connect_to (const char *addr, double deadline, elastic_error_t *err)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int fd, e = 0;
    socklen_t el = sizeof (e);

    if (mesh_parse_addr (addr, &ss, &sl, err) < 0)
        return -1;
    if ((fd = socket (ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
        return errprintf (err, "socket: %s", strerror (errno));
    if (connect (fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
        e = errno;
    } else if (wait_fd (fd, POLLOUT, deadline) < 0) {
        e = errno;
    } else if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0) {
        e = errno;
    }
    if (e) {
        close (fd);
        return errprintf (err, "connect: %s", strerror (e));
    }
    return fd;
}

static int send_hello (int fd,
                       const struct mesh_join_opts *o,
                       const uint8_t *nonce,
                       const char *cred,
                       double deadline,
                       elastic_error_t *err)
{
    struct mesh_wbuf b = {0};
    size_t off;
    int rc = 0;

    off = mesh_msg_begin (
        &b, MESH_HELLO, MESH_F_JOIN | MESH_F_PORT | (cred ? MESH_F_CRED : 0), 0, 0);
    mesh_put_u32 (&b, o->member);
    mesh_put_u32 (&b, 0);
    mesh_put_bytes (&b, nonce, MESH_NONCE_SIZE);
    if (cred)
        mesh_put_blob (&b, cred, strlen (cred));
    mesh_put_u32 (&b, (uint32_t)o->listen_port);
    if (mesh_msg_end (&b, off) < 0 || write_all (fd, b.buf, b.len, deadline) < 0)
        rc = errprintf (err, "cannot send a hello: %s", strerror (errno));
    mesh_wbuf_free (&b);
    return rc;
}

/* The ADMIT's view into *a and its blob into *info. */
static int take_admission (const struct mesh_msg *msg,
                           struct mesh_admission *a,
                           char **info,
                           size_t *info_len,
                           elastic_error_t *err)
{
    struct mesh_list it = msg->u.admit.addrs;
    const uint8_t *d;
    uint32_t member, len;

    a->slot = msg->u.admit.slot;
    a->n = msg->u.admit.n;
    a->base = msg->u.admit.base;
    a->epoch = msg->u.admit.epoch;
    if (!(a->slots = malloc (a->n)) || !(a->addrs = calloc (a->n, sizeof (char *))) ||
        !(*info = malloc (msg->u.admit.info_len + 1)))
        goto nomem;
    memcpy (a->slots, msg->u.admit.slots, a->n);
    memcpy (*info, msg->u.admit.info, msg->u.admit.info_len);
    (*info)[msg->u.admit.info_len] = '\0';
    *info_len = msg->u.admit.info_len;
    while (mesh_list_next (&it, 1, &member, NULL, &d, &len)) {
        free (a->addrs[member]);
        if (!(a->addrs[member] = strndup ((const char *)d, len)))
            goto nomem;
    }
    return 0;
nomem:
    mesh_admission_free (a);
    free (*info);
    *info = NULL;
    return errprintf (err, "out of memory");
}

int mesh_join_request (const struct mesh_join_opts *o,
                       struct mesh_admission *a,
                       char **info,
                       size_t *info_len,
                       int *status,
                       elastic_error_t *err)
{
    double deadline = now () + (o->timeout > 0 ? o->timeout : 5.0);
    uint8_t nc[MESH_NONCE_SIZE], ns[MESH_NONCE_SIZE], key[MESH_KEY_SIZE];
    uint8_t mac[MESH_MAC_SIZE], tx[MESH_KEY_SIZE], rx[MESH_KEY_SIZE];
    elastic_error_t e = {{0}};
    struct mesh_msg msg;
    struct mesh_wbuf b = {0};
    uint8_t *buf = NULL;
    char *cred = NULL;
    int fd = -1, rc = -1;
    size_t off;

    memset (a, 0, sizeof (*a));
    *info = NULL;
    *info_len = 0;
    *status = -1;
    if (mesh_auth_init (err) < 0)
        return -1;
    mesh_auth_nonce (nc, MESH_NONCE_SIZE);
    if (o->auth == MESH_AUTH_MUNGE) {
        struct mesh_munge_claim cl = {MESH_NEWCOMER, o->member, 0, nc};
        if (mesh_auth_munge_encode (o->munge_socket, o->job, &cl, &cred, key, err) < 0)
            return -1;
    } else if (o->key) {
        memcpy (key, o->key, MESH_KEY_SIZE);
    } else {
        return errprintf (err, "no key to authenticate with");
    }
    if ((fd = connect_to (o->addr, deadline, &e)) < 0 ||
        send_hello (fd, o, nc, cred, deadline, &e) < 0 ||
        read_msg (fd, MESH_MAX_PREAUTH, NULL, 0, &buf, &msg, deadline, &e) < 0)
        goto out;
    if (msg.hdr.type == MESH_BYE) {
        errprintf (&e, "refused before authentication");
        goto out;
    }
    if (msg.hdr.type != MESH_CHALLENGE) {
        errprintf (
            &e, "a %s message instead of a challenge", mesh_type_name (msg.hdr.type));
        goto out;
    }
    memcpy (ns, msg.u.challenge.nonce, MESH_NONCE_SIZE);
    if (msg.hdr.source != o->member || mesh_auth_verify (key,
                                                         MESH_ROLE_SERVER,
                                                         nc,
                                                         ns,
                                                         MESH_NEWCOMER,
                                                         o->member,
                                                         0,
                                                         msg.u.challenge.mac) < 0) {
        errprintf (&e,
                   "the peer failed authentication (not member %u of this job, or "
                   "another secret)",
                   o->member);
        goto out;
    }
    mesh_auth_mac (key, MESH_ROLE_CLIENT, nc, ns, MESH_NEWCOMER, o->member, 0, mac);
    off = mesh_msg_begin (&b, MESH_AUTH, 0, 0, 0);
    mesh_put_bytes (&b, mac, MESH_MAC_SIZE);
    if (mesh_msg_end (&b, off) < 0 || write_all (fd, b.buf, b.len, deadline) < 0) {
        errprintf (&e, "cannot send its proof: %s", strerror (errno));
        goto out;
    }
    mesh_auth_session_keys (key, nc, ns, tx, rx);
    free (buf);
    if (read_msg (fd, ADMIT_MAX, rx, 0, &buf, &msg, deadline, &e) < 0)
        goto out;
    if (msg.hdr.type != MESH_ADMIT || msg.hdr.source != o->member) {
        errprintf (
            &e, "a %s message instead of an answer", mesh_type_name (msg.hdr.type));
        goto out;
    }
    *status = (int)msg.u.admit.status;
    if (msg.u.admit.status != MESH_ADMIT_OK) {
        errprintf (&e, "%s", mesh_admit_status_text (msg.u.admit.status));
        rc = 0;
        goto out;
    }
    rc = take_admission (&msg, a, info, info_len, &e) < 0 ? -1 : 1;
out:
    if (rc <= 0)
        errprintf (err, "%s (member %u): %s", o->addr, o->member, e.text);
    if (fd >= 0)
        close (fd);
    mesh_wbuf_free (&b);
    free (buf);
    free (cred);
    return rc;
}
