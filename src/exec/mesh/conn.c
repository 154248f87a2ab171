/* conn.c - the mesh's connections: sockets, the handshake, framing
 *
 * A connection is non-blocking; input is buffered until a whole message
 * (header + payload) is there, output until the socket takes it.  Before a
 * peer is authenticated only the handshake messages are accepted, at most
 * MESH_MAX_PREAUTH bytes each, and a peer that does not finish the
 * handshake within hs_timeout is dropped: garbage, a wrong secret, silence
 * or a wrong protocol version cost a log line, never the member.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/log.h"
#include "mesh_impl.h"

int mesh_parse_addr (const char *s,
                     struct sockaddr_storage *ss,
                     socklen_t *len,
                     elastic_error_t *err)
{
    char host[256];
    const char *colon = strrchr (s, ':');
    struct addrinfo hints = {0}, *res = NULL;
    size_t hl;
    int rc;

    if (!colon || colon == s || !colon[1])
        return errprintf (err, "mesh address '%s': expected HOST:PORT", s);
    hl = (size_t)(colon - s);
    if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') {
        s++;
        hl -= 2;
    }
    if (hl >= sizeof (host))
        return errprintf (err, "mesh address '%s': host name too long", s);
    memcpy (host, s, hl);
    host[hl] = '\0';
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if ((rc = getaddrinfo (host, colon + 1, &hints, &res)) != 0 || !res)
        return errprintf (err, "mesh address '%s': %s", s, gai_strerror (rc));
    memcpy (ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo (res);
    return 0;
}

void mesh_addr_format (const struct sockaddr_storage *ss,
                       int port,
                       char *buf,
                       size_t size)
{
    char host[INET6_ADDRSTRLEN] = "";

    if (ss->ss_family == AF_INET6) {
        inet_ntop (
            AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, host, sizeof (host));
        snprintf (buf, size, "[%s]:%d", host, port);
    } else {
        inet_ntop (
            AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, host, sizeof (host));
        snprintf (buf, size, "%s:%d", host, port);
    }
}

void mesh_addr_set_port (struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons ((uint16_t)port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons ((uint16_t)port);
}

int mesh_addr_port (const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6)
        return ntohs (((const struct sockaddr_in6 *)ss)->sin6_port);
    return ntohs (((const struct sockaddr_in *)ss)->sin_port);
}

/* Look for member on candidate port k (mesh_config.ports). */
static void use_port (struct mesh *m, uint32_t member, uint32_t k)
{
    m->peers[member].port_idx = k;
    mesh_addr_set_port (&m->addr[member], m->ports[k]);
}

/* Our handshake with member failed on the candidate port we tried, and we
 * never linked with it on one: try the next. */
static void next_port (struct mesh *m, uint32_t member)
{
    struct peer *p = &m->peers[member];

    if (m->nports < 2 || p->port_known)
        return;
    use_port (m, member, (p->port_idx + 1) % m->nports);
    log_debug ("mesh %u: looking for member %u on port %d next",
               m->self,
               member,
               m->ports[p->port_idx]);
}

static int set_nonblock (int fd)
{
    int fl = fcntl (fd, F_GETFL);
    int one = 1;

    if (fl < 0 || fcntl (fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -1;
    (void)setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof (one));
    return 0;
}

static void conn_epoll (struct mesh *m, struct conn *c, int op)
{
    struct epoll_event ev = {0};

    ev.events = EPOLLIN | (c->want_out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    (void)epoll_ctl (m->epfd, op, c->fd, &ev);
}

static struct conn *conn_new (struct mesh *m, int fd, int outbound, int state)
{
    struct conn *c = calloc (1, sizeof (*c));

    if (!c)
        return NULL;
    c->fd = fd;
    c->outbound = outbound;
    c->state = state;
    c->member = MESH_NONE;
    memcpy (c->key, m->key, MESH_KEY_SIZE); /* MESH_AUTH_MUNGE: set by the HELLO */
    c->created = c->last_rx = c->last_tx = mesh_now ();
    c->want_out = state == CONN_CONNECTING;
    c->next = m->conns;
    m->conns = c;
    conn_epoll (m, c, EPOLL_CTL_ADD);
    return c;
}

struct conn *conn_accept (struct mesh *m)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof (ss);
    char host[INET6_ADDRSTRLEN] = "?", port[16] = "?";
    struct conn *c;
    int fd;

    if ((fd = accept4 (m->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC)) < 0)
        return NULL;
    if (set_nonblock (fd) < 0 || !(c = conn_new (m, fd, 0, CONN_WAIT_HELLO))) {
        close (fd);
        return NULL;
    }
    getnameinfo ((struct sockaddr *)&ss,
                 sl,
                 host,
                 sizeof (host),
                 port,
                 sizeof (port),
                 NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf (c->name, sizeof (c->name), "%s:%s", host, port);
    memcpy (&c->peer, &ss, sizeof (ss));
    log_debug ("mesh %u: connection from %s", m->self, c->name);
    return c;
}

/* Send HELLO on a connected outbound connection (under munge with a
 * credential that binds its nonce).  Returns 0, or -1 when c is closed. */
static int send_hello (struct mesh *m, struct conn *c)
{
    struct mesh_wbuf b = {0};
    char *cred = NULL;
    size_t off;

    mesh_auth_nonce (c->nonce_c, MESH_NONCE_SIZE);
    if (m->auth == MESH_AUTH_MUNGE) {
        struct mesh_munge_claim cl = {m->self, c->member, m->n, c->nonce_c};
        elastic_error_t err = {{0}};
        if (mesh_auth_munge_encode (m->munge_socket, m->job, &cl, &cred, c->key, &err) <
            0) {
            log_warn ("mesh %u: %s", m->self, err.text);
            m->peers[c->member].next_connect = mesh_now () + m->hb_interval;
            conn_close (m, c, 0);
            return -1;
        }
    }
    off = mesh_begin (m,
                      &b,
                      MESH_HELLO,
                      (cred ? MESH_F_CRED : 0) | (m->listen_port > 0 ? MESH_F_PORT : 0));
    mesh_put_u32 (&b, c->member);
    mesh_put_u32 (&b, m->n);
    mesh_put_bytes (&b, c->nonce_c, MESH_NONCE_SIZE);
    if (cred)
        mesh_put_blob (&b, cred, strlen (cred));
    if (m->listen_port > 0)
        mesh_put_u32 (&b, (uint32_t)m->listen_port);
    if (mesh_msg_end (&b, off) == 0)
        conn_send (m, c, b.buf, b.len);
    mesh_wbuf_free (&b);
    free (cred);
    c->state = CONN_WAIT_CHALLENGE;
    return 0;
}

int conn_connect (struct mesh *m, uint32_t member)
{
    struct peer *p = &m->peers[member];
    struct conn *c;
    int fd, rc;

    if (m->addrlen[member] == 0) /* admitted, its address not heard of yet */
        return -1;
    if (m->deaf == 1) { /* a cut network: the SYN goes nowhere */
        p->refused = 0;
        p->next_connect = mesh_now () + m->hs_timeout;
        return 0;
    }
    fd = socket (m->addr[member].ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || set_nonblock (fd) < 0) {
        if (fd >= 0)
            close (fd);
        return -1;
    }
    rc = connect (fd, (struct sockaddr *)&m->addr[member], m->addrlen[member]);
    if (rc < 0 && errno != EINPROGRESS) {
        p->refused = errno == ECONNREFUSED;
        close (fd);
        next_port (m, member);
        return -1;
    }
    if (!(c = conn_new (m, fd, 1, CONN_CONNECTING))) {
        close (fd);
        return -1;
    }
    c->member = member;
    snprintf (c->name, sizeof (c->name), "member %u", member);
    p->conn = c;
    if (rc == 0) {
        c->want_out = 0;
        conn_epoll (m, c, EPOLL_CTL_MOD);
        send_hello (m, c);
    }
    return 0;
}

void conn_flush (struct mesh *m, struct conn *c)
{
    int want;

    if (m->deaf == 1) {
        c->out.len = 0;
        return;
    }
    while (c->out.len > 0 && c->state != CONN_CONNECTING) {
        ssize_t n = send (c->fd, c->out.buf, c->out.len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break; /* EAGAIN, or an error the next read sees */
        }
        m->sent_bytes += (uint64_t)n;
        mesh_wbuf_consume (&c->out, (size_t)n);
    }
    want = c->out.len > 0 || c->state == CONN_CONNECTING;
    if (want != c->want_out) {
        c->want_out = want;
        conn_epoll (m, c, EPOLL_CTL_MOD);
    }
}

/* Queue whole messages (p may hold several, as we encoded them) and send
 * what the socket takes; sealed, each gets its MAC trailer. */
void conn_send (struct mesh *m, struct conn *c, const uint8_t *p, size_t len)
{
    if (!c->tx_sealed) {
        mesh_put_bytes (&c->out, p, len);
    } else {
        size_t off = 0;
        while (len - off >= MESH_HDR_SIZE) {
            const uint8_t *h = p + off;
            size_t whole = MESH_HDR_SIZE + ((size_t)h[8] << 24 | (size_t)h[9] << 16 |
                                            (size_t)h[10] << 8 | h[11]);
            uint8_t mac[MESH_MAC_SIZE];

            if (whole > len - off)
                break; /* cannot happen: we encoded it */
            mesh_auth_msg_mac (c->tx_key, c->tx_seq++, h, whole, mac);
            mesh_put_bytes (&c->out, h, whole);
            mesh_put_bytes (&c->out, mac, MESH_MAC_SIZE);
            off += whole;
        }
    }
    c->last_tx = mesh_now ();
    conn_flush (m, c);
}

/* Unlink and free c; a BYE first when bye_reason is set and c is up. */
void conn_close (struct mesh *m, struct conn *c, int bye_reason)
{
    struct conn **pp;

    if (c->closed)
        return;
    if (bye_reason && c->state == CONN_UP) {
        struct mesh_wbuf b = {0};
        size_t off = mesh_begin (m, &b, MESH_BYE, 0);
        mesh_put_u8 (&b, (uint8_t)bye_reason);
        if (mesh_msg_end (&b, off) == 0)
            conn_send (m, c, b.buf, b.len);
        mesh_wbuf_free (&b);
    }
    for (pp = &m->conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    if (c->member != MESH_NONE && c->member < m->n && m->peers[c->member].conn == c) {
        m->peers[c->member].conn = NULL;
        if (c->outbound && c->state != CONN_UP) /* refused, or a stranger */
            next_port (m, c->member);
    }
    (void)epoll_ctl (m->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    if (m->deaf == 1) { /* a cut network carries no FIN either: keep it open */
        int *fds = realloc (m->mute_fds, (m->nmute + 1) * sizeof (*fds));
        if (fds) {
            m->mute_fds = fds;
            m->mute_fds[m->nmute++] = c->fd;
        } else {
            close (c->fd);
        }
    } else {
        close (c->fd);
    }
    c->fd = -1;
    c->closed = 1;
    c->next = m->graveyard;
    m->graveyard = c;
}

/* Free the connections closed in this round (events may still name them). */
void conn_bury (struct mesh *m)
{
    while (m->graveyard) {
        struct conn *c = m->graveyard;
        m->graveyard = c->next;
        free (c->in);
        mesh_wbuf_free (&c->out);
        free (c);
    }
}

/* Drop a connection that misbehaved, with one log line. */
static void conn_drop (struct mesh *m, struct conn *c, const char *why)
{
    int was_up = c->state == CONN_UP;

    log_warn ("mesh %u: dropped connection %s%s: %s",
              m->self,
              c->name,
              was_up ? "" : " (not authenticated)",
              why);
    if (was_up)
        mesh_link_down (m, c); /* frees c */
    else
        conn_close (m, c, 0);
}

/* Under munge, the HELLO's credential: made by our uid for this job, from
 * this member to us, for this very HELLO (its nonce), never decoded
 * before; it gives the connection's key.  Returns 0, or -1 (c dropped). */
static int check_credential (struct mesh *m, struct conn *c, const struct mesh_msg *msg)
{
    struct mesh_munge_claim cl = {msg->hdr.source, m->self, m->n, msg->u.hello.nonce};
    elastic_error_t err = {{0}};

    if (msg->hdr.flags & MESH_F_JOIN) { /* a newcomer binds no member id */
        cl.client = MESH_NEWCOMER;
        cl.nmembers = 0;
    }
    if (m->auth != MESH_AUTH_MUNGE) {
        if (!msg->u.hello.cred)
            return 0;
        conn_drop (m, c, "a hello with a munge credential (this mesh uses a secret)");
        return -1;
    }
    if (!msg->u.hello.cred) {
        conn_drop (m, c, "a hello without a munge credential (this mesh uses munge)");
        return -1;
    }
    if (mesh_auth_munge_decode (m->munge_socket,
                                m->job,
                                (const char *)msg->u.hello.cred,
                                msg->u.hello.cred_len,
                                &cl,
                                c->key,
                                &err) < 0) {
        conn_drop (m, c, err.text);
        return -1;
    }
    return 0;
}

/* The ids a handshake binds: a newcomer's (HELLO flagged JOIN) are
 * MESH_NEWCOMER and size 0, so its proofs never pass for a member's. */
static uint32_t hs_client (const struct conn *c)
{
    return c->newcomer ? MESH_NEWCOMER : c->member;
}

static uint32_t hs_size (const struct mesh *m, const struct conn *c)
{
    return c->newcomer ? 0 : m->n;
}

static int on_hello (struct mesh *m, struct conn *c, const struct mesh_msg *msg)
{
    struct mesh_wbuf b = {0};
    uint32_t from = msg->hdr.source;
    int newcomer = (msg->hdr.flags & MESH_F_JOIN) != 0;
    size_t off;

    if (newcomer && msg->u.hello.target != m->self) {
        char why[128];
        snprintf (why,
                  sizeof (why),
                  "a newcomer's hello for member %u (this is member %u)",
                  msg->u.hello.target,
                  m->self);
        conn_drop (m, c, why);
        return -1;
    }
    if (!newcomer && (msg->u.hello.target != m->self || msg->u.hello.nmembers != m->n ||
                      from >= m->n || from == m->self)) {
        char why[160];
        snprintf (why,
                  sizeof (why),
                  "hello from member %u for member %u of %u (this is member %u of %u)",
                  from,
                  msg->u.hello.target,
                  msg->u.hello.nmembers,
                  m->self,
                  m->n);
        conn_drop (m, c, why);
        return -1;
    }
    if (check_credential (m, c, msg) < 0)
        return -1;
    c->newcomer = newcomer;
    c->member = newcomer ? MESH_NONE : from;
    c->hello_port = msg->u.hello.port;
    memcpy (c->nonce_c, msg->u.hello.nonce, MESH_NONCE_SIZE);
    mesh_auth_nonce (c->nonce_s, MESH_NONCE_SIZE);
    off = mesh_begin (m, &b, MESH_CHALLENGE, 0);
    mesh_put_bytes (&b, c->nonce_s, MESH_NONCE_SIZE);
    {
        uint8_t mac[MESH_MAC_SIZE];
        mesh_auth_mac (c->key,
                       MESH_ROLE_SERVER,
                       c->nonce_c,
                       c->nonce_s,
                       hs_client (c),
                       m->self,
                       hs_size (m, c),
                       mac);
        mesh_put_bytes (&b, mac, MESH_MAC_SIZE);
    }
    if (mesh_msg_end (&b, off) == 0)
        conn_send (m, c, b.buf, b.len);
    mesh_wbuf_free (&b);
    mesh_auth_session_keys (c->key, c->nonce_c, c->nonce_s, c->rx_key, c->tx_key);
    c->state = CONN_WAIT_AUTH;
    return 0;
}

static int on_challenge (struct mesh *m, struct conn *c, const struct mesh_msg *msg)
{
    struct mesh_wbuf b = {0};
    uint8_t mac[MESH_MAC_SIZE];
    size_t off;

    memcpy (c->nonce_s, msg->u.challenge.nonce, MESH_NONCE_SIZE);
    if (msg->hdr.source != c->member || mesh_auth_verify (c->key,
                                                          MESH_ROLE_SERVER,
                                                          c->nonce_c,
                                                          c->nonce_s,
                                                          m->self,
                                                          c->member,
                                                          m->n,
                                                          msg->u.challenge.mac) < 0) {
        conn_drop (
            m, c, "the server failed authentication (another job, or a wrong secret)");
        return -1;
    }
    mesh_auth_mac (
        c->key, MESH_ROLE_CLIENT, c->nonce_c, c->nonce_s, m->self, c->member, m->n, mac);
    off = mesh_begin (m, &b, MESH_AUTH, 0);
    mesh_put_bytes (&b, mac, MESH_MAC_SIZE);
    if (mesh_msg_end (&b, off) == 0)
        conn_send (m, c, b.buf, b.len);
    mesh_wbuf_free (&b);
    /* from here on, both ways, every message is sealed */
    mesh_auth_session_keys (c->key, c->nonce_c, c->nonce_s, c->tx_key, c->rx_key);
    c->tx_sealed = c->rx_sealed = 1;
    c->state = CONN_UP;
    m->peers[c->member].port_known = 1;
    mesh_link_up (m, c);
    return 0;
}

static int on_auth (struct mesh *m, struct conn *c, const struct mesh_msg *msg)
{
    if (msg->hdr.source != (c->newcomer ? 0 : c->member) ||
        mesh_auth_verify (c->key,
                          MESH_ROLE_CLIENT,
                          c->nonce_c,
                          c->nonce_s,
                          hs_client (c),
                          m->self,
                          hs_size (m, c),
                          msg->u.auth.mac) < 0) {
        char why[128];
        if (c->newcomer)
            snprintf (why,
                      sizeof (why),
                      "a newcomer failed authentication (another job, or a wrong "
                      "secret)");
        else
            snprintf (why,
                      sizeof (why),
                      "claimed member %u failed authentication (wrong secret?)",
                      c->member);
        conn_drop (m, c, why);
        return -1;
    }
    if (c->newcomer) { /* authenticated both ways: admit it, answer, close (never
                          UP: floods to the members' links skip it) */
        char addr[INET6_ADDRSTRLEN + 16];
        c->tx_sealed = c->rx_sealed = 1;
        mesh_addr_format (&c->peer, (int)c->hello_port, addr, sizeof (addr));
        mesh_admit_newcomer (m, c, addr);
        return -1;
    }
    snprintf (c->name, sizeof (c->name), "member %u", c->member);
    c->tx_sealed = c->rx_sealed = 1;
    c->state = CONN_UP;
    /* where it listens, as its HELLO said: where we look for it first (a
     * hint, not checked by the handshake: next_port still moves on) */
    for (uint32_t k = 0; k < m->nports && !m->peers[c->member].port_known; k++)
        if (c->hello_port && (uint32_t)m->ports[k] == c->hello_port)
            use_port (m, c->member, k);
    mesh_link_up (m, c);
    return 0;
}

/* The longest payload accepted now: MESH_MAX_PREAUTH before the peer is
 * authenticated, more for a HELLO's munge credential. */
static uint32_t max_payload (struct mesh *m, struct conn *c)
{
    if (c->state == CONN_UP)
        return MESH_MAX_PAYLOAD;
    if (c->state == CONN_WAIT_HELLO && m->auth == MESH_AUTH_MUNGE)
        return MESH_MAX_PREAUTH + 4 + MESH_MUNGE_CRED_MAX;
    return MESH_MAX_PREAUTH;
}

/* One whole message in c->in[0..len): 0 to go on, -1 when c is gone. */
static int conn_message (struct mesh *m, struct conn *c, size_t len)
{
    elastic_error_t err = {{0}};
    struct mesh_msg msg;
    uint32_t max = max_payload (m, c);

    if (c->rx_sealed) {
        len -= MESH_MAC_SIZE;
        if (mesh_auth_msg_verify (c->rx_key, c->rx_seq++, c->in, len, c->in + len) < 0) {
            conn_drop (m, c, "a message with a bad MAC (altered, injected or replayed)");
            return -1;
        }
    }
    if (mesh_msg_decode (c->in, len, max, &msg, &err) < 0) {
        conn_drop (m, c, err.text);
        return -1;
    }
    c->last_rx = mesh_now ();
    switch (c->state) {
        /* a handler may close c (a lost member calling): then stop reading */
        case CONN_WAIT_HELLO:
            if (msg.hdr.type != MESH_HELLO)
                break;
            return on_hello (m, c, &msg) < 0 || c->closed ? -1 : 0;
        case CONN_WAIT_CHALLENGE:
            if (msg.hdr.type == MESH_BYE) {
                conn_drop (m, c, "refused by the server");
                return -1;
            }
            if (msg.hdr.type != MESH_CHALLENGE)
                break;
            return on_challenge (m, c, &msg) < 0 || c->closed ? -1 : 0;
        case CONN_WAIT_AUTH:
            if (msg.hdr.type != MESH_AUTH)
                break;
            return on_auth (m, c, &msg) < 0 || c->closed ? -1 : 0;
        case CONN_UP:
            if (msg.hdr.source != c->member) {
                conn_drop (m, c, "a message with another member's source");
                return -1;
            }
            if (msg.hdr.type == MESH_HELLO || msg.hdr.type == MESH_CHALLENGE ||
                msg.hdr.type == MESH_AUTH)
                break;
            m->peers[c->member].last_rx = c->last_rx;
            mesh_handle (m, c, &msg, c->in, len);
            return c->closed ? -1 : 0; /* closed by a BYE, a loss */
    }
    {
        char why[96];
        snprintf (
            why, sizeof (why), "unexpected %s message", mesh_type_name (msg.hdr.type));
        conn_drop (m, c, why);
    }
    return -1;
}

static void conn_read (struct mesh *m, struct conn *c)
{
    for (int rounds = 0; rounds < 64; rounds++) {
        ssize_t n;

        if (c->incap - c->inlen < 65536) {
            size_t cap = c->incap ? c->incap * 2 : 65536 + MESH_HDR_SIZE;
            uint8_t *p = realloc (c->in, cap);
            if (!p) {
                conn_drop (m, c, "out of memory");
                return;
            }
            c->in = p;
            c->incap = cap;
        }
        n = recv (c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
        if (m->deaf) { /* a cut network: nothing arrives, EOF neither */
            if (n == 0)
                conn_close (m, c, 0);
            return;
        }
        if (n == 0) {
            if (c->state == CONN_UP) {
                log_info ("mesh %u: %s closed the connection", m->self, c->name);
                mesh_link_down (m, c);
            } else {
                log_warn ("mesh %u: dropped connection %s (not authenticated): closed "
                          "during the handshake",
                          m->self,
                          c->name);
                if (c->outbound && c->member != MESH_NONE)
                    m->peers[c->member].next_connect = mesh_now () + 0.1;
                conn_close (m, c, 0);
            }
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (c->state == CONN_UP) {
                log_info ("mesh %u: %s: %s", m->self, c->name, strerror (errno));
                mesh_link_down (m, c);
            } else {
                conn_close (m, c, 0);
            }
            return;
        }
        m->recv_bytes += (uint64_t)n;
        c->inlen += (size_t)n;
        /* take every whole message */
        for (;;) {
            elastic_error_t err = {{0}};
            struct mesh_hdr h;
            uint32_t max = max_payload (m, c);
            size_t whole;

            if (c->inlen < MESH_HDR_SIZE)
                break;
            if (mesh_hdr_decode (c->in, c->inlen, max, &h, &err) < 0) {
                conn_drop (m, c, err.text);
                return;
            }
            whole = MESH_HDR_SIZE + (size_t)h.length + (c->rx_sealed ? MESH_MAC_SIZE : 0);
            if (c->inlen < whole) {
                if (c->incap < whole) {
                    uint8_t *p = realloc (c->in, whole);
                    if (!p) {
                        conn_drop (m, c, "out of memory");
                        return;
                    }
                    c->in = p;
                    c->incap = whole;
                }
                break;
            }
            if (conn_message (m, c, whole) < 0)
                return;
            memmove (c->in, c->in + whole, c->inlen - whole);
            c->inlen -= whole;
        }
    }
}

void conn_io (struct mesh *m, struct conn *c, int events)
{
    if (c->closed)
        return;
    if (c->state == CONN_CONNECTING && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int e = 0;
        socklen_t el = sizeof (e);
        struct peer *p = &m->peers[c->member];

        (void)getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &e, &el);
        if (e != 0) {
            p->refused = e == ECONNREFUSED;
            p->next_connect = mesh_now () + 0.1;
            log_debug (
                "mesh %u: connect to member %u: %s", m->self, c->member, strerror (e));
            conn_close (m, c, 0);
            return;
        }
        p->refused = 0;
        c->state = CONN_WAIT_CHALLENGE;
        conn_flush (m, c);
        send_hello (m, c);
        return;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        conn_read (m, c);
        if (c->closed)
            return;
    }
    if (events & EPOLLOUT)
        conn_flush (m, c);
}

/* The handshake timeout of c.  A member that becomes our neighbour in a
 * repair, on a port we do not know yet (candidate ports), is looked for
 * with a short one: a silent stranger on each other candidate then costs
 * the search at most half a node timeout in all, well within the node
 * timeout both sides give it (a slow member is found in the next round). */
static double hs_timeout_of (const struct mesh *m, const struct conn *c)
{
    const struct peer *p;

    if (!c->outbound || c->member >= m->n || m->nports < 2)
        return m->hs_timeout;
    p = &m->peers[c->member];
    if (p->port_known || p->join_by > 0 || p->ever_up)
        return m->hs_timeout;
    return m->node_timeout / (2.0 * m->nports);
}

/* Handshakes that take too long: a peer that connects and says nothing,
 * or a member that accepted (its kernel did) but is stopped. */
void conn_tick (struct mesh *m, double now)
{
    struct conn *c = m->conns, *next;

    for (; c; c = next) {
        next = c->next;
        if (c->closed || c->state == CONN_UP || now - c->created < hs_timeout_of (m, c))
            continue;
        if (c->outbound && c->member != MESH_NONE)
            m->peers[c->member].next_connect = now;
        if (c->state == CONN_WAIT_HELLO)
            conn_drop (m, c, "said nothing (handshake timeout)");
        else
            conn_drop (m, c, "handshake timeout");
    }
}
