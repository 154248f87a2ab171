/* mesh.c - the mesh's thread, its API and its membership (see mesh.h)
 *
 * Membership: every member starts with all n live.  A member is lost when
 * a tree neighbour sees it silent for node_timeout (cause TIMEOUT), its
 * connection closes or is refused (EOF), or it says bye (LEFT); the member
 * that sees it floods the whole lost set to its neighbours, each merges it
 * (a union: the lost set only grows) and floods on what was new to it, and
 * every new connection starts with both sides' lost sets.  So the members
 * agree on the lost set, and on the epoch, which is its size.
 *
 * Self-fencing (no split brain): a member stops and calls ops.self_fence
 * when a peer says it was declared lost (LOST naming it, BYE YOU_LOST);
 * when it lost its parent to silence (or to the parent fencing itself) and
 * could not link up with its new parent within node_timeout; or when, in
 * the last 2 node timeouts (a partition silences its other side at once),
 * it has itself seen at least as many members go silent as it still sees
 * live or saw leave: the minority side of a partition (a tie goes to the
 * side holding the lowest of those members).  Losses it was told of do not
 * count (the teller is on its side), nor losses proved by a closed
 * connection: a killed member is not a partition.
 *
 * Joins: slots from mesh_config.base up may start absent.  mesh_admit
 * gives a newcomer the lowest absent slot and floods the set of members
 * joined since the start with their addresses (JOINED; merged as a union,
 * flooded on when new, sent on every new link with the lost set); a slot
 * goes absent -> live -> lost and never back, so members that saw the
 * same joins and losses agree on the live set, the tree and the epoch
 * (losses + joins).  An authenticated member calling from a slot still
 * absent here was admitted elsewhere first: it is taken as joined (its
 * address comes with the flood).  Absent slots count neither as live nor
 * as lost in the self-fencing rule.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "mesh_impl.h"

static char listen_marker, wake_marker;

double mesh_now (void)
{
    return mono_now ();
}

size_t mesh_begin (struct mesh *m, struct mesh_wbuf *b, int type, unsigned flags)
{
    return mesh_msg_begin (b, type, flags, m->epoch, m->self);
}

/* --- sending ----------------------------------------------------------- */

static int link_is_up (struct mesh *m, uint32_t member)
{
    struct conn *c = m->peers[member].conn;
    return c && c->state == CONN_UP;
}

void mesh_send_member (struct mesh *m, uint32_t member, const uint8_t *p, size_t len)
{
    if (member >= m->n || member == m->self || !m->live[member])
        return;
    if (link_is_up (m, member))
        conn_send (m, m->peers[member].conn, p, len);
    else
        mesh_put_bytes (&m->peers[member].pending, p, len);
}

static void encode_lost_set (struct mesh *m, struct mesh_wbuf *b)
{
    size_t off = mesh_begin (m, b, MESH_LOST, 0);

    mesh_put_u32 (b, m->nlost);
    for (uint32_t i = 0; i < m->n; i++) {
        if (!m->live[i] && !m->absent[i]) {
            mesh_put_u32 (b, i);
            mesh_put_u8 (b, m->cause[i]);
        }
    }
    (void)mesh_msg_end (b, off);
}

void mesh_send_lost_set (struct mesh *m, uint32_t member)
{
    struct mesh_wbuf b = {0};

    if (m->nlost == 0)
        return;
    encode_lost_set (m, &b);
    if (!b.failed)
        mesh_send_member (m, member, b.buf, b.len);
    mesh_wbuf_free (&b);
}

/* the live members joined since the start (slots from base up), with
 * their addresses where known */
static void encode_joined_set (struct mesh *m, struct mesh_wbuf *b)
{
    size_t off = mesh_begin (m, b, MESH_JOINED, 0);
    uint32_t count = 0;

    for (uint32_t i = m->base; i < m->n; i++)
        count += m->live[i];
    mesh_put_u32 (b, count);
    for (uint32_t i = m->base; i < m->n; i++) {
        const char *a = m->addr_text[i] ? m->addr_text[i] : "";
        if (m->live[i]) {
            mesh_put_u32 (b, i);
            mesh_put_blob (b, a, strlen (a));
        }
    }
    (void)mesh_msg_end (b, off);
}

void mesh_send_joined_set (struct mesh *m, uint32_t member)
{
    struct mesh_wbuf b = {0};

    if (m->njoined == 0)
        return;
    encode_joined_set (m, &b);
    if (!b.failed)
        mesh_send_member (m, member, b.buf, b.len);
    mesh_wbuf_free (&b);
}

static void flood (struct mesh *m, void (*encode) (struct mesh *, struct mesh_wbuf *))
{
    struct mesh_wbuf b = {0};

    encode (m, &b);
    for (struct conn *c = m->conns; c && !b.failed; c = c->next)
        if (!c->closed && c->state == CONN_UP)
            conn_send (m, c, b.buf, b.len);
    mesh_wbuf_free (&b);
}

/* --- stats ----------------------------------------------------------- */

static uint32_t count_children (struct mesh *m)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < m->n; i++)
        k += m->parent[i] == m->self;
    return k;
}

static void publish (struct mesh *m, int live_too)
{
    pthread_mutex_lock (&m->lock);
    m->stats.epoch = m->epoch;
    m->stats.nlive = m->nlive;
    m->stats.parent = m->parent[m->self];
    m->stats.nchildren = count_children (m);
    m->stats.fences = m->fences_done;
    m->stats.sent_bytes = m->sent_bytes;
    m->stats.recv_bytes = m->recv_bytes;
    m->stats.heartbeats_sent = m->heartbeats_sent;
    m->stats.fenced = m->fenced;
    if (live_too) {
        memcpy (m->live_snapshot, m->live, m->n);
        memcpy (m->cause_snapshot, m->cause, m->n);
    }
    pthread_mutex_unlock (&m->lock);
}

/* --- membership ------------------------------------------------------ */

void mesh_self_fence (struct mesh *m, const char *fmt, ...)
{
    char reason[256];
    va_list ap;
    struct conn *c, *next;

    if (m->fenced)
        return;
    va_start (ap, fmt);
    vsnprintf (reason, sizeof (reason), fmt, ap);
    va_end (ap);
    m->fenced = 1;
    log_warn ("mesh %u: cut off from the mesh, fencing itself: %s", m->self, reason);
    for (c = m->conns; c; c = next) {
        next = c->next;
        conn_close (m, c, MESH_BYE_FENCED);
    }
    if (m->listen_fd >= 0) {
        (void)epoll_ctl (m->epfd, EPOLL_CTL_DEL, m->listen_fd, NULL);
        close (m->listen_fd);
        m->listen_fd = -1;
    }
    pthread_mutex_lock (&m->lock);
    m->dead = 1;
    pthread_mutex_unlock (&m->lock);
    fence_cancel (m, MESH_ECANCEL);
    route_cancel (m, MESH_ECANCEL);
    publish (m, 1);
    if (m->ops.self_fence)
        m->ops.self_fence (m->arg, reason);
}

static const char *cause_name (int cause)
{
    switch (cause) {
        case MESH_CAUSE_TIMEOUT:
            return "silent";
        case MESH_CAUSE_EOF:
            return "connection closed";
        case MESH_CAUSE_LEFT:
            return "left";
    }
    return "?";
}

void mesh_mark_lost (struct mesh *m, uint32_t member, int cause)
{
    struct peer *p;

    if (member >= m->n || member == m->self || !m->live[member] || m->fenced)
        return;
    p = &m->peers[member];
    m->live[member] = 0;
    m->cause[member] = (uint8_t)cause;
    m->nlive--;
    m->nlost++;
    m->epoch++;
    if (cause == MESH_CAUSE_TIMEOUT)
        m->suspect[member] = 1;
    if (cause == MESH_CAUSE_LEFT)
        m->left[member] = 1;
    m->last_change = m->lost_at[member] = mesh_now ();
    /* lost my parent to silence: link with the new one in time, or fence
     * (a deadline already running is not pushed back) */
    if (member == m->parent[m->self] && cause == MESH_CAUSE_TIMEOUT &&
        m->rejoin_deadline == 0)
        m->rejoin_deadline = m->last_change + m->node_timeout;
    m->newly_lost[m->nnewly_lost++] = member;
    log_info ("mesh %u: member %u lost (%s), epoch %u, %u live",
              m->self,
              member,
              cause_name (cause),
              m->epoch,
              m->nlive);
    /* It gets its bye (you are lost) only from mesh_view_changed, once this
     * member knows it is not itself the minority: a member starved of CPU
     * that finds every neighbour silent must fence itself alone, not make
     * the majority fence themselves first.  Until then the link stays open
     * and carries nothing (the caller runs mesh_view_changed next). */
    if (p->conn && cause != MESH_CAUSE_LEFT)
        p->bye_due = MESH_BYE_YOU_LOST;
    else if (p->conn)
        conn_close (m, p->conn, 0);
    mesh_wbuf_free (&p->pending);
    p->neighbour = 0;
    route_lost (m, member);
}

/* Set member's address ("host:port"; NULL or "" leaves it unknown). */
static void set_addr (struct mesh *m, uint32_t member, const char *addr)
{
    elastic_error_t err = {{0}};
    char *copy;

    if (!addr || !*addr || m->addr_text[member])
        return;
    if (mesh_parse_addr (addr, &m->addr[member], &m->addrlen[member], &err) < 0) {
        log_warn ("mesh %u: member %u's address: %s", m->self, member, err.text);
        m->addrlen[member] = 0;
        return;
    }
    if (m->nports > 1)
        mesh_addr_set_port (&m->addr[member], m->ports[m->peers[member].port_idx]);
    if ((copy = strdup (addr)))
        m->addr_text[member] = copy;
}

/* An absent slot becomes live (admitted here or elsewhere); its address
 * when known.  Returns 1 if that was news (the caller runs
 * mesh_view_changed next), else 0. */
int mesh_mark_joined (struct mesh *m, uint32_t member, const char *addr)
{
    struct peer *p;

    if (member >= m->n || m->fenced)
        return 0;
    if (!m->absent[member]) {
        if (m->live[member])
            set_addr (m, member, addr); /* its address, heard of at last */
        return 0;
    }
    p = &m->peers[member];
    m->absent[member] = 0;
    m->live[member] = 1;
    m->nlive++;
    m->njoined++;
    m->epoch++;
    set_addr (m, member, addr);
    m->last_change = p->since = mesh_now ();
    p->join_by = p->since + m->join_timeout;
    m->newly_joined[m->nnewly_joined++] = member;
    log_info ("mesh %u: member %u joined (%s), epoch %u, %u live",
              m->self,
              member,
              m->addr_text[member] ? m->addr_text[member] : "address not yet known here",
              m->epoch,
              m->nlive);
    return 1;
}

/* A partition's other side goes silent at once: only losses of the last
 * two node timeouts can be it; and none once the repaired tree around this
 * member is whole again (every neighbour linked and heard from within half
 * a node timeout): it was not cut off.  A cut network leaves the TCP
 * connections established, so a link that is up but silent does not count:
 * a member cut off from two neighbours that are lost one tick apart would
 * otherwise forget the first loss before it sees the second, and a cut
 * root (member 0) would win the 1-1 tie against the majority. */
static void expire_suspects (struct mesh *m, double now)
{
    uint32_t up = 0, want = 0;

    for (uint32_t i = 0; i < m->n; i++) {
        if (m->peers[i].neighbour) {
            want++;
            up += link_is_up (m, i) && now - m->peers[i].last_rx <= m->node_timeout / 2;
        }
    }
    if (want > 0 && up == want && m->rejoin_deadline == 0) {
        memset (m->suspect, 0, m->n);
        memset (m->left, 0, m->n);
        return;
    }
    for (uint32_t i = 0; i < m->n; i++) {
        if ((m->suspect[i] || m->left[i]) && now - m->lost_at[i] > 2 * m->node_timeout)
            m->suspect[i] = m->left[i] = 0;
    }
}

static void update_neighbours (struct mesh *m)
{
    double now = mesh_now ();
    uint32_t par = m->parent[m->self];

    for (uint32_t i = 0; i < m->n; i++) {
        int nb = m->live[i] && i != m->self && (i == par || m->parent[i] == m->self);
        struct peer *p = &m->peers[i];

        if (nb && !p->neighbour)
            p->since = now;
        p->neighbour = nb;
    }
}

/* The links of members lost since the last view change: closed with the
 * bye mesh_mark_lost left due (not sent when this member fenced itself
 * instead: mesh_self_fence closes every link with its own bye). */
static void close_lost_links (struct mesh *m)
{
    for (uint32_t i = 0; i < m->n; i++) {
        struct peer *p = &m->peers[i];
        if (p->bye_due && p->conn && !m->live[i])
            conn_close (m, p->conn, p->bye_due);
        p->bye_due = 0;
    }
}

void mesh_view_changed (struct mesh *m)
{
    if (m->fenced)
        return;
    tree_parents (m->n, m->radix, m->live, m->parent);
    update_neighbours (m);
    expire_suspects (m, mesh_now ());
    if (tree_minority (m->n, m->live, m->suspect, m->left)) {
        uint32_t s = 0;
        for (uint32_t i = 0; i < m->n; i++)
            s += m->suspect[i];
        mesh_self_fence (m,
                         "%u members went silent and only %u (this one included) are "
                         "left: the minority side of a partition",
                         s,
                         m->nlive);
        return;
    }
    close_lost_links (m);
    if (m->nnewly_lost && m->ops.lost)
        m->ops.lost (m->arg, m->newly_lost, m->nnewly_lost, m->epoch, m->nlive);
    m->nnewly_lost = 0;
    if (m->nnewly_joined && m->ops.admitted) {
        const char **addrs = calloc (m->nnewly_joined, sizeof (*addrs));
        for (size_t i = 0; addrs && i < m->nnewly_joined; i++)
            addrs[i] = m->addr_text[m->newly_joined[i]];
        m->ops.admitted (
            m->arg, m->newly_joined, addrs, m->nnewly_joined, m->epoch, m->nlive);
        free (addrs);
    }
    m->nnewly_joined = 0;
    if (m->fenced)
        return;
    if (m->nlost)
        flood (m, encode_lost_set);
    if (m->njoined)
        flood (m, encode_joined_set);
    fence_view_changed (m);
    route_view_changed (m);
    publish (m, 1);
}

static void check_joined (struct mesh *m)
{
    if (m->joined_told)
        return;
    for (uint32_t i = 0; i < m->n; i++)
        if (m->peers[i].neighbour && !link_is_up (m, i))
            return;
    m->joined_told = 1;
    log_debug ("mesh %u: joined (every neighbour linked)", m->self);
    if (m->ops.joined)
        m->ops.joined (m->arg);
}

void mesh_link_up (struct mesh *m, struct conn *c)
{
    uint32_t member = c->member;
    struct peer *p = &m->peers[member];
    int joined = 0;

    if (p->conn && p->conn != c) {
        struct conn *old = p->conn;
        p->conn = NULL; /* superseded, not failed: conn_close keeps its port */
        conn_close (m, old, 0);
    }
    p->conn = c;
    if (m->absent[member]) {
        /* admitted by another member, whose flood has not come yet */
        char addr[80] = "";
        struct sockaddr_storage ss;
        socklen_t sl = sizeof (ss);
        if (!c->outbound && c->hello_port > 0 &&
            getpeername (c->fd, (struct sockaddr *)&ss, &sl) == 0)
            mesh_addr_format (&ss, (int)c->hello_port, addr, sizeof (addr));
        joined = mesh_mark_joined (m, member, addr);
    }
    if (!m->live[member]) {
        log_info (
            "mesh %u: member %u, lost before, called again: told so", m->self, member);
        conn_close (m, c, MESH_BYE_YOU_LOST);
        return;
    }
    p->ever_up = 1;
    p->refused = 0;
    p->last_rx = mesh_now ();
    log_debug ("mesh %u: linked with member %u", m->self, member);
    if (member == m->parent[m->self])
        m->rejoin_deadline = 0;
    mesh_send_lost_set (m, member);
    mesh_send_joined_set (m, member);
    if (p->pending.len) {
        conn_send (m, c, p->pending.buf, p->pending.len);
        mesh_wbuf_free (&p->pending);
    }
    if (joined) {
        mesh_view_changed (m);
        if (m->fenced)
            return;
    }
    fence_link_up (m, member);
    bcast_link_up (m, member);
    check_joined (m);
}

void mesh_link_down (struct mesh *m, struct conn *c)
{
    uint32_t member = c->member;

    conn_close (m, c, 0);
    if (member < m->n && m->live[member]) {
        mesh_mark_lost (m, member, MESH_CAUSE_EOF);
        mesh_view_changed (m);
    }
}

static void on_lost_msg (struct mesh *m, uint32_t from, const struct mesh_msg *msg)
{
    struct mesh_list it = msg->u.lost;
    uint32_t member;
    uint8_t cause;
    size_t before = m->nnewly_lost;

    while (mesh_list_next (&it, 0, &member, &cause, NULL, NULL)) {
        if (member == m->self) {
            mesh_self_fence (m, "member %u says this member was declared lost", from);
            return;
        }
        if (member < m->n && m->absent[member])
            (void)mesh_mark_joined (m, member, NULL); /* joined and lost since */
        if (member < m->n && m->live[member]) {
            mesh_mark_lost (m, member, cause);
            /* whoever told us is on our side: a loss it saw is not one
             * we could not reach (only our own detections are suspects) */
            m->suspect[member] = 0;
        }
    }
    if (m->nnewly_lost > before)
        mesh_view_changed (m);
}

static void on_joined_msg (struct mesh *m, const struct mesh_msg *msg)
{
    struct mesh_list it = msg->u.joined;
    uint32_t member, len;
    const uint8_t *data;
    int news = 0;

    while (mesh_list_next (&it, 1, &member, NULL, &data, &len)) {
        char addr[128];
        if (member < m->base || member >= m->n || len >= sizeof (addr))
            continue;
        memcpy (addr, data, len);
        addr[len] = '\0';
        news |= mesh_mark_joined (m, member, addr);
    }
    if (news)
        mesh_view_changed (m);
}

static void on_bye (struct mesh *m, struct conn *c, const struct mesh_msg *msg)
{
    uint32_t from = c->member;

    if (msg->u.bye.reason == MESH_BYE_YOU_LOST) {
        mesh_self_fence (m, "member %u declared this member lost", from);
        return;
    }
    log_info ("mesh %u: member %u says bye (%s)",
              m->self,
              from,
              msg->u.bye.reason == MESH_BYE_FENCED ? "fenced itself" : "shutting down");
    conn_close (m, c, 0);
    /* a neighbour that fenced itself was cut off from the mesh, and so may
     * we be: count it as silent (a suspect, a rejoin deadline) */
    mesh_mark_lost (m,
                    from,
                    msg->u.bye.reason == MESH_BYE_SHUTDOWN ? MESH_CAUSE_LEFT
                                                           : MESH_CAUSE_TIMEOUT);
    mesh_view_changed (m);
}

void mesh_handle (struct mesh *m,
                  struct conn *c,
                  const struct mesh_msg *msg,
                  const uint8_t *raw,
                  size_t rawlen)
{
    uint32_t from = c->member;

    switch (msg->hdr.type) {
        case MESH_HEARTBEAT:
            break;
        case MESH_LOST:
            on_lost_msg (m, from, msg);
            break;
        case MESH_JOINED:
            on_joined_msg (m, msg);
            break;
        case MESH_FENCE_UP:
            fence_up (m, from, msg);
            break;
        case MESH_FENCE_DOWN:
            fence_down (m, msg);
            break;
        case MESH_DMODEX_REQ:
        case MESH_DMODEX_RESP:
        case MESH_BCAST:
            route_handle (m, from, msg, raw, rawlen);
            break;
        case MESH_BYE:
            on_bye (m, c, msg);
            break;
    }
}

/* --- timers ---------------------------------------------------------- */

static void tick (struct mesh *m)
{
    double now = mesh_now ();
    uint32_t par = m->parent[m->self];
    size_t before = m->nnewly_lost;

    /* Stalled since we woke (descheduled, or SIGSTOPped and resumed)?  Then
     * what our peers sent meanwhile is still unread: read it first, judge
     * silence next round. */
    if (now - m->woke > m->hb_interval / 2) {
        log_debug ("mesh %u: held up %.0f ms since its wake: reading before judging",
                   m->self,
                   (now - m->woke) * 1e3);
        return;
    }
    conn_tick (m, now);
    for (uint32_t i = 0; i < m->n && !m->fenced; i++) {
        struct peer *p = &m->peers[i];
        double base, limit;

        if (!p->neighbour || !m->live[i])
            continue;
        if (link_is_up (m, i) && now - p->conn->last_tx >= m->hb_interval) {
            struct mesh_wbuf b = {0};
            size_t off = mesh_begin (m, &b, MESH_HEARTBEAT, 0);
            if (mesh_msg_end (&b, off) == 0) {
                conn_send (m, p->conn, b.buf, b.len);
                m->heartbeats_sent++;
            }
            mesh_wbuf_free (&b);
        }
        base = p->since > p->last_rx ? p->since : p->last_rx;
        limit = m->node_timeout;
        if (!p->ever_up && now < p->join_by)
            limit = m->join_timeout;
        if (now - base > limit) {
            mesh_mark_lost (m,
                            i,
                            p->refused && !link_is_up (m, i) ? MESH_CAUSE_EOF
                                                             : MESH_CAUSE_TIMEOUT);
            continue;
        }
        if (i == par && !p->conn && now >= p->next_connect) {
            if (conn_connect (m, i) < 0)
                p->next_connect = now + 0.1;
        }
    }
    pthread_mutex_lock (&m->lock);
    for (uint32_t i = 0; i < m->n; i++) {
        const struct peer *p = &m->peers[i];
        m->rx_snapshot[i] = p->neighbour && m->live[i] ? p->last_rx : 0;
    }
    pthread_mutex_unlock (&m->lock);
    if (m->fenced)
        return;
    if (m->nnewly_lost > before) {
        mesh_view_changed (m);
        if (m->fenced)
            return;
    }
    par = m->parent[m->self];
    if (m->rejoin_deadline > 0 && now > m->rejoin_deadline) {
        if (par != MESH_NONE && !link_is_up (m, par)) {
            mesh_self_fence (m,
                             "lost its parent to silence and could not reach its new "
                             "parent, member %u, within %.1f s",
                             par,
                             m->node_timeout);
            return;
        }
        m->rejoin_deadline = 0;
    }
    expire_suspects (m, now);
}

/* --- commands -------------------------------------------------------- */

/* Admit a newcomer listening at addr into the lowest absent slot and fill
 * *a (on the mesh thread).  Returns 0, or an errno (a is then empty). */
static int admit_into (struct mesh *m, const char *addr, struct mesh_admission *a)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    elastic_error_t err = {{0}};
    uint32_t k = MESH_NONE;
    int e = 0;

    memset (a, 0, sizeof (*a));
    for (uint32_t i = m->base; i < m->n && k == MESH_NONE; i++)
        if (m->absent[i])
            k = i;
    if (m->fenced)
        e = ECANCELED;
    else if (m->nlive >= m->max_live)
        e = ENOSPC;
    else if (k == MESH_NONE)
        e = EMLINK;
    else if (mesh_parse_addr (addr, &ss, &sl, &err) < 0)
        e = EINVAL;
    else if (!(a->slots = malloc (m->n)) || !(a->addrs = calloc (m->n, sizeof (char *))))
        e = ENOMEM;
    if (e == 0) {
        (void)mesh_mark_joined (m, k, addr);
        a->slot = k;
        a->n = m->n;
        a->base = m->base;
        a->epoch = m->epoch;
        for (uint32_t i = 0; i < m->n; i++) {
            a->slots[i] = m->live[i]     ? MESH_SLOT_LIVE
                          : m->absent[i] ? MESH_SLOT_ABSENT
                                         : MESH_SLOT_LOST;
            if (m->live[i] && m->addr_text[i] &&
                !(a->addrs[i] = strdup (m->addr_text[i])))
                e = ENOMEM;
        }
        log_info ("mesh %u: admitted %s as member %u", m->self, addr, k);
        mesh_view_changed (m);
    }
    if (e)
        mesh_admission_free (a);
    return e;
}

/* mesh_admit's work, on the mesh thread; always answers w. */
static void admit (struct mesh *m, struct admit_wait *w)
{
    int e = admit_into (m, w->addr, w->a);

    pthread_mutex_lock (&w->lock);
    w->err = e;
    w->done = 1;
    pthread_cond_signal (&w->cond);
    pthread_mutex_unlock (&w->lock);
}

static uint32_t admit_status (int e)
{
    switch (e) {
        case 0:
            return MESH_ADMIT_OK;
        case ENOSPC:
            return MESH_ADMIT_FULL;
        case EMLINK:
            return MESH_ADMIT_SPENT;
        case ECANCELED:
            return MESH_ADMIT_STOPPING;
        default:
            return MESH_ADMIT_ERROR;
    }
}

void mesh_admit_newcomer (struct mesh *m, struct conn *c, const char *addr)
{
    struct mesh_admission a = {0};
    struct mesh_wbuf b = {0};
    uint32_t status;
    size_t off;

    if (!m->admit_info)
        status = MESH_ADMIT_NOJOIN;
    else
        status = admit_status (admit_into (m, addr, &a));
    if (status != MESH_ADMIT_OK)
        log_warn ("mesh %u: refused newcomer %s: %s",
                  m->self,
                  addr,
                  mesh_admit_status_text (status));
    off = mesh_begin (m, &b, MESH_ADMIT, 0);
    mesh_admit_payload (&b,
                        status,
                        a.slot,
                        a.n,
                        a.base,
                        a.epoch,
                        a.slots,
                        (const char *const *)a.addrs,
                        m->admit_info,
                        m->admit_info_len);
    if (mesh_msg_end (&b, off) == 0)
        conn_send (m, c, b.buf, b.len);
    mesh_wbuf_free (&b);
    mesh_admission_free (&a);
    conn_close (m, c, 0);
}

static void run_command (struct mesh *m, struct cmd *c)
{
    switch (c->type) {
        case CMD_FENCE:
            fence_local (m, c->data, c->len, c->fcb, c->arg);
            c->data = NULL;
            break;
        case CMD_BCAST:
            if (!m->fenced)
                bcast_send (m, c->kind, c->data, c->len);
            break;
        case CMD_DMODEX:
            route_dmodex (m, c->data, c->len, c->target, c->dcb, c->arg);
            c->data = NULL;
            break;
        case CMD_DEAF:
            m->deaf = c->status;
            log_warn ("mesh %u: TEST: network %s",
                      m->self,
                      m->deaf == 2 ? "cut inbound"
                      : m->deaf    ? "cut"
                                   : "restored");
            break;
        case CMD_RESPOND:
            if (!m->fenced)
                route_respond (m, c->id, c->origin, c->status, c->data, c->len);
            break;
        case CMD_ADMIT:
            admit (m, c->arg);
            break;
    }
    free (c->data);
    free (c);
}

static void run_commands (struct mesh *m)
{
    struct cmd *list;
    uint64_t v;

    while (read (m->evfd, &v, sizeof (v)) > 0)
        ;
    pthread_mutex_lock (&m->lock);
    list = m->cmds;
    m->cmds = NULL;
    m->cmds_tail = &m->cmds;
    pthread_mutex_unlock (&m->lock);
    while (list) {
        struct cmd *c = list;
        list = c->next;
        run_command (m, c);
    }
}

static void shutdown_links (struct mesh *m)
{
    struct conn *c, *next;

    for (c = m->conns; c; c = next) {
        next = c->next;
        conn_close (m, c, MESH_BYE_SHUTDOWN);
    }
    conn_bury (m);
}

static void *mesh_thread (void *arg)
{
    struct mesh *m = arg;
    struct epoll_event ev[64];

    int stalled = 0, first = 1;
    double now;

    m->start = m->last_change = m->woke = mesh_now ();
    for (uint32_t i = 0; i < m->n; i++) {
        m->peers[i].since = m->start;
        if (m->peers[i].neighbour)
            m->peers[i].join_by = m->start + m->join_timeout;
    }
    for (;;) {
        int n, tmo = (int)(m->hb_interval * 500);
        int stop;

        if (tmo < 10)
            tmo = 10;
        /* the first round does not wait: its tick starts the connects */
        n = epoll_wait (m->epfd, ev, 64, stalled || first ? 0 : tmo);
        first = 0;
        now = mesh_now ();
        /* a loop that slept far longer than asked was stopped: gather
         * input once more before any timer runs */
        stalled = !stalled && now - m->woke > tmo / 1000.0 + m->hb_interval;
        if (stalled)
            log_debug ("mesh %u: its loop stalled %.0f ms (descheduled or stopped): "
                       "reading before judging",
                       m->self,
                       (now - m->woke) * 1e3);
        m->woke = now;
        for (int i = 0; i < n; i++) {
            void *p = ev[i].data.ptr;
            if (p == &listen_marker) {
                for (int k = 0; k < 16 && m->listen_fd >= 0; k++) {
                    struct conn *c = conn_accept (m);
                    if (!c)
                        break;
                    if (m->fenced)
                        conn_close (m, c, 0);
                }
            } else if (p == &wake_marker) {
                run_commands (m);
            } else {
                conn_io (m, p, (int)ev[i].events);
            }
        }
        if (!m->fenced && !stalled)
            tick (m);
        conn_bury (m);
        publish (m, 0);
        pthread_mutex_lock (&m->lock);
        stop = m->stop;
        pthread_mutex_unlock (&m->lock);
        if (stop)
            break;
    }
    run_commands (m);
    shutdown_links (m);
    return NULL;
}

/* --- the API --------------------------------------------------------- */

static int queue (struct mesh *m, struct cmd *c)
{
    uint64_t one = 1;
    int dead;

    pthread_mutex_lock (&m->lock);
    dead = m->stop;
    if (!dead) {
        *m->cmds_tail = c;
        m->cmds_tail = &c->next;
    }
    pthread_mutex_unlock (&m->lock);
    if (dead) {
        free (c->data);
        free (c);
        errno = ECANCELED;
        return -1;
    }
    if (write (m->evfd, &one, sizeof (one)) < 0) {
        /* the counter is full: the thread is awake anyway */
    }
    return 0;
}

static struct cmd *cmd_new (int type, const void *data, size_t len)
{
    struct cmd *c = calloc (1, sizeof (*c));

    if (!c)
        return NULL;
    c->type = type;
    if (len || data) {
        if (!(c->data = malloc (len ? len : 1))) {
            free (c);
            return NULL;
        }
        if (len)
            memcpy (c->data, data, len);
    }
    c->len = len;
    return c;
}

/* The slots' states at the start (mesh_config.slots), checked. */
static int
init_slots (struct mesh *m, const struct mesh_config *cfg, elastic_error_t *err)
{
    uint32_t n = m->n;

    m->base = cfg->base > 0 && cfg->base <= n ? cfg->base : n;
    m->max_live = cfg->max_live > 0 && cfg->max_live <= n ? cfg->max_live : n;
    m->catch_up = cfg->joining;
    if (cfg->admit_info) {
        if (!(m->admit_info = malloc (cfg->admit_info_len + 1)))
            return errprintf (err, "mesh: out of memory");
        memcpy (m->admit_info, cfg->admit_info, cfg->admit_info_len);
        m->admit_info_len = cfg->admit_info_len;
    }
    memset (m->live, 1, n);
    if (!cfg->slots)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        switch (cfg->slots[i]) {
            case MESH_SLOT_LIVE:
                break;
            case MESH_SLOT_ABSENT:
                if (i < m->base)
                    return errprintf (err,
                                      "mesh: member %u is absent, but members below %u "
                                      "were there at the start",
                                      i,
                                      m->base);
                m->live[i] = 0;
                m->absent[i] = 1;
                m->nlive--;
                break;
            case MESH_SLOT_LOST:
                m->live[i] = 0;
                m->cause[i] = MESH_CAUSE_EOF;
                m->nlive--;
                m->nlost++;
                m->epoch++;
                break;
            default:
                return errprintf (err, "mesh: slot %u: state %u", i, cfg->slots[i]);
        }
        if (i >= m->base && cfg->slots[i] != MESH_SLOT_ABSENT) {
            m->njoined++;
            m->epoch++;
        }
    }
    if (!m->live[m->self])
        return errprintf (
            err, "mesh: this member (%u) is not live in its own view", m->self);
    return 0;
}

/* Listen on our address: on its port, or on the first candidate port that
 * is not in use (mesh_config.ports).  Returns 0, or -1 with err. */
static int listen_first_free (struct mesh *m, const char *addr, elastic_error_t *err)
{
    struct sockaddr_storage *ss = &m->addr[m->self];
    uint32_t k = 0;
    int one = 1, e;

    for (;;) {
        int fd = socket (ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 &&
            setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one)) == 0 &&
            bind (fd, (struct sockaddr *)ss, m->addrlen[m->self]) == 0 &&
            listen (fd, 128) == 0) {
            m->listen_fd = fd;
            break;
        }
        e = errno;
        if (fd >= 0)
            close (fd);
        if (e != EADDRINUSE || k + 1 >= m->nports) {
            char list[128] = "";
            size_t used = 0;
            for (uint32_t j = 0; j < m->nports && used < sizeof (list); j++)
                used += (size_t)snprintf (
                    list + used, sizeof (list) - used, "%s%d", j ? "," : "", m->ports[j]);
            if (e == EADDRINUSE && m->nports > 1)
                return errprintf (err,
                                  "mesh: listen on %s: every candidate port is in use "
                                  "here (%s)",
                                  addr,
                                  list);
            return errprintf (err, "mesh: listen on %s: %s", addr, strerror (e));
        }
        mesh_addr_set_port (ss, m->ports[++k]);
    }
    if (k > 0)
        log_info ("mesh %u: port %d is in use here; listening on port %d (candidate %u)",
                  m->self,
                  m->ports[0],
                  m->ports[k],
                  k + 1);
    return 0;
}

struct mesh *mesh_create (const struct mesh_config *cfg, elastic_error_t *err)
{
    struct mesh *m;
    struct epoll_event ev = {0};
    uint32_t n = cfg->nmembers;

    if (n == 0 || n > MESH_MAX_MEMBERS || cfg->self >= n || !cfg->addrs ||
        (cfg->auth == MESH_AUTH_SECRET && !cfg->key)) {
        errprintf (
            err,
            "mesh: member %u of %u (expected 0 <= member < members <= %u, addresses "
            "and a key)",
            cfg->self,
            n,
            MESH_MAX_MEMBERS);
        return NULL;
    }
    if (cfg->auth != MESH_AUTH_SECRET && cfg->auth != MESH_AUTH_MUNGE) {
        errprintf (err,
                   "mesh: authentication mode %d (expected MESH_AUTH_SECRET or "
                   "MESH_AUTH_MUNGE)",
                   cfg->auth);
        return NULL;
    }
#if !HAVE_MUNGE
    if (cfg->auth == MESH_AUTH_MUNGE) {
        errprintf (err, "mesh: munge authentication, but this build has no libmunge");
        return NULL;
    }
#endif
    if (cfg->node_timeout != 0 && cfg->node_timeout < 0.2) {
        errprintf (err, "mesh: node timeout %.3f s (at least 0.2 s)", cfg->node_timeout);
        return NULL;
    }
    if (!(m = calloc (1, sizeof (*m)))) {
        errprintf (err, "mesh: out of memory");
        return NULL;
    }
    pthread_mutex_init (&m->lock, NULL);
    m->listen_fd = m->epfd = m->evfd = -1;
    m->cmds_tail = &m->cmds;
    m->n = n;
    m->self = cfg->self;
    m->radix = cfg->radix ? cfg->radix : 8;
    m->node_timeout = cfg->node_timeout > 0 ? cfg->node_timeout : 2.0;
    m->join_timeout = cfg->join_timeout > 0 ? cfg->join_timeout : 60.0;
    m->hb_interval = m->node_timeout / 5;
    m->hs_timeout = m->node_timeout;
    m->auth = cfg->auth;
    if (cfg->key)
        memcpy (m->key, cfg->key, MESH_KEY_SIZE);
    if (m->auth == MESH_AUTH_MUNGE &&
        (!(m->job = strdup (cfg->job ? cfg->job : "")) ||
         (cfg->munge_socket && !(m->munge_socket = strdup (cfg->munge_socket))))) {
        errprintf (err, "mesh: out of memory");
        goto error;
    }
    m->ops = cfg->ops;
    m->arg = cfg->arg;
    m->nlive = n;
    m->next_id = 1;
    if (!(m->addr = calloc (n, sizeof (*m->addr))) ||
        !(m->addrlen = calloc (n, sizeof (*m->addrlen))) || !(m->live = malloc (n)) ||
        !(m->live_snapshot = malloc (n)) || !(m->cause_snapshot = calloc (n, 1)) ||
        !(m->rx_snapshot = calloc (n, sizeof (double))) || !(m->cause = calloc (n, 1)) ||
        !(m->suspect = calloc (n, 1)) || !(m->left = calloc (n, 1)) ||
        !(m->lost_at = calloc (n, sizeof (*m->lost_at))) ||
        !(m->parent = calloc (n, sizeof (*m->parent))) ||
        !(m->peers = calloc (n, sizeof (*m->peers))) ||
        !(m->newly_lost = calloc (n, sizeof (*m->newly_lost))) ||
        !(m->newly_joined = calloc (n, sizeof (*m->newly_joined))) ||
        !(m->absent = calloc (n, 1)) || !(m->addr_text = calloc (n, sizeof (char *))) ||
        fence_init (m) < 0) {
        errprintf (err, "mesh: out of memory for %u members", n);
        goto error;
    }
    if (init_slots (m, cfg, err) < 0)
        goto error;
    memcpy (m->live_snapshot, m->live, n);
    for (uint32_t i = 0; i < n; i++) {
        if (!m->live[i])
            continue;
        if (!cfg->addrs[i] ||
            mesh_parse_addr (cfg->addrs[i], &m->addr[i], &m->addrlen[i], err) < 0) {
            if (!cfg->addrs[i])
                errprintf (err, "mesh: no address for member %u", i);
            goto error;
        }
        if (!(m->addr_text[i] = strdup (cfg->addrs[i]))) {
            errprintf (err, "mesh: out of memory");
            goto error;
        }
    }
    tree_parents (n, m->radix, m->live, m->parent);
    update_neighbours (m);
    if (cfg->nports > 1) {
        if (!(m->ports = calloc (cfg->nports, sizeof (*m->ports)))) {
            errprintf (err, "mesh: out of memory");
            goto error;
        }
        for (uint32_t k = 0; k < cfg->nports; k++) {
            if (cfg->ports[k] < 1 || cfg->ports[k] > 65535) {
                errprintf (
                    err, "mesh: candidate port %d (expected 1-65535)", cfg->ports[k]);
                goto error;
            }
            m->ports[k] = cfg->ports[k];
        }
        m->nports = cfg->nports;
        for (uint32_t i = 0; i < n; i++)
            mesh_addr_set_port (&m->addr[i], m->ports[0]);
    }
    if (cfg->listen_fd >= 0) {
        m->listen_fd = cfg->listen_fd;
    } else if (listen_first_free (m, cfg->addrs[m->self], err) < 0) {
        goto error;
    }
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof (ss);
        if (getsockname (m->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
            m->listen_port = mesh_addr_port (&ss);
    }
    {
        int fl = fcntl (m->listen_fd, F_GETFL);
        if (fl < 0 || fcntl (m->listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
            errprintf (err, "mesh: listening socket: %s", strerror (errno));
            goto error;
        }
    }
    if ((m->epfd = epoll_create1 (EPOLL_CLOEXEC)) < 0 ||
        (m->evfd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        errprintf (err, "mesh: %s", strerror (errno));
        goto error;
    }
    ev.events = EPOLLIN;
    ev.data.ptr = &listen_marker;
    if (epoll_ctl (m->epfd, EPOLL_CTL_ADD, m->listen_fd, &ev) < 0)
        goto error_errno;
    ev.data.ptr = &wake_marker;
    if (epoll_ctl (m->epfd, EPOLL_CTL_ADD, m->evfd, &ev) < 0)
        goto error_errno;
    publish (m, 1);
    return m;
error_errno:
    errprintf (err, "mesh: epoll: %s", strerror (errno));
error:
    mesh_destroy (m);
    return NULL;
}

int mesh_listen_port (const struct mesh *m)
{
    return m->listen_port;
}

int mesh_start (struct mesh *m, elastic_error_t *err)
{
    int rc;

    if (m->started)
        return errprintf (err, "mesh: already started");
    if ((rc = pthread_create (&m->thread, NULL, mesh_thread, m)) != 0)
        return errprintf (err, "mesh: thread: %s", strerror (rc));
    m->started = 1;
    return 0;
}

void mesh_destroy (struct mesh *m)
{
    int saved = errno;
    struct cmd *c;

    if (!m)
        return;
    if (m->started) {
        uint64_t one = 1;
        pthread_mutex_lock (&m->lock);
        m->stop = 1;
        pthread_mutex_unlock (&m->lock);
        if (write (m->evfd, &one, sizeof (one)) < 0) {
            /* awake anyway */
        }
        pthread_join (m->thread, NULL);
    } else if (m->peers) {
        shutdown_links (m);
    }
    /* fail whatever is left, on this thread (the mesh thread is gone) */
    pthread_mutex_lock (&m->lock);
    m->stop = 1;
    c = m->cmds;
    m->cmds = NULL;
    pthread_mutex_unlock (&m->lock);
    m->fenced = 1;
    while (c) {
        struct cmd *next = c->next;
        run_command (m, c);
        c = next;
    }
    if (m->peers) {
        fence_cancel (m, MESH_ECANCEL);
        route_cancel (m, MESH_ECANCEL);
        for (uint32_t i = 0; i < m->n; i++)
            mesh_wbuf_free (&m->peers[i].pending);
    }
    conn_bury (m);
    for (size_t i = 0; i < m->nmute; i++)
        close (m->mute_fds[i]);
    free (m->mute_fds);
    fence_free (m);
    bcast_free (m);
    if (m->listen_fd >= 0)
        close (m->listen_fd);
    if (m->epfd >= 0)
        close (m->epfd);
    if (m->evfd >= 0)
        close (m->evfd);
    free (m->job);
    free (m->munge_socket);
    free (m->addr);
    free (m->addrlen);
    free (m->ports);
    free (m->live);
    free (m->live_snapshot);
    free (m->cause_snapshot);
    free (m->rx_snapshot);
    free (m->cause);
    free (m->suspect);
    free (m->left);
    free (m->lost_at);
    free (m->parent);
    free (m->peers);
    free (m->newly_lost);
    free (m->newly_joined);
    free (m->absent);
    for (uint32_t i = 0; m->addr_text && i < m->n; i++)
        free (m->addr_text[i]);
    free (m->addr_text);
    free (m->admit_info);
    pthread_mutex_destroy (&m->lock);
    free (m);
    errno = saved;
}

int mesh_fence (struct mesh *m, const void *blob, size_t len, mesh_fence_cb cb, void *arg)
{
    struct cmd *c;
    int busy;

    if (len > MESH_MAX_PAYLOAD / 2) {
        errno = EMSGSIZE;
        return -1;
    }
    pthread_mutex_lock (&m->lock);
    busy = m->fence_busy;
    if (!busy && !m->dead)
        m->fence_busy = 1;
    pthread_mutex_unlock (&m->lock);
    if (busy) {
        errno = EBUSY;
        return -1;
    }
    if (!(c = cmd_new (CMD_FENCE, blob ? blob : "", len))) {
        pthread_mutex_lock (&m->lock);
        m->fence_busy = 0;
        pthread_mutex_unlock (&m->lock);
        errno = ENOMEM;
        return -1;
    }
    c->fcb = cb;
    c->arg = arg;
    return queue (m, c);
}

void mesh_admission_free (struct mesh_admission *a)
{
    if (!a)
        return;
    for (uint32_t i = 0; a->addrs && i < a->n; i++)
        free (a->addrs[i]);
    free (a->addrs);
    free (a->slots);
    a->addrs = NULL;
    a->slots = NULL;
}

int mesh_admit (struct mesh *m, const char *addr, struct mesh_admission *a)
{
    struct admit_wait w = {.addr = addr, .a = a};
    struct cmd *c = cmd_new (CMD_ADMIT, NULL, 0);

    memset (a, 0, sizeof (*a));
    if (!c) {
        errno = ENOMEM;
        return -1;
    }
    pthread_mutex_init (&w.lock, NULL);
    pthread_cond_init (&w.cond, NULL);
    c->arg = &w;
    if (queue (m, c) < 0) {
        w.err = errno;
    } else {
        pthread_mutex_lock (&w.lock);
        while (!w.done)
            pthread_cond_wait (&w.cond, &w.lock);
        pthread_mutex_unlock (&w.lock);
    }
    pthread_mutex_destroy (&w.lock);
    pthread_cond_destroy (&w.cond);
    if (w.err) {
        errno = w.err;
        return -1;
    }
    return 0;
}

int mesh_broadcast (struct mesh *m, int kind, const void *data, size_t len)
{
    struct cmd *c;

    if (kind < 1 || kind > MESH_BCAST_KIND_MAX || len > MESH_MAX_PAYLOAD / 2) {
        errno = EINVAL;
        return -1;
    }
    if (!(c = cmd_new (CMD_BCAST, data ? data : "", len))) {
        errno = ENOMEM;
        return -1;
    }
    c->kind = kind;
    return queue (m, c);
}

int mesh_broadcast_failure (struct mesh *m,
                            uint32_t rank,
                            int32_t status,
                            const char *nspace)
{
    struct mesh_wbuf b = {0};
    int rc;

    if (mesh_rank_failed_encode (&b, rank, status, nspace) < 0) {
        mesh_wbuf_free (&b);
        errno = ENOMEM;
        return -1;
    }
    rc = mesh_broadcast (m, MESH_BCAST_RANK_FAILED, b.buf, b.len);
    mesh_wbuf_free (&b);
    return rc;
}

int mesh_dmodex (struct mesh *m,
                 uint32_t target,
                 const void *data,
                 size_t len,
                 mesh_dmodex_cb cb,
                 void *arg)
{
    struct cmd *c;

    if (target >= m->n || len > MESH_MAX_PAYLOAD / 2) {
        errno = EINVAL;
        return -1;
    }
    if (!(c = cmd_new (CMD_DMODEX, data ? data : "", len))) {
        errno = ENOMEM;
        return -1;
    }
    c->target = target;
    c->dcb = cb;
    c->arg = arg;
    return queue (m, c);
}

void mesh_dmodex_respond (struct mesh_request *req,
                          int status,
                          const void *data,
                          size_t len)
{
    struct cmd *c;

    if (!req)
        return;
    if ((c = cmd_new (CMD_RESPOND, data ? data : "", len))) {
        c->id = req->id;
        c->origin = req->origin;
        c->status = status;
        (void)queue (req->m, c);
    }
    free (req);
}

void mesh_get_stats (struct mesh *m, struct mesh_stats *st)
{
    pthread_mutex_lock (&m->lock);
    *st = m->stats;
    pthread_mutex_unlock (&m->lock);
}

void mesh_get_live (struct mesh *m, uint8_t *live, uint32_t n)
{
    pthread_mutex_lock (&m->lock);
    memcpy (live, m->live_snapshot, n < m->n ? n : m->n);
    pthread_mutex_unlock (&m->lock);
}

void mesh_get_causes (struct mesh *m, uint8_t *cause, uint32_t n)
{
    pthread_mutex_lock (&m->lock);
    memcpy (cause, m->cause_snapshot, n < m->n ? n : m->n);
    pthread_mutex_unlock (&m->lock);
}

void mesh_get_ages (struct mesh *m, double *age, uint32_t n)
{
    double now = mesh_now ();

    pthread_mutex_lock (&m->lock);
    for (uint32_t i = 0; i < n; i++)
        age[i] = i < m->n && m->rx_snapshot[i] > 0 ? now - m->rx_snapshot[i] : -1;
    pthread_mutex_unlock (&m->lock);
}

void mesh_test_cut (struct mesh *m, int on)
{
    struct cmd *c = cmd_new (CMD_DEAF, NULL, 0);

    if (c) {
        c->status = on;
        (void)queue (m, c);
    }
}
