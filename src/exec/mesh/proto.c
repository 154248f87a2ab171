/* proto.c - the mesh's wire format (see proto.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* --- writing --------------------------------------------------------- */

static int reserve (struct mesh_wbuf *b, size_t n)
{
    size_t cap;
    uint8_t *p;

    if (b->failed)
        return -1;
    if (n <= b->cap - b->len)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > ((size_t)1 << 40)) {
            b->failed = 1;
            return -1;
        }
        cap *= 2;
    }
    if (!(p = realloc (b->buf, cap))) {
        b->failed = 1;
        return -1;
    }
    b->buf = p;
    b->cap = cap;
    return 0;
}

void mesh_put_bytes (struct mesh_wbuf *b, const void *p, size_t n)
{
    if (n == 0 || reserve (b, n) < 0)
        return;
    memcpy (b->buf + b->len, p, n);
    b->len += n;
}

void mesh_put_u8 (struct mesh_wbuf *b, uint8_t v)
{
    mesh_put_bytes (b, &v, 1);
}

void mesh_put_u16 (struct mesh_wbuf *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    mesh_put_bytes (b, x, 2);
}

void mesh_put_u32 (struct mesh_wbuf *b, uint32_t v)
{
    uint8_t x[4] = {
        (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    mesh_put_bytes (b, x, 4);
}

void mesh_put_u64 (struct mesh_wbuf *b, uint64_t v)
{
    mesh_put_u32 (b, (uint32_t)(v >> 32));
    mesh_put_u32 (b, (uint32_t)v);
}

void mesh_put_blob (struct mesh_wbuf *b, const void *p, size_t n)
{
    if (n > UINT32_MAX) {
        b->failed = 1;
        return;
    }
    mesh_put_u32 (b, (uint32_t)n);
    mesh_put_bytes (b, p, n);
}

size_t mesh_msg_begin (
    struct mesh_wbuf *b, int type, unsigned flags, uint32_t epoch, uint32_t source)
{
    size_t off = b->len;

    mesh_put_u32 (b, MESH_MAGIC);
    mesh_put_u8 (b, MESH_VERSION);
    mesh_put_u8 (b, (uint8_t)type);
    mesh_put_u16 (b, (uint16_t)flags);
    mesh_put_u32 (b, 0); /* length, filled by mesh_msg_end */
    mesh_put_u32 (b, epoch);
    mesh_put_u32 (b, source);
    return off;
}

int mesh_msg_end (struct mesh_wbuf *b, size_t off)
{
    size_t n;

    if (b->failed || b->len < off + MESH_HDR_SIZE)
        return -1;
    n = b->len - off - MESH_HDR_SIZE;
    if (n > MESH_MAX_PAYLOAD) {
        b->len = off;
        return -1;
    }
    b->buf[off + 8] = (uint8_t)(n >> 24);
    b->buf[off + 9] = (uint8_t)(n >> 16);
    b->buf[off + 10] = (uint8_t)(n >> 8);
    b->buf[off + 11] = (uint8_t)n;
    return 0;
}

void mesh_wbuf_consume (struct mesh_wbuf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove (b->buf, b->buf + n, b->len - n);
    b->len -= n;
}

void mesh_wbuf_free (struct mesh_wbuf *b)
{
    if (!b)
        return;
    free (b->buf);
    memset (b, 0, sizeof (*b));
}

/* --- reading --------------------------------------------------------- */

struct rbuf {
    const uint8_t *p;
    size_t len, off;
    int short_read;
};

static const uint8_t *get (struct rbuf *r, size_t n)
{
    const uint8_t *p;

    if (r->short_read || n > r->len - r->off) {
        r->short_read = 1;
        return NULL;
    }
    p = r->p + r->off;
    r->off += n;
    return p;
}

static uint32_t be32 (const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint8_t get_u8 (struct rbuf *r)
{
    const uint8_t *p = get (r, 1);
    return p ? p[0] : 0;
}

static uint32_t get_u32 (struct rbuf *r)
{
    const uint8_t *p = get (r, 4);
    return p ? be32 (p) : 0;
}

static uint64_t get_u64 (struct rbuf *r)
{
    uint64_t hi = get_u32 (r);
    return hi << 32 | get_u32 (r);
}

static void get_copy (struct rbuf *r, void *dst, size_t n)
{
    const uint8_t *p = get (r, n);

    if (p)
        memcpy (dst, p, n);
    else
        memset (dst, 0, n);
}

/* u32 length + bytes */
static const uint8_t *get_blob (struct rbuf *r, uint32_t *len)
{
    *len = get_u32 (r);
    return get (r, *len);
}

static const char *type_names[] = {
    "none",
    "hello",
    "challenge",
    "auth",
    "heartbeat",
    "lost",
    "fence-up",
    "fence-down",
    "dmodex-request",
    "dmodex-response",
    "broadcast",
    "bye",
    "joined",
    "admit",
};

const char *mesh_type_name (int type)
{
    if (type < 1 || type > MESH_TYPE_MAX)
        return "unknown";
    return type_names[type];
}

int mesh_hdr_decode (const uint8_t *buf,
                     size_t len,
                     uint32_t max_payload,
                     struct mesh_hdr *hdr,
                     elastic_error_t *err)
{
    uint32_t magic;

    if (len < MESH_HDR_SIZE)
        return errprintf (
            err, "short header: %zu bytes (expected %d)", len, MESH_HDR_SIZE);
    magic = be32 (buf);
    if (magic != MESH_MAGIC)
        return errprintf (err, "bad magic 0x%08x (not a mesh peer)", magic);
    hdr->version = buf[4];
    hdr->type = buf[5];
    hdr->flags = (uint16_t)(buf[6] << 8 | buf[7]);
    hdr->length = be32 (buf + 8);
    hdr->epoch = be32 (buf + 12);
    hdr->source = be32 (buf + 16);
    if (hdr->version != MESH_VERSION)
        return errprintf (err,
                          "protocol version %u (this member speaks %d)",
                          hdr->version,
                          MESH_VERSION);
    if (hdr->type < 1 || hdr->type > MESH_TYPE_MAX)
        return errprintf (err, "unknown message type %u", hdr->type);
    if (hdr->flags & ~MESH_F_ALL)
        return errprintf (
            err, "unknown flags 0x%x in %s", hdr->flags, mesh_type_name (hdr->type));
    if (hdr->flags & ~(hdr->type == MESH_FENCE_UP ? MESH_F_RESULT
                       : hdr->type == MESH_HELLO ? MESH_F_CRED | MESH_F_PORT | MESH_F_JOIN
                                                 : 0u))
        return errprintf (
            err, "flags 0x%x on %s", hdr->flags, mesh_type_name (hdr->type));
    if (hdr->length > max_payload || hdr->length > MESH_MAX_PAYLOAD)
        return errprintf (err,
                          "%s payload of %u bytes (at most %u accepted)",
                          mesh_type_name (hdr->type),
                          hdr->length,
                          max_payload < MESH_MAX_PAYLOAD ? max_payload
                                                         : MESH_MAX_PAYLOAD);
    if (hdr->source >= MESH_MAX_MEMBERS)
        return errprintf (err, "source member %u out of range", hdr->source);
    return 0;
}

/* Walk a list of count entries, each u32 member then u8 cause (blobs 0) or
 * a u32-length blob (blobs 1), checking every bound. */
static int decode_list (struct rbuf *r,
                        int blobs,
                        struct mesh_list *list,
                        const char *what,
                        elastic_error_t *err)
{
    size_t start;
    uint32_t n = get_u32 (r);

    if (r->short_read)
        return errprintf (err, "%s: truncated count", what);
    /* each entry is at least 5 (cause) or 8 (blob) bytes */
    if (n > (r->len - r->off) / (blobs ? 8 : 5))
        return errprintf (err, "%s: %u entries in %zu bytes", what, n, r->len - r->off);
    start = r->off;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t m = get_u32 (r), blen;

        if (blobs) {
            get_blob (r, &blen);
        } else {
            uint8_t c = get_u8 (r);
            if (!r->short_read && (c < 1 || c > MESH_CAUSE_MAX))
                return errprintf (err, "%s: entry %u: unknown cause %u", what, i, c);
        }
        if (r->short_read)
            return errprintf (err, "%s: entry %u of %u truncated", what, i, n);
        if (m >= MESH_MAX_MEMBERS)
            return errprintf (err, "%s: entry %u: member %u out of range", what, i, m);
    }
    list->p = r->p + start;
    list->len = r->off - start;
    list->count = n;
    return 0;
}

/* MESH_ADMIT: a status; when admitted, the newcomer's slot, the slots'
 * states (one byte each, the newcomer's live), the live members'
 * addresses and the owner's blob. */
static int decode_admit (struct rbuf *r, struct mesh_msg *m, elastic_error_t *err)
{
    uint32_t nstates;

    m->u.admit.status = get_u32 (r);
    if (r->short_read || m->u.admit.status != MESH_ADMIT_OK) {
        if (!r->short_read && m->u.admit.status > MESH_ADMIT_STATUS_MAX)
            return errprintf (err, "admit: unknown status %u", m->u.admit.status);
        return 0;
    }
    m->u.admit.slot = get_u32 (r);
    m->u.admit.n = get_u32 (r);
    m->u.admit.base = get_u32 (r);
    m->u.admit.epoch = get_u32 (r);
    m->u.admit.slots = get_blob (r, &nstates);
    if (r->short_read)
        return 0;
    if (m->u.admit.n < 1 || m->u.admit.n > MESH_MAX_MEMBERS ||
        m->u.admit.slot >= m->u.admit.n || m->u.admit.base > m->u.admit.n ||
        nstates != m->u.admit.n)
        return errprintf (err,
                          "admit: slot %u of %u (base %u, %u states)",
                          m->u.admit.slot,
                          m->u.admit.n,
                          m->u.admit.base,
                          nstates);
    for (uint32_t i = 0; i < nstates; i++)
        if (m->u.admit.slots[i] > 2)
            return errprintf (
                err, "admit: slot %u: unknown state %u", i, m->u.admit.slots[i]);
    if (m->u.admit.slots[m->u.admit.slot] != 0)
        return errprintf (
            err, "admit: the newcomer's slot %u is not live", m->u.admit.slot);
    if (decode_list (r, 1, &m->u.admit.addrs, "admit", err) < 0)
        return -1;
    {
        struct mesh_list it = m->u.admit.addrs;
        uint32_t member, len;
        const uint8_t *d;
        while (mesh_list_next (&it, 1, &member, NULL, &d, &len))
            if (member >= m->u.admit.n)
                return errprintf (
                    err, "admit: an address for member %u of %u", member, m->u.admit.n);
    }
    m->u.admit.info = get_blob (r, &m->u.admit.info_len);
    return 0;
}

static int decode_payload (struct rbuf *r, struct mesh_msg *m, elastic_error_t *err)
{
    const char *what = mesh_type_name (m->hdr.type);

    switch (m->hdr.type) {
        case MESH_HELLO:
            m->u.hello.target = get_u32 (r);
            m->u.hello.nmembers = get_u32 (r);
            get_copy (r, m->u.hello.nonce, MESH_NONCE_SIZE);
            m->u.hello.cred = NULL;
            m->u.hello.cred_len = 0;
            if (m->hdr.flags & MESH_F_CRED) {
                m->u.hello.cred = get_blob (r, &m->u.hello.cred_len);
                if (!r->short_read && m->u.hello.cred_len == 0)
                    return errprintf (err, "hello: an empty credential");
            }
            m->u.hello.port = 0;
            if (m->hdr.flags & MESH_F_PORT) {
                m->u.hello.port = get_u32 (r);
                if (!r->short_read && (m->u.hello.port == 0 || m->u.hello.port > 65535))
                    return errprintf (err,
                                      "hello: listening port %u (expected 1-65535)",
                                      m->u.hello.port);
            }
            if (!r->short_read && (m->hdr.flags & MESH_F_JOIN) &&
                (!(m->hdr.flags & MESH_F_PORT) || m->hdr.source != 0 ||
                 m->u.hello.nmembers != 0))
                return errprintf (err,
                                  "hello: a newcomer's hello needs its port, source 0 "
                                  "and size 0 (got source %u, size %u)",
                                  m->hdr.source,
                                  m->u.hello.nmembers);
            break;
        case MESH_CHALLENGE:
            get_copy (r, m->u.challenge.nonce, MESH_NONCE_SIZE);
            get_copy (r, m->u.challenge.mac, MESH_MAC_SIZE);
            break;
        case MESH_AUTH:
            get_copy (r, m->u.auth.mac, MESH_MAC_SIZE);
            break;
        case MESH_HEARTBEAT:
            break;
        case MESH_LOST:
            if (decode_list (r, 0, &m->u.lost, what, err) < 0)
                return -1;
            break;
        case MESH_JOINED:
            if (decode_list (r, 1, &m->u.joined, what, err) < 0)
                return -1;
            break;
        case MESH_FENCE_UP:
        case MESH_FENCE_DOWN:
            m->u.fence.seq = get_u32 (r);
            if (r->short_read)
                break;
            if (decode_list (r, 1, &m->u.fence.blobs, what, err) < 0)
                return -1;
            break;
        case MESH_DMODEX_REQ:
        case MESH_DMODEX_RESP:
            m->u.dmodex.id = get_u64 (r);
            m->u.dmodex.origin = get_u32 (r);
            m->u.dmodex.target = get_u32 (r);
            m->u.dmodex.status = 0;
            if (m->hdr.type == MESH_DMODEX_RESP)
                m->u.dmodex.status = (int32_t)get_u32 (r);
            m->u.dmodex.data = get_blob (r, &m->u.dmodex.len);
            if (!r->short_read && (m->u.dmodex.origin >= MESH_MAX_MEMBERS ||
                                   m->u.dmodex.target >= MESH_MAX_MEMBERS))
                return errprintf (err, "%s: member out of range", what);
            break;
        case MESH_BCAST:
            m->u.bcast.origin = get_u32 (r);
            m->u.bcast.seq = get_u32 (r);
            m->u.bcast.kind = get_u8 (r);
            m->u.bcast.data = get_blob (r, &m->u.bcast.len);
            if (r->short_read)
                break;
            if (m->u.bcast.origin >= MESH_MAX_MEMBERS)
                return errprintf (err, "%s: origin out of range", what);
            if (m->u.bcast.kind < 1 || m->u.bcast.kind > MESH_BCAST_KIND_MAX)
                return errprintf (err, "%s: unknown kind %u", what, m->u.bcast.kind);
            break;
        case MESH_ADMIT:
            if (decode_admit (r, m, err) < 0)
                return -1;
            break;
        case MESH_BYE:
            m->u.bye.reason = get_u8 (r);
            if (!r->short_read &&
                (m->u.bye.reason < 1 || m->u.bye.reason > MESH_BYE_REASON_MAX))
                return errprintf (err, "%s: unknown reason %u", what, m->u.bye.reason);
            break;
    }
    if (r->short_read)
        return errprintf (err, "%s: truncated payload (%zu bytes)", what, r->len);
    if (r->off != r->len)
        return errprintf (err, "%s: %zu bytes left over", what, r->len - r->off);
    return 0;
}

int mesh_msg_decode (const uint8_t *buf,
                     size_t len,
                     uint32_t max_payload,
                     struct mesh_msg *msg,
                     elastic_error_t *err)
{
    struct rbuf r;

    memset (msg, 0, sizeof (*msg));
    if (mesh_hdr_decode (buf, len, max_payload, &msg->hdr, err) < 0)
        return -1;
    if (len - MESH_HDR_SIZE != msg->hdr.length)
        return errprintf (err,
                          "%s: %zu payload bytes, header says %u",
                          mesh_type_name (msg->hdr.type),
                          len - MESH_HDR_SIZE,
                          msg->hdr.length);
    r.p = buf + MESH_HDR_SIZE;
    r.len = msg->hdr.length;
    r.off = 0;
    r.short_read = 0;
    return decode_payload (&r, msg, err);
}

int mesh_list_next (struct mesh_list *it,
                    int blobs,
                    uint32_t *member,
                    uint8_t *cause,
                    const uint8_t **data,
                    uint32_t *len)
{
    struct rbuf r = {it->p, it->len, 0, 0};

    if (it->count == 0)
        return 0;
    *member = get_u32 (&r);
    if (blobs) {
        const uint8_t *d = get_blob (&r, len);
        if (data)
            *data = d;
    } else {
        uint8_t c = get_u8 (&r);
        if (cause)
            *cause = c;
    }
    if (r.short_read) /* not a validated list */
        return 0;
    it->p += r.off;
    it->len -= r.off;
    it->count--;
    return 1;
}

int mesh_rank_failed_encode (struct mesh_wbuf *b,
                             uint32_t rank,
                             int32_t status,
                             const char *nspace)
{
    mesh_put_u32 (b, rank);
    mesh_put_u32 (b, (uint32_t)status);
    mesh_put_blob (b, nspace ? nspace : "", nspace ? strlen (nspace) : 0);
    return b->failed ? -1 : 0;
}

int mesh_rank_failed_decode (const uint8_t *p,
                             size_t len,
                             uint32_t *rank,
                             int32_t *status,
                             char *ns,
                             size_t nssize,
                             elastic_error_t *err)
{
    struct rbuf r = {p, len, 0, 0};
    const uint8_t *s;
    uint32_t slen;

    *rank = get_u32 (&r);
    *status = (int32_t)get_u32 (&r);
    s = get_blob (&r, &slen);
    if (r.short_read)
        return errprintf (err, "rank-failed: truncated (%zu bytes)", len);
    if (r.off != len)
        return errprintf (err, "rank-failed: %zu bytes left over", len - r.off);
    if (slen >= nssize || memchr (s, '\0', slen))
        return errprintf (err, "rank-failed: bad namespace (%u bytes)", slen);
    memcpy (ns, s, slen);
    ns[slen] = '\0';
    return 0;
}

void mesh_admit_payload (struct mesh_wbuf *b,
                         uint32_t status,
                         uint32_t slot,
                         uint32_t n,
                         uint32_t base,
                         uint32_t epoch,
                         const uint8_t *slots,
                         const char *const *addrs,
                         const void *info,
                         size_t info_len)
{
    uint32_t count = 0;

    mesh_put_u32 (b, status);
    if (status != MESH_ADMIT_OK)
        return;
    mesh_put_u32 (b, slot);
    mesh_put_u32 (b, n);
    mesh_put_u32 (b, base);
    mesh_put_u32 (b, epoch);
    mesh_put_blob (b, slots, n);
    for (uint32_t i = 0; i < n; i++)
        count += addrs && addrs[i] ? 1 : 0;
    mesh_put_u32 (b, count);
    for (uint32_t i = 0; i < n; i++) {
        if (!addrs || !addrs[i])
            continue;
        mesh_put_u32 (b, i);
        mesh_put_blob (b, addrs[i], strlen (addrs[i]));
    }
    mesh_put_blob (b, info, info_len);
}

const char *mesh_admit_status_text (uint32_t status)
{
    switch (status) {
        case MESH_ADMIT_OK:
            return "admitted";
        case MESH_ADMIT_FULL:
            return "no room: as many members are live as the job takes";
        case MESH_ADMIT_SPENT:
            return "no room: the job has taken in all the members it can over its life";
        case MESH_ADMIT_NOJOIN:
            return "this job's mesh takes no members after its start";
        case MESH_ADMIT_STOPPING:
            return "the member is stopping (the job is ending, or it was cut off)";
        default:
            return "the member could not admit it (a bad address, or out of memory)";
    }
}
