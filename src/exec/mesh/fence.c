/* fence.c - the mesh's allgather: contributions up the tree, result down
 *
 * Fences are numbered 1, 2, ... on every member (one at a time per
 * member).  Each member keeps, by member id, the blobs it has received for
 * the fence it is in (cur) and, in case a neighbour is one ahead, for the
 * next one; a member sends the blobs of its whole subtree to its parent
 * once it has them all, and the root, which has every live member's, makes
 * the result and sends it down.  Keyed by member, contributions survive a
 * repair: after a loss every member re-sends what it has to its (new)
 * parent and the completion tests run again over the repaired tree.
 *
 * A result, once made, is final: a member that has it and whose parent may
 * not (known_done) sends it up flagged RESULT, a member asked for a fence
 * it has finished answers with the result; both are adopted as they are.
 *
 * A member admitted into a running mesh starts at fence 1: its parent
 * sends it the last result it has (as to any child that may lack it), and
 * until a fence of its own completes the newcomer takes a result that
 * does not name it as the fences done before it came (its own
 * contribution moves on to the next one), never as its own.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "mesh_impl.h"

static int slot_init (struct fence_slot *s, uint32_t n, uint32_t seq)
{
    s->seq = seq;
    if (!(s->have = calloc (n, 1)) || !(s->blob = calloc (n, sizeof (*s->blob))) ||
        !(s->len = calloc (n, sizeof (*s->len))))
        return -1;
    return 0;
}

static void slot_clear (struct fence_slot *s, uint32_t n, uint32_t seq)
{
    for (uint32_t i = 0; i < n && s->blob; i++) {
        free (s->blob[i]);
        s->blob[i] = NULL;
    }
    if (s->have)
        memset (s->have, 0, n);
    s->seq = seq;
}

static void slot_free (struct fence_slot *s, uint32_t n)
{
    slot_clear (s, n, 0);
    free (s->have);
    free (s->blob);
    free (s->len);
}

static void
slot_put (struct fence_slot *s, uint32_t member, const uint8_t *data, uint32_t len)
{
    uint8_t *p;

    if (s->have[member])
        return;
    if (!(p = malloc (len ? len : 1)))
        return; /* not had: asked again after the next repair */
    if (len)
        memcpy (p, data, len);
    s->blob[member] = p;
    s->len[member] = len;
    s->have[member] = 1;
}

int fence_init (struct mesh *m)
{
    if (!(m->known_done = calloc (m->n, sizeof (*m->known_done))))
        return -1;
    if (slot_init (&m->cur, m->n, 1) < 0 || slot_init (&m->next, m->n, 2) < 0)
        return -1;
    return 0;
}

void fence_free (struct mesh *m)
{
    slot_free (&m->cur, m->n);
    slot_free (&m->next, m->n);
    mesh_wbuf_free (&m->done_list);
    free (m->known_done);
    m->known_done = NULL;
}

static void deliver (struct mesh *m, int status, const struct mesh_fence_result *res)
{
    mesh_fence_cb cb = m->fence_cb;
    void *arg = m->fence_arg;

    m->fence_pending = 0;
    m->fence_cb = NULL;
    pthread_mutex_lock (&m->lock);
    m->fence_busy = 0;
    pthread_mutex_unlock (&m->lock);
    if (cb)
        cb (arg, status, res);
}

void fence_cancel (struct mesh *m, int status)
{
    if (m->fence_pending)
        deliver (m, status, NULL);
}

/* encode fence message type (flags) for seq over the list (count, bytes) */
static void send_list (struct mesh *m,
                       uint32_t to,
                       int type,
                       unsigned flags,
                       uint32_t seq,
                       uint32_t count,
                       const uint8_t *list,
                       size_t len)
{
    struct mesh_wbuf b = {0};
    size_t off = mesh_begin (m, &b, type, flags);

    mesh_put_u32 (&b, seq);
    mesh_put_u32 (&b, count);
    mesh_put_bytes (&b, list, len);
    if (mesh_msg_end (&b, off) == 0)
        mesh_send_member (m, to, b.buf, b.len);
    else
        log_err ("mesh %u: fence %u: message too large (%zu bytes)", m->self, seq, b.len);
    mesh_wbuf_free (&b);
}

static void send_done (struct mesh *m, uint32_t to, int type, unsigned flags)
{
    send_list (m,
               to,
               type,
               flags,
               m->done_seq,
               m->done_count,
               m->done_list.buf,
               m->done_list.len);
    m->known_done[to] = m->done_seq;
}

/* The result (count entries in list) is final: keep it, hand it on, tell
 * the local caller, move to the next fence. */
static void complete (struct mesh *m,
                      uint32_t seq,
                      uint32_t epoch,
                      uint32_t count,
                      const uint8_t *list,
                      size_t len)
{
    struct mesh_fence_result res = {0};
    uint32_t *members = NULL, *lens = NULL;
    const uint8_t **data = NULL;
    struct mesh_list it;
    struct fence_slot tmp;
    uint32_t i = 0;

    m->done_list.len = 0;
    mesh_put_bytes (&m->done_list, list, len);
    m->done_seq = seq;
    m->done_epoch = epoch;
    m->done_count = count;
    m->fences_done++;
    m->catch_up = 0;
    /* cur becomes the old next; the old cur is cleared for seq + 2 */
    tmp = m->cur;
    m->cur = m->next;
    m->next = tmp;
    slot_clear (&m->next, m->n, seq + 2);
    m->fence_sent_up = 0;
    for (uint32_t c = 0; c < m->n; c++)
        if (m->live[c] && m->parent[c] == m->self)
            send_done (m, c, MESH_FENCE_DOWN, 0);
    log_debug (
        "mesh %u: fence %u complete (%u blobs, epoch %u)", m->self, seq, count, epoch);
    if (!m->fence_pending) {
        log_warn (
            "mesh %u: fence %u completed before this member joined it", m->self, seq);
        return;
    }
    members = calloc (count ? count : 1, sizeof (*members));
    lens = calloc (count ? count : 1, sizeof (*lens));
    data = calloc (count ? count : 1, sizeof (*data));
    if (!members || !lens || !data) {
        deliver (m, -12 /* -ENOMEM */, NULL);
        goto out;
    }
    it.p = m->done_list.buf;
    it.len = m->done_list.len;
    it.count = count;
    while (i < count && mesh_list_next (&it, 1, &members[i], NULL, &data[i], &lens[i]))
        i++;
    res.seq = seq;
    res.epoch = epoch;
    res.count = i;
    res.members = members;
    res.data = data;
    res.len = lens;
    deliver (m, MESH_OK, &res);
out:
    free (members);
    free (lens);
    free (data);
}

/* Whether a result's list names member. */
static int names (const struct mesh_list *list, uint32_t member)
{
    struct mesh_list it = *list;
    uint32_t who, len;
    const uint8_t *data;

    while (mesh_list_next (&it, 1, &who, NULL, &data, &len))
        if (who == member)
            return 1;
    return 0;
}

static void send_done_to_children (struct mesh *m)
{
    for (uint32_t c = 0; c < m->n && m->done_seq > 0; c++)
        if (m->live[c] && m->parent[c] == m->self && m->known_done[c] < m->done_seq)
            send_done (m, c, MESH_FENCE_DOWN, 0);
}

/* A newcomer takes result seq as done before it came: its own blob moves
 * to seq + 1. */
static void
catch_up (struct mesh *m, uint32_t seq, uint32_t epoch, const struct mesh_list *l)
{
    uint8_t *own = NULL;
    uint32_t own_len = 0;
    int had = m->cur.have[m->self];

    if (had) {
        own = m->cur.blob[m->self];
        own_len = m->cur.len[m->self];
        m->cur.blob[m->self] = NULL;
        m->cur.have[m->self] = 0;
    }
    m->done_list.len = 0;
    mesh_put_bytes (&m->done_list, l->p, l->len);
    m->done_seq = seq;
    m->done_epoch = epoch;
    m->done_count = l->count;
    slot_clear (&m->cur, m->n, seq + 1);
    slot_clear (&m->next, m->n, seq + 2);
    if (had) {
        m->cur.blob[m->self] = own;
        m->cur.len[m->self] = own_len;
        m->cur.have[m->self] = 1;
    }
    m->fence_sent_up = 0;
    log_info (
        "mesh %u: joined after fence %u: its first is fence %u", m->self, seq, seq + 1);
    send_done_to_children (m);
    fence_progress (m);
}

/* A fence result from member `from`: remember that it has it, and complete
 * the current fence with it.  Returns 1 if it completed the current one. */
static int result_in (struct mesh *m, uint32_t from, const struct mesh_msg *msg)
{
    uint32_t seq = msg->u.fence.seq;

    if (from < m->n && seq > m->known_done[from])
        m->known_done[from] = seq;
    if (m->catch_up && seq >= m->cur.seq && !names (&msg->u.fence.blobs, m->self)) {
        catch_up (m, seq, msg->hdr.epoch, &msg->u.fence.blobs);
        return 0;
    }
    if (seq != m->cur.seq)
        return 0;
    complete (m,
              seq,
              msg->hdr.epoch,
              msg->u.fence.blobs.count,
              msg->u.fence.blobs.p,
              msg->u.fence.blobs.len);
    return 1;
}

/* Encode cur's blobs of the live members for which want(i) holds. */
static uint32_t encode_slot (struct mesh *m, struct mesh_wbuf *b, int subtree_only)
{
    uint32_t count = 0;

    for (uint32_t i = 0; i < m->n; i++) {
        if (!m->live[i] || !m->cur.have[i])
            continue;
        if (subtree_only && !tree_in_subtree (m->n, m->parent, m->self, i))
            continue;
        mesh_put_u32 (b, i);
        mesh_put_blob (b, m->cur.blob[i], m->cur.len[i]);
        count++;
    }
    return count;
}

void fence_progress (struct mesh *m)
{
    uint32_t par = m->parent[m->self];
    struct mesh_wbuf b = {0};
    uint32_t count;

    if (m->fenced || !m->cur.have[m->self])
        return;
    for (uint32_t i = 0; i < m->n; i++) {
        if (!m->live[i] || m->cur.have[i])
            continue;
        if (par == MESH_NONE || tree_in_subtree (m->n, m->parent, m->self, i))
            return; /* still waiting for i */
    }
    if (par == MESH_NONE) {
        count = encode_slot (m, &b, 0);
        if (!b.failed)
            complete (m, m->cur.seq, m->epoch, count, b.buf, b.len);
    } else if (!m->fence_sent_up) {
        count = encode_slot (m, &b, 1);
        if (!b.failed) {
            send_list (m, par, MESH_FENCE_UP, 0, m->cur.seq, count, b.buf, b.len);
            m->fence_sent_up = 1;
        }
    }
    mesh_wbuf_free (&b);
}

void fence_local (struct mesh *m, uint8_t *blob, size_t len, mesh_fence_cb cb, void *arg)
{
    m->fence_cb = cb;
    m->fence_arg = arg;
    m->fence_pending = 1;
    if (m->fenced) {
        free (blob);
        deliver (m, MESH_ECANCEL, NULL);
        return;
    }
    if (!m->cur.have[m->self]) {
        m->cur.blob[m->self] = blob;
        m->cur.len[m->self] = (uint32_t)len;
        m->cur.have[m->self] = 1;
    } else {
        free (blob);
    }
    m->fence_sent_up = 0;
    fence_progress (m);
}

static void merge (struct mesh *m, struct fence_slot *s, const struct mesh_msg *msg)
{
    struct mesh_list it = msg->u.fence.blobs;
    uint32_t member, len;
    const uint8_t *data;

    while (mesh_list_next (&it, 1, &member, NULL, &data, &len))
        if (member < m->n && m->live[member])
            slot_put (s, member, data, len);
}

void fence_up (struct mesh *m, uint32_t from, const struct mesh_msg *msg)
{
    uint32_t seq = msg->u.fence.seq;
    uint32_t par = m->parent[m->self];

    if (msg->hdr.flags & MESH_F_RESULT) {
        if (result_in (m, from, msg) && par != MESH_NONE && m->known_done[par] < seq)
            send_done (m, par, MESH_FENCE_UP, MESH_F_RESULT);
        return;
    }
    if (seq == m->done_seq && seq > 0) {
        send_done (m, from, MESH_FENCE_DOWN, 0);
    } else if (seq == m->cur.seq) {
        merge (m, &m->cur, msg);
        fence_progress (m);
    } else if (seq == m->next.seq) {
        merge (m, &m->next, msg);
    } else {
        log_debug ("mesh %u: fence %u from member %u ignored (at fence %u)",
                   m->self,
                   seq,
                   from,
                   m->cur.seq);
    }
}

void fence_down (struct mesh *m, const struct mesh_msg *msg)
{
    (void)result_in (m, msg->hdr.source, msg);
}

/* After a repair: hand a result up where the parent may lack it, re-send
 * our subtree's blobs, test completion again (we may be the root now). */
void fence_view_changed (struct mesh *m)
{
    uint32_t par = m->parent[m->self];

    if (m->fenced)
        return;
    if (par != MESH_NONE && m->done_seq > 0 && m->known_done[par] < m->done_seq)
        send_done (m, par, MESH_FENCE_UP, MESH_F_RESULT);
    send_done_to_children (m);
    m->fence_sent_up = 0;
    fence_progress (m);
}

void fence_link_up (struct mesh *m, uint32_t member)
{
    if (member == m->parent[m->self])
        fence_view_changed (m);
    else if (m->parent[member] == m->self && m->done_seq > 0 &&
             m->known_done[member] < m->done_seq)
        send_done (m, member, MESH_FENCE_DOWN, 0); /* a newcomer catches up */
}
