/* route.c - direct modex along the tree, and flooded broadcasts
 *
 * A direct-modex request goes hop by hop (tree_next_hop) to the member
 * hosting the rank, whose handler answers; the answer goes back the same
 * way.  The origin keeps every request until it is answered: it fails it
 * with MESH_ELOST at once when the target is (or becomes) lost, and sends
 * it again after every repair (a hop may have died with it; a target
 * answering twice is harmless, the second answer finds no request).
 *
 * A broadcast is flooded to every tree neighbour but the one it came
 * from; each member delivers it once, by (origin, seq), and keeps the last
 * MESH_RECENT to hand to every neighbour it links with after a repair, so
 * a broadcast that was in flight through a lost member still reaches the
 * orphaned subtree.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "mesh_impl.h"

/* Re-frame a message's payload under our own header and send it to `to`. */
static void
forward (struct mesh *m, uint32_t to, int type, const uint8_t *payload, size_t len)
{
    struct mesh_wbuf b = {0};
    size_t off = mesh_begin (m, &b, type, 0);

    mesh_put_bytes (&b, payload, len);
    if (mesh_msg_end (&b, off) == 0)
        mesh_send_member (m, to, b.buf, b.len);
    mesh_wbuf_free (&b);
}

static int
route_to (struct mesh *m, uint32_t to, int type, const uint8_t *payload, size_t len)
{
    uint32_t hop;

    if (to >= m->n || !m->live[to])
        return -1;
    hop = tree_next_hop (m->n, m->parent, m->self, to);
    if (hop == MESH_NONE || !m->live[hop])
        return -1;
    forward (m, hop, type, payload, len);
    return 0;
}

/* --- direct modex ---------------------------------------------------- */

static void send_request (struct mesh *m, struct dreq *d)
{
    struct mesh_wbuf b = {0};

    mesh_put_u64 (&b, d->id);
    mesh_put_u32 (&b, m->self);
    mesh_put_u32 (&b, d->target);
    mesh_put_blob (&b, d->data, d->len);
    if (!b.failed)
        (void)route_to (m, d->target, MESH_DMODEX_REQ, b.buf, b.len);
    mesh_wbuf_free (&b);
}

static void call_handler (
    struct mesh *m, uint64_t id, uint32_t origin, const uint8_t *data, size_t len)
{
    struct mesh_request *req;

    if (!m->ops.dmodex_request || !(req = malloc (sizeof (*req)))) {
        route_respond (m, id, origin, -ENOSYS, NULL, 0);
        return;
    }
    req->m = m;
    req->id = id;
    req->origin = origin;
    m->ops.dmodex_request (m->arg, req, origin, data, len);
}

/* Take request id off the list and complete it. */
static void finish (struct mesh *m, uint64_t id, int status, const void *data, size_t len)
{
    struct dreq **pp, *d;

    for (pp = &m->dreqs; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            d = *pp;
            *pp = d->next;
            if (d->cb)
                d->cb (d->arg, status, data, len);
            free (d->data);
            free (d);
            return;
        }
    }
}

void route_dmodex (struct mesh *m,
                   uint8_t *data,
                   size_t len,
                   uint32_t target,
                   mesh_dmodex_cb cb,
                   void *arg)
{
    struct dreq *d;

    if (m->fenced || target >= m->n || !m->live[target]) {
        free (data);
        if (cb)
            cb (arg, m->fenced ? MESH_ECANCEL : MESH_ELOST, NULL, 0);
        return;
    }
    if (!(d = calloc (1, sizeof (*d)))) {
        free (data);
        if (cb)
            cb (arg, -ENOMEM, NULL, 0);
        return;
    }
    d->id = m->next_id++;
    d->target = target;
    d->data = data;
    d->len = (uint32_t)len;
    d->cb = cb;
    d->arg = arg;
    d->next = m->dreqs;
    m->dreqs = d;
    if (target == m->self)
        call_handler (m, d->id, m->self, data, len);
    else
        send_request (m, d);
}

void route_respond (struct mesh *m,
                    uint64_t id,
                    uint32_t origin,
                    int status,
                    const uint8_t *data,
                    size_t len)
{
    struct mesh_wbuf b = {0};

    if (origin == m->self) {
        finish (m, id, status, data, len);
        return;
    }
    mesh_put_u64 (&b, id);
    mesh_put_u32 (&b, origin);
    mesh_put_u32 (&b, m->self);
    mesh_put_u32 (&b, (uint32_t)status);
    mesh_put_blob (&b, data, len);
    if (!b.failed && route_to (m, origin, MESH_DMODEX_RESP, b.buf, b.len) < 0)
        log_debug ("mesh %u: dmodex answer for lost member %u dropped", m->self, origin);
    mesh_wbuf_free (&b);
}

void route_lost (struct mesh *m, uint32_t member)
{
    struct dreq *d = m->dreqs;

    while (d) {
        struct dreq *next = d->next;
        if (d->target == member)
            finish (m, d->id, MESH_ELOST, NULL, 0);
        d = next;
    }
}

void route_view_changed (struct mesh *m)
{
    for (struct dreq *d = m->dreqs; d; d = d->next)
        if (d->target != m->self)
            send_request (m, d);
}

void route_cancel (struct mesh *m, int status)
{
    while (m->dreqs)
        finish (m, m->dreqs->id, status, NULL, 0);
}

/* --- broadcasts ------------------------------------------------------ */

static int seen (struct mesh *m, uint32_t origin, uint32_t seq)
{
    uint64_t key = (uint64_t)origin << 32 | seq;

    for (size_t i = 0; i < m->nseen; i++)
        if (m->seen[i] == key)
            return 1;
    if (m->nseen == m->seen_cap) {
        size_t cap = m->seen_cap ? m->seen_cap * 2 : 64;
        uint64_t *p = realloc (m->seen, cap * sizeof (*p));
        if (!p)
            return 0;
        m->seen = p;
        m->seen_cap = cap;
    }
    m->seen[m->nseen++] = key;
    return 0;
}

static void remember (struct mesh *m, const uint8_t *payload, size_t len)
{
    struct mesh_wbuf *r = &m->recent[m->nrecent++ % MESH_RECENT];

    r->len = 0;
    mesh_put_bytes (r, payload, len);
}

static void flood (struct mesh *m, uint32_t except, const uint8_t *payload, size_t len)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (m->peers[i].neighbour && i != except && m->live[i])
            forward (m, i, MESH_BCAST, payload, len);
}

void bcast_send (struct mesh *m, int kind, const uint8_t *data, size_t len)
{
    struct mesh_wbuf b = {0};
    uint32_t seq = ++m->bcast_seq;

    (void)seen (m, m->self, seq);
    mesh_put_u32 (&b, m->self);
    mesh_put_u32 (&b, seq);
    mesh_put_u8 (&b, (uint8_t)kind);
    mesh_put_blob (&b, data, len);
    if (!b.failed) {
        remember (m, b.buf, b.len);
        flood (m, MESH_NONE, b.buf, b.len);
    }
    mesh_wbuf_free (&b);
}

void bcast_link_up (struct mesh *m, uint32_t member)
{
    size_t n = m->nrecent < MESH_RECENT ? m->nrecent : MESH_RECENT;

    for (size_t i = 0; i < n; i++) {
        struct mesh_wbuf *r = &m->recent[(m->nrecent - n + i) % MESH_RECENT];
        forward (m, member, MESH_BCAST, r->buf, r->len);
    }
}

void bcast_free (struct mesh *m)
{
    for (size_t i = 0; i < MESH_RECENT; i++)
        mesh_wbuf_free (&m->recent[i]);
    free (m->seen);
    m->seen = NULL;
}

void route_handle (struct mesh *m,
                   uint32_t from,
                   const struct mesh_msg *msg,
                   const uint8_t *raw,
                   size_t rawlen)
{
    const uint8_t *payload = raw + MESH_HDR_SIZE;
    size_t plen = rawlen - MESH_HDR_SIZE;

    switch (msg->hdr.type) {
        case MESH_DMODEX_REQ:
            if (msg->u.dmodex.target == m->self)
                call_handler (m,
                              msg->u.dmodex.id,
                              msg->u.dmodex.origin,
                              msg->u.dmodex.data,
                              msg->u.dmodex.len);
            else if (route_to (m, msg->u.dmodex.target, MESH_DMODEX_REQ, payload, plen) <
                     0)
                route_respond (
                    m, msg->u.dmodex.id, msg->u.dmodex.origin, MESH_ELOST, NULL, 0);
            break;
        case MESH_DMODEX_RESP:
            if (msg->u.dmodex.origin == m->self)
                finish (m,
                        msg->u.dmodex.id,
                        msg->u.dmodex.status,
                        msg->u.dmodex.data,
                        msg->u.dmodex.len);
            else
                (void)route_to (m, msg->u.dmodex.origin, MESH_DMODEX_RESP, payload, plen);
            break;
        case MESH_BCAST:
            if (msg->u.bcast.origin == m->self || msg->u.bcast.origin >= m->n ||
                seen (m, msg->u.bcast.origin, msg->u.bcast.seq))
                break;
            remember (m, payload, plen);
            flood (m, from, payload, plen);
            if (m->ops.broadcast)
                m->ops.broadcast (m->arg,
                                  msg->u.bcast.origin,
                                  msg->u.bcast.kind,
                                  msg->u.bcast.data,
                                  msg->u.bcast.len);
            break;
    }
}
