/* rdzv_tcp.c - the bootstrap rendezvous of a torchrun-style launch
 * (rdzv_tcp.h says what and why; this is how)
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h> /* isfinite */
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "common/clock.h"
#include "common/log.h"
#include "mesh/auth.h"
#include "rdzv_proto.h"
#include "rdzv_tcp.h"

#define NONCE    RDZV_NONCE
#define MAC      RDZV_MAC
#define HDR      RDZV_HDR
#define HELLO_SZ RDZV_HELLO_SIZE
#define JOIN_MAX RDZV_JOIN_MAX
#define ACK_SZ   RDZV_ACK_SIZE
#define LIST_FIX RDZV_LIST_FIXED
#define FAIL_MAX RDZV_FAIL_TEXT /* longest FAIL text */
#define OUT_MAX  RDZV_FAIL_MAX  /* largest message but LIST's body */

_Static_assert(OUT_MAX >= HELLO_SZ && OUT_MAX >= LIST_FIX, "output head size");

/* "2,5-7,9" of the members not in have[0..n-1], cut with ",..." */
static void format_missing (const uint8_t *have, int n, char *buf, size_t size)
{
    size_t off = 0;
    int first = 1;

    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        int j = i;
        char item[32];

        if (have[i])
            continue;
        while (j + 1 < n && !have[j + 1])
            j++;
        if (j > i)
            snprintf (item, sizeof (item), "%s%d-%d", first ? "" : ",", i, j);
        else
            snprintf (item, sizeof (item), "%s%d", first ? "" : ",", i);
        if (off + strlen (item) + 5 > size) {
            snprintf (buf + off, size - off, ",...");
            return;
        }
        off += (size_t)snprintf (buf + off, size - off, "%s", item);
        first = 0;
        i = j;
    }
}

static void sleep_s (double s)
{
    struct timespec ts;

    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int poll_ms (double until)
{
    double left = until - mono_now ();

    if (left <= 0)
        return 0;
    if (left > 1000.0)
        left = 1000.0;
    return (int)(left * 1000.0) + 1;
}

static int set_nonblock (int fd)
{
    int fl = fcntl (fd, F_GETFL);

    return fl < 0 ? -1 : fcntl (fd, F_SETFL, fl | O_NONBLOCK);
}

/* ---- the server ---------------------------------------------------------- */

enum cstate {
    C_HELLO,    /* HELLO queued; expecting a JOIN */
    C_JOINED,   /* joined; waiting for the others */
    C_LISTED,   /* LIST queued; expecting the ACK */
    C_CLOSING,  /* FAIL queued; closed once it is out */
    C_ADMITTED, /* ADMIT queued (a node joining the running job); expecting the ACK */
};

struct rconn {
    int fd;
    enum cstate state;
    double since; /* when the current state's wait began */
    uint8_t ns[NONCE], nc[NONCE];
    uint32_t rank;                       /* as its JOIN says (RDZV_RANK_ANY: none) */
    uint32_t index;                      /* its place in the LIST, once queued */
    char joined_addr[RDZV_ADDR_MAX + 1]; /* what it joined with */
    uint8_t in[JOIN_MAX];
    size_t inlen;
    /* output: head, then an optional shared body, then the tail */
    uint8_t head[OUT_MAX];
    const uint8_t *body;
    uint8_t *own_body; /* an ADMIT's body (the connection's own) */
    uint8_t tail[MAC];
    size_t seglen[3], segoff;
    int seg;
};

struct rserver {
    int lfd, stopfd;
    int nnodes, nmin; /* --nnodes MAX, and MIN (a start with fewer) */
    uint8_t kr[32];
    double start, deadline, timeout;
    double last_call; /* wait this long for more once MIN joined */
    double min_at;    /* when the MIN-th joined (0: not yet) */
    char where[RDZV_ADDR_MAX + 32];
    char **addr;     /* [nnodes] what each node rank joined with, or NULL */
    uint8_t *joined; /* [nnodes] */
    char **any;      /* [nnodes] members without --node-rank, in join order */
    int nany;
    char **order; /* [nlisted] the LIST's addresses, once it is out */
    int nlisted;
    uint8_t *acked; /* [nnodes] by place in the LIST */
    int njoined, nacked;
    uint8_t *list; /* the LIST body once the job's nodes are known */
    size_t listsize;
    uint8_t listhead[LIST_FIX];
    uint8_t digest[32];
    struct rconn **c;
    int nc, cap, maxconn;
    double accept_pause; /* EMFILE: accept again after this time */
    elastic_error_t err; /* why it ended, when it failed */
    int rc;
    /* joins: after the start the server goes on serving until stopped,
     * answering a new node's JOIN with admit's admission */
    int persist;
    pthread_mutex_t admit_lock;
    rdzv_tcp_admit_fn admit;
    void *admit_arg;
};

/* A server that goes on serving after the start (rdzv_tcp.h). */
struct rdzv_tcp_server {
    struct rserver *s;
    pthread_t tid;
    int stop; /* the stop pipe's write end */
};

static const uint8_t *out_seg (struct rconn *c, int i)
{
    return i == 0 ? c->head : i == 1 ? c->body : c->tail;
}

static int out_pending (const struct rconn *c)
{
    return c->seg < 3;
}

/* Queue one message (head only). */
static void queue (struct rconn *c, size_t len)
{
    c->seglen[0] = len;
    c->seglen[1] = 0;
    c->seglen[2] = 0;
    c->body = NULL;
    c->seg = 0;
    c->segoff = 0;
}

static void queue_fail (struct rconn *c, const char *text)
{
    queue (c, rdzv_fail_encode (text, c->head));
    c->state = C_CLOSING;
    c->since = mono_now ();
}

/* Queue an answer whose head (hlen bytes) and MAC are in c->head and
 * c->tail, with body between them; the ACK of index is due next. */
static void queue_answer (struct rconn *c,
                          size_t hlen,
                          const uint8_t *body,
                          size_t size,
                          uint32_t index,
                          enum cstate state)
{
    queue (c, hlen);
    c->body = body;
    c->seglen[1] = size;
    c->seglen[2] = MAC;
    c->index = index;
    c->state = state;
    c->since = mono_now ();
}

static void queue_list (struct rserver *s, struct rconn *c, int index)
{
    memcpy (c->head, s->listhead, LIST_FIX);
    rdzv_list_mac (s->kr, c->nc, s->digest, c->tail);
    queue_answer (c, LIST_FIX, s->list, s->listsize, (uint32_t)index, C_LISTED);
}

/* Send what is queued.  Returns 0, or -1 when the connection is gone. */
static int conn_flush (struct rconn *c)
{
    while (c->seg < 3) {
        size_t len = c->seglen[c->seg] - c->segoff;
        ssize_t n;

        if (len == 0) {
            c->seg++;
            c->segoff = 0;
            continue;
        }
        n = send (c->fd, out_seg (c, c->seg) + c->segoff, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        c->segoff += (size_t)n;
    }
    c->since = mono_now (); /* the wait for the answer starts now */
    return 0;
}

static void conn_close (struct rconn *c)
{
    if (c->fd >= 0)
        close (c->fd);
    c->fd = -1;
    free (c->own_body);
    c->own_body = NULL;
    c->body = NULL;
}

/* Whether a (NUL-terminated, may be NULL) is the address b[0..len). */
static int same_addr (const char *a, const void *b, size_t len)
{
    return a && strlen (a) == len && !memcmp (a, b, len);
}

/* The place of the member that joined as addr (len bytes) in the LIST,
 * or -1. */
static int list_index (const struct rserver *s, const void *addr, size_t len)
{
    for (int i = 0; i < s->nlisted; i++)
        if (same_addr (s->order[i], addr, len))
            return i;
    return -1;
}

/* Whether a member without --node-rank joined as addr (len bytes). */
static int joined_any (const struct rserver *s, const void *addr, size_t len)
{
    for (int i = 0; i < s->nany; i++)
        if (same_addr (s->any[i], addr, len))
            return 1;
    return 0;
}

/* The job's nodes are known (all MAX joined, or MIN and the last call
 * passed): the LIST names those with a node rank in its order, then
 * those without in the order they came; send it to every one waiting. */
static void send_list (struct rserver *s)
{
    elastic_error_t e;
    int n = 0;

    for (int i = 0; i < s->nnodes; i++)
        if (s->addr[i])
            s->order[n++] = s->addr[i];
    for (int i = 0; i < s->nany; i++)
        s->order[n++] = s->any[i];
    if (rdzv_list_encode (
            s->order, (uint32_t)n, s->listhead, &s->list, &s->listsize, s->digest, &e) <
        0) {
        s->rc = errprintf (&s->err, "%s: %s", s->where, e.text);
        return;
    }
    s->nlisted = n;
    if (n < s->nnodes)
        log_info ("%s: %d of at most %d nodes joined, and no other within the last "
                  "call (%g s): the job starts with %d",
                  s->where,
                  n,
                  s->nnodes,
                  s->last_call,
                  n);
    else
        log_debug ("%s: all %d nodes joined; sending the list", s->where, n);
    for (int i = 0; i < s->nc; i++) {
        struct rconn *c = s->c[i];
        int k = c->fd >= 0 && c->state == C_JOINED
                    ? list_index (s, c->joined_addr, strlen (c->joined_addr))
                    : -1;

        if (k >= 0)
            queue_list (s, c, k);
    }
}

/* Whether the LIST is due: every node joined, or MIN did and the last
 * call or the deadline passed. */
static int list_due (const struct rserver *s, double now)
{
    return s->njoined == s->nnodes ||
           (s->njoined >= s->nmin &&
            ((s->min_at > 0 && now >= s->min_at + s->last_call) || now >= s->deadline));
}

/* A JOIN after the start, of a node that was not in the job's list:
 * admitted into the running job by admit (the mesh), or refused. */
static void
admit (struct rserver *s, struct rconn *c, const struct rdzv_join *j, const char *what)
{
    struct rdzv_admission a = {0};
    char addr[RDZV_ADDR_MAX + 1], why[FAIL_MAX + 1] = "";
    uint8_t *body = NULL;
    size_t size = 0;
    elastic_error_t e;
    int rc = -1;

    snprintf (addr, sizeof (addr), "%.*s", (int)j->addr_len, (const char *)j->addr);
    memcpy (c->nc, j->nonce, NONCE);
    c->rank = j->rank;
    c->inlen = 0;
    pthread_mutex_lock (&s->admit_lock);
    if (s->admit)
        rc = s->admit (s->admit_arg, addr, &a, why, sizeof (why));
    else
        snprintf (why,
                  sizeof (why),
                  "the job is starting (its mesh is not up yet): %s may try again in a "
                  "moment",
                  what);
    pthread_mutex_unlock (&s->admit_lock);
    if (rc == 0 &&
        rdzv_admit_encode (s->kr, c->nc, &a, c->head, &body, &size, c->tail, &e) < 0) {
        snprintf (why, sizeof (why), "%.200s", e.text);
        rc = -1;
    }
    if (rc < 0) {
        rdzv_admission_free (&a);
        log_warn ("%s: refused %s (%s): %s", s->where, what, addr, why);
        queue_fail (c, why);
        return;
    }
    c->own_body = body;
    queue_answer (c, RDZV_ADMIT_FIXED, body, size, a.slot, C_ADMITTED);
    log_info (
        "%s: %s (%s) joins the running job as member %u", s->where, what, addr, a.slot);
    rdzv_admission_free (&a);
}

static void handle_join (struct rserver *s, struct rconn *c)
{
    struct rdzv_join j;
    char what[64], host[RDZV_ADDR_MAX + 1], text[FAIL_MAX + 1];
    elastic_error_t e;

    if (rdzv_join_decode (s->kr, c->ns, c->in, c->inlen, &j, &e) < 0) {
        snprintf (text, sizeof (text), "%s", e.text);
        goto refuse;
    }
    if (j.nnodes != (uint32_t)s->nnodes) {
        snprintf (text,
                  sizeof (text),
                  "node rank %u says --nnodes %u; the endpoint's server has %d",
                  j.rank,
                  j.nnodes,
                  s->nnodes);
        goto refuse;
    }
    if (j.rank >= (uint32_t)s->nnodes && j.rank != RDZV_RANK_ANY) {
        snprintf (text,
                  sizeof (text),
                  "node rank %u is out of range (0..%d)",
                  j.rank,
                  s->nnodes - 1);
        goto refuse;
    }
    if (j.rank == RDZV_RANK_ANY)
        snprintf (what, sizeof (what), "a node without --node-rank");
    else
        snprintf (what, sizeof (what), "node rank %u", j.rank);
    if (rdzv_addr_check (what, j.addr, j.addr_len, host, &e) < 0) {
        snprintf (text, sizeof (text), "%s", e.text);
        goto refuse;
    }
    if (s->list) {
        /* the job's nodes are known: a member of it that lost its
         * connection gets the LIST again; any other node is admitted into
         * the running job, where it takes nodes after its start */
        int k = list_index (s, j.addr, j.addr_len);

        if ((k < 0 || s->acked[k]) && s->persist) {
            admit (s, c, &j, what);
            return;
        }
        if (k < 0) {
            snprintf (text,
                      sizeof (text),
                      "the job started with %d of at most %d nodes without %s: this "
                      "job takes no node after its start (MPI ranks, or a static "
                      "rendezvous)",
                      s->nlisted,
                      s->nnodes,
                      what);
            goto refuse;
        }
        c->rank = j.rank;
        memcpy (c->nc, j.nonce, NONCE);
        c->inlen = 0;
        queue_list (s, c, k);
        return;
    }
    if (j.rank == RDZV_RANK_ANY) {
        if (!joined_any (s, j.addr, j.addr_len)) {
            if (s->njoined == s->nnodes) {
                snprintf (text,
                          sizeof (text),
                          "all %d nodes of --nnodes have joined already",
                          s->nnodes);
                goto refuse;
            }
            if (!(s->any[s->nany] = strndup ((const char *)j.addr, j.addr_len))) {
                snprintf (text, sizeof (text), "out of memory");
                goto refuse;
            }
            s->nany++;
            s->njoined++;
            log_debug ("%s: a node without --node-rank joined as %s (%d of %d)",
                       s->where,
                       s->any[s->nany - 1],
                       s->njoined,
                       s->nnodes);
        }
        goto joined;
    }
    if (!s->addr[j.rank] && s->njoined == s->nnodes) {
        snprintf (text,
                  sizeof (text),
                  "all %d nodes of --nnodes have joined already (node rank %u "
                  "comes too late)",
                  s->nnodes,
                  j.rank);
        goto refuse;
    }
    if (s->addr[j.rank] && !same_addr (s->addr[j.rank], j.addr, j.addr_len)) {
        snprintf (text,
                  sizeof (text),
                  "node rank %u already joined as %s; this one says %.*s (two "
                  "members with --node-rank %u?)",
                  j.rank,
                  s->addr[j.rank],
                  (int)j.addr_len,
                  (const char *)j.addr,
                  j.rank);
        goto refuse;
    }
    if (!s->addr[j.rank]) {
        if (!(s->addr[j.rank] = strndup ((const char *)j.addr, j.addr_len))) {
            snprintf (text, sizeof (text), "out of memory");
            goto refuse;
        }
        s->joined[j.rank] = 1;
        s->njoined++;
        log_debug ("%s: node rank %u joined as %s (%d of %d)",
                   s->where,
                   j.rank,
                   s->addr[j.rank],
                   s->njoined,
                   s->nnodes);
    }
joined:
    c->rank = j.rank;
    memcpy (c->nc, j.nonce, NONCE);
    snprintf (c->joined_addr, sizeof (c->joined_addr), "%.*s", (int)j.addr_len, j.addr);
    c->state = C_JOINED;
    c->since = mono_now ();
    c->inlen = 0;
    if (s->njoined >= s->nmin && s->min_at == 0)
        s->min_at = c->since; /* the last call starts (server_loop sends the list) */
    return;
refuse:
    log_warn ("%s: refused a connection: %s", s->where, text);
    queue_fail (c, text);
}

static void handle_ack (struct rserver *s, struct rconn *c)
{
    elastic_error_t e;

    if (rdzv_ack_decode (s->kr, c->ns, c->nc, c->index, c->in, c->inlen, &e) < 0) {
        log_debug ("%s: dropped a connection: %s", s->where, e.text);
        conn_close (c);
        return;
    }
    if (c->state == C_ADMITTED) {
        log_debug ("%s: member %u confirmed its admission", s->where, c->index);
        conn_close (c);
        return;
    }
    if (!s->acked[c->index]) {
        s->acked[c->index] = 1;
        s->nacked++;
    }
    conn_close (c);
}

/* The message a connection may send in its state: a JOIN first, the ACK
 * once the LIST is out; nothing else (0). */
static int conn_expects (const struct rconn *c)
{
    if (c->state == C_HELLO)
        return RDZV_JOIN;
    if ((c->state == C_LISTED || c->state == C_ADMITTED) && !out_pending (c))
        return RDZV_ACK;
    return 0;
}

static void conn_read (struct rserver *s, struct rconn *c)
{
    for (;;) {
        elastic_error_t e;
        size_t need;
        ssize_t n;
        int rc = rdzv_msg_need (c->in, c->inlen, conn_expects (c), 0, &need, &e);

        if (rc == 0 && need > sizeof (c->in)) /* never: JOIN_MAX is the longest */
            rc = errprintf (&e, "a message of %zu bytes", need);
        if (rc == -2) { /* a JOIN refused for its length: say why */
            log_warn ("%s: refused a connection: %s", s->where, e.text);
            queue_fail (c, e.text);
            return;
        }
        if (rc < 0) {
            log_debug ("%s: dropped a connection that sent no rendezvous message (%s)",
                       s->where,
                       e.text);
            conn_close (c);
            return;
        }
        if (c->inlen == need) {
            if (c->state == C_HELLO)
                handle_join (s, c);
            else
                handle_ack (s, c);
            return;
        }
        n = recv (c->fd, c->in + c->inlen, need - c->inlen, 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
            conn_close (c);
            return;
        }
        if (n < 0)
            return;
        c->inlen += (size_t)n;
    }
}

static void accept_all (struct rserver *s)
{
    for (;;) {
        struct rconn *c;
        int fd = accept4 (s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                s->accept_pause = mono_now () + 0.1;
            return;
        }
        if (s->nc >= s->maxconn) {
            close (fd);
            continue;
        }
        if (s->nc == s->cap) {
            int cap = s->cap ? 2 * s->cap : 16;
            struct rconn **nc = realloc (s->c, (size_t)cap * sizeof (*nc));

            if (!nc) {
                close (fd);
                continue;
            }
            s->c = nc;
            s->cap = cap;
        }
        if (!(c = calloc (1, sizeof (*c)))) {
            close (fd);
            continue;
        }
        c->fd = fd;
        c->state = C_HELLO;
        c->since = mono_now ();
        mesh_auth_nonce (c->ns, NONCE);
        rdzv_hello_encode (c->ns, c->head);
        queue (c, HELLO_SZ);
        if (conn_flush (c) < 0)
            conn_close (c);
        s->c[s->nc++] = c;
    }
}

/* Drop closed connections and those silent too long. */
static void sweep (struct rserver *s, double now)
{
    int j = 0;

    for (int i = 0; i < s->nc; i++) {
        struct rconn *c = s->c[i];
        int idle = (c->state != C_JOINED) &&
                   !((c->state == C_LISTED || c->state == C_ADMITTED) && out_pending (c));

        if (c->fd >= 0 && idle && now - c->since > RDZV_IDLE_S) {
            if (c->state == C_HELLO)
                log_debug ("%s: dropped a connection that sent no JOIN in %.0f s",
                           s->where,
                           RDZV_IDLE_S);
            conn_close (c);
        }
        if (c->fd < 0)
            free (c);
        else
            s->c[j++] = c;
    }
    s->nc = j;
}

/* At the deadline, or when this member's own client gave up: tell every
 * member still waiting why, give it a second to go out, close. */
static void server_fail (struct rserver *s, const char *text)
{
    double until = mono_now () + 1.0;
    int left;

    for (int i = 0; i < s->nc; i++)
        if (s->c[i]->fd >= 0 && s->c[i]->state == C_JOINED)
            queue_fail (s->c[i], text);
    do {
        struct pollfd pfd[1];

        left = 0;
        for (int i = 0; i < s->nc; i++) {
            struct rconn *c = s->c[i];

            if (c->fd < 0 || c->state != C_CLOSING)
                continue;
            if (conn_flush (c) < 0 || !out_pending (c)) {
                conn_close (c);
                continue;
            }
            left++;
            pfd[0].fd = c->fd;
            pfd[0].events = POLLOUT;
            (void)poll (pfd, 1, 10);
        }
    } while (left > 0 && mono_now () < until);
}

static void server_timed_out (struct rserver *s)
{
    char missing[128], text[FAIL_MAX + 1];

    if (s->list) {
        format_missing (s->acked, s->nlisted, missing, sizeof (missing));
        log_warn ("%s: %d of %d nodes confirmed the list within %g s (not: %s)",
                  s->where,
                  s->nacked,
                  s->nlisted,
                  s->timeout,
                  missing);
        return;
    }
    format_missing (s->joined, s->nnodes, missing, sizeof (missing));
    if (s->nmin == s->nnodes && s->nany == 0)
        snprintf (text,
                  sizeof (text),
                  "%d of %d nodes joined within %g s (missing node ranks: %s)",
                  s->njoined,
                  s->nnodes,
                  s->timeout,
                  missing);
    else
        snprintf (text,
                  sizeof (text),
                  "%d node%s joined within %g s, fewer than the %d that --nnodes %d:%d "
                  "asks for at least",
                  s->njoined,
                  s->njoined == 1 ? "" : "s",
                  s->timeout,
                  s->nmin,
                  s->nmin,
                  s->nnodes);
    s->rc = errprintf (&s->err, "%s: %s", s->where, text);
    server_fail (s, text);
}

static void server_loop (struct rserver *s)
{
    struct pollfd *pfd = NULL;
    int npfd = 0;

    while (!(s->list && s->nacked == s->nlisted && !s->persist) && s->rc == 0) {
        double now = mono_now (), next = s->deadline;
        int n = 0, ms;

        if (!s->list && list_due (s, now)) {
            /* at the deadline with MIN there: start with them (they wait
             * RDZV_GRACE_S beyond it for the list, and so does this) */
            if (now >= s->deadline)
                s->deadline = now + RDZV_GRACE_S;
            send_list (s);
            continue;
        }
        if (now >= s->deadline) {
            if (!(s->list && s->persist)) {
                server_timed_out (s);
                break;
            }
            if (s->nacked < s->nlisted)
                server_timed_out (s);      /* a warning: the job runs */
            s->deadline = next = INFINITY; /* serving joins until stopped */
        }
        if (!s->list && s->min_at > 0 && s->min_at + s->last_call < next)
            next = s->min_at + s->last_call;
        sweep (s, now);
        if (npfd < s->nc + 2) {
            struct pollfd *np = realloc (pfd, (size_t)(s->nc + 16) * sizeof (*np));

            if (!np) {
                s->rc = errprintf (&s->err, "%s: out of memory", s->where);
                break;
            }
            pfd = np;
            npfd = s->nc + 16;
        }
        pfd[n].fd = s->stopfd;
        pfd[n++].events = POLLIN;
        pfd[n].fd = now >= s->accept_pause ? s->lfd : -1;
        pfd[n++].events = POLLIN;
        if (now < s->accept_pause && s->accept_pause < next)
            next = s->accept_pause;
        for (int i = 0; i < s->nc; i++) {
            struct rconn *c = s->c[i];

            pfd[n].fd = c->fd;
            pfd[n++].events = (short)(POLLIN | (out_pending (c) ? POLLOUT : 0));
            if (c->state != C_JOINED && c->since + RDZV_IDLE_S < next)
                next = c->since + RDZV_IDLE_S + 0.01;
        }
        ms = poll_ms (next);
        if (poll (pfd, (nfds_t)n, ms) < 0) {
            if (errno == EINTR)
                continue;
            s->rc = errprintf (&s->err, "%s: poll: %s", s->where, strerror (errno));
            break;
        }
        if (pfd[0].revents) {
            char text[FAIL_MAX + 1];
            ssize_t r = read (s->stopfd, text, FAIL_MAX);

            text[r > 0 ? r : 0] = '\0';
            if (s->list && s->persist) {
                log_debug ("%s: the server stops: %s", s->where, text);
                break; /* the job ends: no more joins */
            }
            s->rc = errprintf (&s->err, "%s: %s", s->where, text);
            server_fail (s, text);
            break;
        }
        if (pfd[1].revents)
            accept_all (s);
        for (int i = 2; i < n; i++) {
            struct rconn *c = s->c[i - 2];

            if (!pfd[i].revents || c->fd < 0)
                continue;
            if ((pfd[i].revents & POLLOUT) && conn_flush (c) < 0) {
                conn_close (c);
                continue;
            }
            if (c->state == C_CLOSING) {
                if (!out_pending (c))
                    conn_close (c);
                else if (pfd[i].revents & (POLLERR | POLLHUP))
                    conn_close (c);
                continue;
            }
            if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP))
                conn_read (s, c);
        }
    }
    free (pfd);
}

static void server_destroy (struct rserver *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nc; i++) {
        conn_close (s->c[i]);
        free (s->c[i]);
    }
    free (s->c);
    for (int i = 0; s->addr && i < s->nnodes; i++)
        free (s->addr[i]);
    free (s->addr);
    for (int i = 0; s->any && i < s->nany; i++)
        free (s->any[i]);
    free (s->any);
    free (s->order); /* its strings are addr's and any's */
    free (s->joined);
    free (s->acked);
    free (s->list);
    if (s->lfd >= 0)
        close (s->lfd);
    sodium_memzero (s->kr, sizeof (s->kr));
    pthread_mutex_destroy (&s->admit_lock);
    free (s);
}

static void *server_main (void *arg)
{
    struct rserver *s = arg;

    server_loop (s);
    if (s->persist && s->list && s->rc)
        log_warn (
            "%s: no more nodes can join the running job: %s", s->where, s->err.text);
    close (s->lfd); /* no more members: late ones are refused by the kernel */
    s->lfd = -1;
    log_debug ("%s: the rendezvous server is done (%d of %d confirmed)",
               s->where,
               s->nacked,
               s->nlisted);
    return NULL;
}

/* ---- election ------------------------------------------------------------- */

/* Try to serve the endpoint.  Returns a listening socket, -2 when another
 * process (or another host) serves it, or -1 with err. */
static int try_serve (const char *where, const char *host, int port, elastic_error_t *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char serv[16];
    int rc, fd = -2, one = 1;

    snprintf (serv, sizeof (serv), "%d", port);
    if ((rc = getaddrinfo (host, serv, &hints, &res)) != 0)
        return errprintf (
            err, "%s: cannot resolve '%s': %s", where, host, gai_strerror (rc));
    for (struct addrinfo *ai = res; ai && fd == -2; ai = ai->ai_next) {
        int s = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

        if (s < 0)
            continue;
        (void)setsockopt (s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
        if (bind (s, ai->ai_addr, ai->ai_addrlen) == 0 && listen (s, 4096) == 0 &&
            set_nonblock (s) == 0) {
            fd = s;
            break;
        }
        if (errno != EADDRINUSE && errno != EADDRNOTAVAIL && errno != EAFNOSUPPORT) {
            fd = errprintf (err, "%s: cannot listen there: %s", where, strerror (errno));
            close (s);
            break;
        }
        close (s);
    }
    freeaddrinfo (res);
    return fd;
}

/* ---- the client ------------------------------------------------------------ */

struct rclient {
    const char *where;
    const char *host;
    int port;
    uint32_t rank, nnodes, nmin; /* rank RDZV_RANK_ANY: no --node-rank */
    char who[48];                /* "node rank K", or "a node without --node-rank" */
    const char *self;            /* "addr:port" */
    uint8_t kr[32];
    double timeout, deadline;
    char last[160];               /* why the last try did not reach a server */
    uint32_t nslots;              /* > 0: the job takes nodes after its start */
    struct rdzv_admission *admit; /* nslots: filled when admitted into it */
};

/* Connect to the endpoint within until.  Returns the socket or -1 (last). */
static int client_connect (struct rclient *cl, double until)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char serv[16];
    int rc, fd = -1;

    snprintf (serv, sizeof (serv), "%d", cl->port);
    if ((rc = getaddrinfo (cl->host, serv, &hints, &res)) != 0) {
        snprintf (cl->last,
                  sizeof (cl->last),
                  "cannot resolve '%s': %s",
                  cl->host,
                  gai_strerror (rc));
        return -1;
    }
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        struct pollfd pfd;
        int e = 0;
        socklen_t elen = sizeof (e);

        fd = socket (ai->ai_family,
                     ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                     ai->ai_protocol);
        if (fd < 0)
            continue;
        if (connect (fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        e = errno;
        if (e == EINPROGRESS) {
            pfd.fd = fd;
            pfd.events = POLLOUT;
            while ((rc = poll (&pfd, 1, poll_ms (until))) < 0 && errno == EINTR)
                ;
            e = ETIMEDOUT;
            if (rc > 0 && getsockopt (fd, SOL_SOCKET, SO_ERROR, &e, &elen) == 0 && e == 0)
                break;
        }
        snprintf (cl->last, sizeof (cl->last), "connect: %s", strerror (e));
        close (fd);
        fd = -1;
    }
    freeaddrinfo (res);
    return fd;
}

/* Read len bytes by until.  Returns 0, -1 on EOF or error, -2 on timeout. */
static int read_full (int fd, uint8_t *p, size_t len, double until)
{
    size_t got = 0;

    while (got < len) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;
        int rc;

        if (mono_now () >= until)
            return -2;
        if ((rc = poll (&pfd, 1, poll_ms (until))) < 0 && errno != EINTR)
            return -1;
        if (rc <= 0)
            continue;
        n = recv (fd, p + got, len - got, 0);
        if (n == 0)
            return -1;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

static int write_full (int fd, const uint8_t *p, size_t len, double until)
{
    size_t off = 0;

    while (off < len) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        ssize_t n;

        if (mono_now () >= until)
            return -2;
        if (poll (&pfd, 1, poll_ms (until)) < 0 && errno != EINTR)
            return -1;
        n = send (fd, p + off, len - off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        off += (size_t)n;
    }
    return 0;
}

/* The rest of the server's answer of type type whose header is head
 * (RDZV_HDR bytes), read by until.  Returns 0 with *msg (malloc'ed, the
 * whole message, *len bytes); -1 with e when its length is refused; -2
 * when it did not come in time; -3 when it was cut off. */
static int read_answer (int fd,
                        const uint8_t *head,
                        int type,
                        uint32_t nnodes,
                        double until,
                        uint8_t **msg,
                        size_t *len,
                        elastic_error_t *e)
{
    uint8_t *m = malloc (HDR), *nm;
    size_t have = HDR, need;
    int rc;

    if (!m)
        return errprintf (e, "out of memory");
    memcpy (m, head, HDR);
    for (;;) {
        if (rdzv_msg_need (m, have, type, nnodes, &need, e) < 0) {
            free (m);
            return -1;
        }
        if (need <= have)
            break;
        if (!(nm = realloc (m, need))) {
            free (m);
            return errprintf (e, "out of memory");
        }
        m = nm;
        if ((rc = read_full (fd, m + have, need - have, until)) < 0) {
            free (m);
            return rc == -2 ? -2 : -3;
        }
        have = need;
    }
    *msg = m;
    *len = have;
    return 0;
}

/* The LIST whose header is head: read, verify, split.  Returns 0 with
 * list[*n] (malloc'ed strings) and *index, this member's place in it, or
 * -1 with err. */
static int client_list (struct rclient *cl,
                        int fd,
                        const uint8_t *head,
                        const uint8_t *nc,
                        double until,
                        char ***list,
                        uint32_t *n,
                        uint32_t *index,
                        elastic_error_t *err)
{
    uint8_t *msg = NULL;
    size_t len = 0;
    char **l = NULL;
    elastic_error_t e;
    uint32_t k;
    int rc = read_answer (fd, head, RDZV_LIST, cl->nnodes, until, &msg, &len, &e);

    if (rc == -1)
        return errprintf (err, "%s: %s", cl->where, e.text);
    if (rc < 0)
        return errprintf (err,
                          "%s: the list %s",
                          cl->where,
                          rc == -2 ? "did not come in time" : "was cut off");
    rc = rdzv_list_decode (cl->kr, nc, msg, len, cl->nnodes, n, &l, &e);
    free (msg);
    if (rc < 0)
        return errprintf (err, "%s: %s", cl->where, e.text);
    for (k = 0; k < *n && strcmp (l[k], cl->self) != 0; k++)
        ;
    if (k == *n) {
        errprintf (err,
                   "%s: the list of %u nodes does not name this member (%s)",
                   cl->where,
                   *n,
                   cl->self);
        rdzv_addrs_free (l, *n);
        return -1;
    }
    *index = k;
    *list = l;
    return 0;
}

/* The ADMIT whose header is head: read, verify, into cl->admit.  Returns
 * 0, or -1 with err. */
static int client_admit (struct rclient *cl,
                         int fd,
                         const uint8_t *head,
                         const uint8_t *nc,
                         double until,
                         elastic_error_t *err)
{
    uint8_t *msg = NULL;
    size_t len = 0;
    elastic_error_t e;
    struct rdzv_admission *a = cl->admit;
    int rc = read_answer (fd, head, RDZV_ADMIT, cl->nslots, until, &msg, &len, &e);

    if (rc == -1)
        return errprintf (err, "%s: %s", cl->where, e.text);
    if (rc < 0)
        return errprintf (err,
                          "%s: the admission %s",
                          cl->where,
                          rc == -2 ? "did not come in time" : "was cut off");
    rc = rdzv_admit_decode (cl->kr, nc, msg, len, cl->nslots, a, &e);
    free (msg);
    if (rc < 0)
        return errprintf (err, "%s: %s", cl->where, e.text);
    if (a->n != cl->nslots || strcmp (a->addrs[a->slot], cl->self) != 0) {
        errprintf (err,
                   "%s: the admission gives slot %u of %u to %s; this member is %s of "
                   "%u slots (another --nnodes?)",
                   cl->where,
                   a->slot,
                   a->n,
                   a->addrs[a->slot],
                   cl->self,
                   cl->nslots);
        rdzv_admission_free (a);
        return -1;
    }
    return 0;
}

/* The server's FAIL whose header is head: its text into err. */
static int client_fail (
    struct rclient *cl, int fd, const uint8_t *head, double until, elastic_error_t *err)
{
    char text[RDZV_FAIL_TEXT + 1];
    uint8_t *msg = NULL;
    size_t len = 0;
    int rc = read_answer (fd, head, RDZV_FAIL, 0, until, &msg, &len, NULL);

    if (rc == 0)
        rc = rdzv_fail_decode (msg, len, text, NULL);
    free (msg);
    if (rc < 0)
        return errprintf (
            err, "%s: the server refused %s (no reason came)", cl->where, cl->who);
    return errprintf (err, "%s: %s", cl->where, text);
}

/* One connection.  Returns 0 with *list (*n addresses, this member's at
 * *index), -1 with err (final), or 1 to try again (cl->last says why). */
static int client_session (struct rclient *cl,
                           int fd,
                           char ***list,
                           uint32_t *n,
                           uint32_t *index,
                           elastic_error_t *err)
{
    uint8_t hello[HELLO_SZ], ns[NONCE], join[JOIN_MAX], head[HDR], ack[ACK_SZ];
    struct rdzv_join j = {
        .rank = cl->rank,
        .nnodes = cl->nnodes,
        .addr = (const uint8_t *)cl->self,
        .addr_len = strlen (cl->self),
    };
    elastic_error_t e;
    size_t jlen;
    double until;
    int rc, type;

    if ((rc = read_full (fd, hello, HELLO_SZ, cl->deadline)) < 0) {
        snprintf (cl->last,
                  sizeof (cl->last),
                  "%s",
                  rc == -2 ? "no HELLO from the server" : "closed before its HELLO");
        return 1;
    }
    if (rdzv_hello_decode (hello, HELLO_SZ, ns, &e) < 0)
        return errprintf (err,
                          "%s: not an elastic rendezvous server (version %d) there: %s",
                          cl->where,
                          RDZV_VERSION,
                          e.text);
    mesh_auth_nonce (j.nonce, NONCE);
    if (!(jlen = rdzv_join_encode (cl->kr, ns, &j, join))) /* checked: never */
        return errprintf (
            err, "%s: this member's address %s is not accepted", cl->where, cl->self);
    if (write_full (fd, join, jlen, cl->deadline) < 0) {
        snprintf (cl->last, sizeof (cl->last), "the JOIN could not be sent");
        return 1;
    }
    /* joined: the server answers when all have (or at its own timeout) */
    until = cl->deadline + RDZV_GRACE_S;
    if ((rc = read_full (fd, head, HDR, until)) == -2)
        return errprintf (err,
                          "%s: %s joined, but no list came within %g s",
                          cl->where,
                          cl->who,
                          cl->timeout + RDZV_GRACE_S);
    if (rc < 0) {
        snprintf (cl->last, sizeof (cl->last), "the server closed after the JOIN");
        return 1;
    }
    if (rdzv_hdr_decode (head, HDR, &type, &e) < 0)
        return errprintf (err,
                          "%s: the server's answer is not a rendezvous message (%s)",
                          cl->where,
                          e.text);
    if (type == RDZV_FAIL)
        return client_fail (cl, fd, head, until, err);
    if (type == RDZV_ADMIT && cl->nslots > 0) {
        if (client_admit (cl, fd, head, j.nonce, until, err) < 0)
            return -1;
        rdzv_ack_encode (cl->kr, ns, j.nonce, cl->admit->slot, ack);
        (void)write_full (fd, ack, ACK_SZ, mono_now () + 2.0); /* best effort */
        *list = NULL;
        *n = 0;
        *index = cl->admit->slot;
        return 0;
    }
    if (type != RDZV_LIST)
        return errprintf (err,
                          "%s: the server's answer is not a rendezvous LIST or FAIL "
                          "(type %d)",
                          cl->where,
                          type);
    if (client_list (cl, fd, head, j.nonce, until, list, n, index, err) < 0)
        return -1;
    rdzv_ack_encode (cl->kr, ns, j.nonce, *index, ack);
    (void)write_full (fd, ack, ACK_SZ, mono_now () + 2.0); /* best effort */
    if (*n < cl->nmin) {
        /* acknowledged all the same: the server need not wait for it */
        errprintf (err,
                   "%s: the job started with %u nodes, fewer than the %u that this "
                   "member's --nnodes %u:%u asks for at least (the serving node's "
                   "MIN is lower)",
                   cl->where,
                   *n,
                   cl->nmin,
                   cl->nmin,
                   cl->nnodes);
        rdzv_addrs_free (*list, *n);
        *list = NULL;
        return -1;
    }
    return 0;
}

static int client_run (
    struct rclient *cl, char ***list, uint32_t *n, uint32_t *index, elastic_error_t *err)
{
    int connected = 0;
    double left;

    snprintf (cl->last, sizeof (cl->last), "no server");
    while (mono_now () < cl->deadline) {
        int fd = client_connect (cl, cl->deadline), rc;

        if (fd >= 0) {
            connected = 1;
            if (err)
                err->text[0] = '\0';
            rc = client_session (cl, fd, list, n, index, err);
            close (fd);
            if (rc <= 0)
                return rc;
        }
        left = cl->deadline - mono_now ();
        sleep_s (left < 0.1 ? left : 0.1);
    }
    if (connected)
        return errprintf (err,
                          "%s: %s could not join within %g s (last: %s)",
                          cl->where,
                          cl->who,
                          cl->timeout,
                          cl->last);
    return errprintf (err,
                      "%s: no rendezvous server answered within %g s (last: %s)",
                      cl->where,
                      cl->timeout,
                      cl->last);
}

/* ---- the exchange ---------------------------------------------------------- */

/* This host's address toward the endpoint: a UDP socket connect()ed there. */
static int self_address (const char *where,
                         const char *host,
                         int port,
                         char *buf,
                         size_t size,
                         elastic_error_t *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof (ss);
    char serv[16];
    int rc, fd = -1, e = 0;

    snprintf (serv, sizeof (serv), "%d", port);
    if ((rc = getaddrinfo (host, serv, &hints, &res)) != 0)
        return errprintf (
            err, "%s: cannot resolve '%s': %s", where, host, gai_strerror (rc));
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if ((fd = socket (ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
            e = errno;
            continue;
        }
        if (connect (fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname (fd, (struct sockaddr *)&ss, &sl) == 0)
            break;
        e = errno;
        close (fd);
        fd = -1;
    }
    freeaddrinfo (res);
    if (fd < 0)
        return errprintf (err,
                          "%s: cannot find this host's address toward it: %s",
                          where,
                          strerror (e));
    close (fd);
    rc = getnameinfo (
        (struct sockaddr *)&ss, sl, buf, (socklen_t)size, NULL, 0, NI_NUMERICHOST);
    if (rc != 0)
        return errprintf (err, "%s: getnameinfo: %s", where, gai_strerror (rc));
    return 0;
}

void rdzv_tcp_server_set_admit (struct rdzv_tcp_server *h,
                                rdzv_tcp_admit_fn fn,
                                void *arg)
{
    if (!h)
        return;
    pthread_mutex_lock (&h->s->admit_lock); /* waits for an admission under way */
    h->s->admit = fn;
    h->s->admit_arg = arg;
    pthread_mutex_unlock (&h->s->admit_lock);
}

void rdzv_tcp_server_stop (struct rdzv_tcp_server *h)
{
    if (!h)
        return;
    (void)!write (h->stop, "the job has ended", 17);
    pthread_join (h->tid, NULL);
    close (h->s->stopfd);
    close (h->stop);
    server_destroy (h->s);
    free (h);
}

void rdzv_tcp_joins_free (struct rdzv_tcp_joins *j)
{
    if (!j)
        return;
    rdzv_tcp_server_stop (j->server);
    j->server = NULL;
    free (j->slots);
    j->slots = NULL;
}

void rdzv_tcp_addrs_free (char **addrs, int n)
{
    rdzv_addrs_free (addrs, n > 0 ? (uint32_t)n : 0);
}

static int check_args (const struct jobmap *m,
                       const struct rdzv_tcp_opts *o,
                       char ***addrs,
                       elastic_error_t *err)
{
    if (!m || !o || !o->key || !addrs)
        return errprintf (err, "rendezvous: no job map, key or result given");
    if (!m->rdzv_host[0] || m->rdzv_port < 1 || m->rdzv_port > 65535)
        return errprintf (err, "rendezvous: the job map has no --rdzv-endpoint");
    if (m->nnodes < 1 || m->nnodes > JOBMAP_MAX_NODES || m->node_id < 0 ||
        m->node_id >= m->nnodes)
        return errprintf (
            err, "rendezvous: node rank %d is not in 0..%d", m->node_id, m->nnodes - 1);
    if (o->min_nodes < 0 || o->min_nodes > m->nnodes)
        return errprintf (err,
                          "rendezvous: at least %d nodes of %d is not accepted",
                          o->min_nodes,
                          m->nnodes);
    if (o->self_port < 1 || o->self_port > 65535)
        return errprintf (
            err, "rendezvous: mesh port %d is not accepted (1..65535)", o->self_port);
    if (!(o->timeout > 0) || !isfinite (o->timeout))
        return errprintf (
            err, "rendezvous: timeout %g is not accepted (> 0 s)", o->timeout);
    if (!(o->last_call >= 0) || !isfinite (o->last_call))
        return errprintf (
            err, "rendezvous: last call %g is not accepted (>= 0 s)", o->last_call);
    return 0;
}

static struct rserver *
server_create (const struct rclient *cl, int lfd, int stopfd, double last_call)
{
    struct rserver *s = calloc (1, sizeof (*s));
    size_t n = cl->nnodes;

    if (!s)
        return NULL;
    pthread_mutex_init (&s->admit_lock, NULL);
    s->lfd = lfd;
    s->stopfd = stopfd;
    s->nnodes = (int)cl->nnodes;
    s->nmin = (int)cl->nmin;
    s->last_call = last_call;
    memcpy (s->kr, cl->kr, 32);
    s->start = mono_now ();
    s->timeout = cl->timeout;
    s->deadline = cl->deadline;
    s->maxconn = s->nnodes * 2 + 64;
    snprintf (s->where, sizeof (s->where), "%s", cl->where);
    if (!(s->addr = calloc (n, sizeof (char *))) || !(s->joined = calloc (n, 1)) ||
        !(s->any = calloc (n, sizeof (char *))) ||
        !(s->order = calloc (n, sizeof (char *))) || !(s->acked = calloc (n, 1))) {
        s->lfd = -1;
        server_destroy (s);
        return NULL;
    }
    return s;
}

/* Serve in a thread while this member joins like the others; with
 * keep (a job that takes nodes after its start), the server goes on
 * serving: *keep is its handle. */
static int serve_and_join (struct rclient *cl,
                           int lfd,
                           double last_call,
                           struct rdzv_tcp_server **keep,
                           char ***list,
                           uint32_t *n,
                           uint32_t *index,
                           elastic_error_t *err)
{
    struct rserver *s = NULL;
    pthread_t tid;
    int pfd[2] = {-1, -1}, rc;

    if (pipe2 (pfd, O_CLOEXEC) < 0 || !(s = server_create (cl, lfd, pfd[0], last_call))) {
        close (lfd);
        rc = errprintf (
            err, "%s: cannot start the server: %s", cl->where, strerror (errno));
        goto out;
    }
    s->persist = keep != NULL;
    if ((rc = pthread_create (&tid, NULL, server_main, s)) != 0) {
        rc = errprintf (err, "%s: cannot start the server: %s", cl->where, strerror (rc));
        goto out;
    }
    if (cl->nmin < cl->nnodes)
        log_debug ("%s: serving the rendezvous of %u to %u nodes (last call %g s)",
                   cl->where,
                   cl->nmin,
                   cl->nnodes,
                   last_call);
    else
        log_debug ("%s: serving the rendezvous of %u nodes", cl->where, cl->nnodes);
    rc = client_run (cl, list, n, index, err);
    if (rc == 0 && keep && (*keep = calloc (1, sizeof (**keep)))) {
        (*keep)->s = s;
        (*keep)->tid = tid;
        (*keep)->stop = pfd[1];
        return 0; /* serving on; rdzv_tcp_server_stop ends it */
    }
    if (rc < 0) {
        char text[FAIL_MAX + 1];

        snprintf (text,
                  sizeof (text),
                  "%s, the server, gave up: %.180s",
                  cl->who,
                  err ? err->text : "error");
        (void)!write (pfd[1], text, strlen (text));
    } else if (keep) {
        log_warn ("%s: out of memory: no node can join the running job", cl->where);
        (void)!write (pfd[1], "out of memory", 13);
    }
    pthread_join (tid, NULL);
out:
    server_destroy (s);
    if (pfd[0] >= 0)
        close (pfd[0]);
    if (pfd[1] >= 0)
        close (pfd[1]);
    return rc;
}

/* The job started with n nodes, this member the index-th: *mp becomes
 * the map of that job (the same endpoint, run id and ranks per node). */
static int
resize_map (struct jobmap **mp, uint32_t n, uint32_t index, elastic_error_t *err)
{
    const struct jobmap *m = *mp;
    char endpoint[RDZV_ADDR_MAX + 16];
    int v6 = strchr (m->rdzv_host, ':') != NULL;
    struct jobmap_torchrun t = {
        .nnodes = (int)n,
        .node_rank = (int)index,
        .nproc_per_node = m->nproc_per_node,
        .rdzv_endpoint = endpoint,
        .run_id = m->jobid,
    };
    struct jobmap *nm;

    if ((int)n == m->nnodes && (int)index == m->node_id)
        return 0;
    snprintf (endpoint,
              sizeof (endpoint),
              "%s%s%s:%d",
              v6 ? "[" : "",
              m->rdzv_host,
              v6 ? "]" : "",
              m->rdzv_port);
    if (!(nm = jobmap_from_torchrun (&t, err)))
        return -1;
    jobmap_destroy (*mp);
    *mp = nm;
    return 0;
}

/* With joins: the job's nodes as slots.  Started with the list (*list,
 * n nodes): slots 0..n-1 live, the others absent; admitted (adm): the
 * admitter's view.  *addrs gets nslots entries (NULL where no address). */
static int as_slots (const struct rdzv_tcp_opts *o,
                     char ***list,
                     uint32_t n,
                     struct rdzv_admission *adm,
                     char ***addrs,
                     struct rdzv_tcp_joins *joins,
                     elastic_error_t *err)
{
    if (!*list) {
        *addrs = adm->addrs;
        joins->slots = adm->states;
        joins->base = adm->base;
        joins->epoch = adm->epoch;
        joins->late = 1;
        adm->addrs = NULL;
        adm->states = NULL;
        return 0;
    }
    if (!(*addrs = calloc (o->slots, sizeof (char *))) ||
        !(joins->slots = malloc (o->slots))) {
        free (*addrs);
        *addrs = NULL;
        return errprintf (err, "out of memory");
    }
    for (uint32_t i = 0; i < o->slots; i++) {
        (*addrs)[i] = i < n ? (*list)[i] : NULL;
        joins->slots[i] = i < n ? RDZV_SLOT_LIVE : RDZV_SLOT_ABSENT;
    }
    free (*list); /* its strings are *addrs' now */
    *list = NULL;
    joins->base = n;
    joins->epoch = 0;
    joins->late = 0;
    return 0;
}

int rdzv_tcp_exchange (struct jobmap **mp,
                       const struct rdzv_tcp_opts *o,
                       char ***addrs,
                       struct rdzv_tcp_joins *joins,
                       elastic_error_t *err)
{
    struct rclient cl = {0};
    struct rdzv_admission adm = {0};
    struct rdzv_tcp_server *server = NULL;
    uint32_t nmap;
    struct jobmap *m = mp ? *mp : NULL;
    char where[RDZV_ADDR_MAX + 32], self[RDZV_ADDR_MAX + 8], ahost[RDZV_ADDR_MAX + 1];
    char host[RDZV_ADDR_MAX + 1];
    char **list = NULL;
    uint32_t n = 0, index = 0;
    int lfd, v6, rc = -1;

    if (check_args (m, o, addrs, err) < 0)
        return -1;
    if (o->slots > 0 &&
        (!joins || o->slots < (uint32_t)m->nnodes || o->slots > JOBMAP_MAX_NODES))
        return errprintf (err,
                          "rendezvous: %u member slots for at most %d nodes are not "
                          "accepted",
                          o->slots,
                          m->nnodes);
    if (joins)
        memset (joins, 0, sizeof (*joins));
    if (mesh_auth_init (err) < 0)
        return -1;
    v6 = strchr (m->rdzv_host, ':') != NULL;
    snprintf (where,
              sizeof (where),
              "rdzv-endpoint %s%s%s:%d",
              v6 ? "[" : "",
              m->rdzv_host,
              v6 ? "]" : "",
              m->rdzv_port);
    if (o->self_addr)
        snprintf (ahost, sizeof (ahost), "%s", o->self_addr);
    else if (self_address (
                 where, m->rdzv_host, m->rdzv_port, ahost, sizeof (ahost), err) < 0)
        return -1;
    v6 = strchr (ahost, ':') != NULL;
    snprintf (self,
              sizeof (self),
              "%s%s%s:%d",
              v6 ? "[" : "",
              ahost,
              v6 ? "]" : "",
              o->self_port);
    if (rdzv_addr_check ("this member's mesh address",
                         (const uint8_t *)self,
                         strlen (self),
                         host,
                         err) < 0)
        return -1;
    cl.where = where;
    cl.host = m->rdzv_host;
    cl.port = m->rdzv_port;
    cl.rank = o->any_rank ? RDZV_RANK_ANY : (uint32_t)m->node_id;
    cl.nnodes = (uint32_t)m->nnodes;
    cl.nmin = o->min_nodes > 0 ? (uint32_t)o->min_nodes : cl.nnodes;
    if (o->any_rank)
        snprintf (cl.who, sizeof (cl.who), "a node without --node-rank");
    else
        snprintf (cl.who, sizeof (cl.who), "node rank %u", cl.rank);
    cl.self = self;
    cl.nslots = o->slots;
    cl.admit = &adm;
    cl.timeout = o->timeout;
    cl.deadline = mono_now () + o->timeout;
    rdzv_key (o->key, cl.kr);
    if ((lfd = try_serve (where, m->rdzv_host, m->rdzv_port, err)) == -1)
        goto out;
    if (lfd >= 0)
        rc = serve_and_join (
            &cl, lfd, o->last_call, o->slots ? &server : NULL, &list, &n, &index, err);
    else
        rc = client_run (&cl, &list, &n, &index, err);
    if (rc < 0)
        goto out;
    rc = -1;
    nmap = o->slots ? o->slots : n;
    if (resize_map (mp, nmap, index, err) < 0) {
        errprefix (err, "%s", where);
        goto out;
    }
    m = *mp;
    if (o->slots && as_slots (o, &list, n, &adm, addrs, joins, err) < 0)
        goto out;
    if (!o->slots) {
        *addrs = list;
        list = NULL;
    }
    for (uint32_t i = 0; i < nmap; i++) {
        char what[48];

        if (!(*addrs)[i])
            continue;
        snprintf (what, sizeof (what), "node rank %u", i);
        if (rdzv_addr_check (
                what, (const uint8_t *)(*addrs)[i], strlen ((*addrs)[i]), host, err) <
                0 ||
            jobmap_set_host (m, (int)i, host, err) < 0) {
            errprefix (err, "%s", where);
            rdzv_addrs_free (*addrs, nmap);
            *addrs = NULL;
            if (joins)
                rdzv_tcp_joins_free (joins);
            goto out;
        }
    }
    if (joins)
        joins->server = server;
    server = NULL;
    rc = 0;
out:
    rdzv_tcp_server_stop (server);
    rdzv_addrs_free (list, n);
    rdzv_admission_free (&adm);
    sodium_memzero (cl.kr, sizeof (cl.kr));
    return rc;
}
