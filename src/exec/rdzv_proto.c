/* rdzv_proto.c - the rendezvous's messages, encoded and decoded
 * (rdzv_proto.h says what is on the wire; rdzv_tcp.c moves it)
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "common/bytes.h"
#include "jobmap.h"
#include "mesh/auth.h"
#include "rdzv_proto.h"

_Static_assert(crypto_auth_BYTES == RDZV_MAC, "MAC size");
_Static_assert(MESH_KEY_SIZE == RDZV_KEY, "key size");
_Static_assert(RDZV_NODES_MAX == JOBMAP_MAX_NODES, "node count");
_Static_assert(RDZV_ADDR_MAX <= 0xffff, "address length fits a u16");

/* ---- wire helpers ------------------------------------------------------- */

static void put_hdr (uint8_t *p, int type)
{
    p[0] = 'E';
    p[1] = 'R';
    p[2] = 'Z';
    p[3] = RDZV_VERSION;
    p[4] = (uint8_t)type;
}

static const char *type_name (int type)
{
    static const char *names[] = {NULL, "HELLO", "JOIN", "LIST", "ACK", "FAIL", "ADMIT"};

    return type >= RDZV_HELLO && type <= RDZV_ADMIT ? names[type] : "message";
}

int rdzv_hdr_decode (const uint8_t *p, size_t len, int *type, elastic_error_t *err)
{
    if (len < RDZV_HDR)
        return errprintf (err,
                          "a rendezvous message of %zu bytes (shorter than its "
                          "%d-byte header)",
                          len,
                          RDZV_HDR);
    if (p[0] != 'E' || p[1] != 'R' || p[2] != 'Z')
        return errprintf (err, "not a rendezvous message (no \"ERZ\" header)");
    if (p[3] != RDZV_VERSION)
        return errprintf (
            err, "rendezvous version %u (this member speaks %d)", p[3], RDZV_VERSION);
    *type = p[4];
    return 0;
}

int rdzv_msg_need (const uint8_t *p,
                   size_t len,
                   int want,
                   uint32_t nnodes,
                   size_t *need,
                   elastic_error_t *err)
{
    int type;

    if (len < RDZV_HDR) {
        *need = RDZV_HDR;
        return 0;
    }
    if (rdzv_hdr_decode (p, len, &type, err) < 0)
        return -1;
    if (want == 0 || type != want)
        return errprintf (err,
                          "a rendezvous %s (type %d) where %s was expected",
                          type_name (type),
                          type,
                          want ? type_name (want) : "no message");
    switch (type) {
        case RDZV_HELLO:
            *need = RDZV_HELLO_SIZE;
            return 0;
        case RDZV_ACK:
            *need = RDZV_ACK_SIZE;
            return 0;
        case RDZV_JOIN: {
            uint32_t alen;

            if (len < RDZV_JOIN_FIXED) {
                *need = RDZV_JOIN_FIXED;
                return 0;
            }
            if ((alen = be_get16 (p + RDZV_JOIN_FIXED - 2)) > RDZV_ADDR_MAX) {
                errprintf (err,
                           "a JOIN with an address of %u bytes (at most %d)",
                           alen,
                           RDZV_ADDR_MAX);
                return -2;
            }
            *need = RDZV_JOIN_FIXED + alen + RDZV_MAC;
            return 0;
        }
        case RDZV_LIST: {
            uint32_t n, size;

            if (len < RDZV_LIST_FIXED) {
                *need = RDZV_LIST_FIXED;
                return 0;
            }
            n = be_get32 (p + RDZV_HDR);
            size = be_get32 (p + RDZV_HDR + 4);
            if (n > nnodes) {
                errprintf (err, "the server's list has %u nodes (at most %u)", n, nnodes);
                return -2;
            }
            /* each entry is 2 + 1..RDZV_ADDR_MAX bytes (64-bit: no overflow) */
            if (n < 1 || n > RDZV_NODES_MAX || size < 3 * (uint64_t)n ||
                size > (uint64_t)n * (2 + RDZV_ADDR_MAX)) {
                errprintf (err, "the server's list has a bad size %u", size);
                return -2;
            }
            *need = RDZV_LIST_FIXED + (size_t)size + RDZV_MAC;
            return 0;
        }
        case RDZV_ADMIT: {
            uint32_t n, size;

            if (len < RDZV_ADMIT_FIXED) {
                *need = RDZV_ADMIT_FIXED;
                return 0;
            }
            n = be_get32 (p + RDZV_HDR + 4);
            size = be_get32 (p + RDZV_HDR + 16);
            if (n < 1 || n > nnodes || n > RDZV_NODES_MAX) {
                errprintf (err, "the server's admission has %u slots (1..%u)", n, nnodes);
                return -2;
            }
            /* each entry is 3 + 0..RDZV_ADDR_MAX bytes (64-bit: no overflow) */
            if (size < 3 * (uint64_t)n || size > (uint64_t)n * (3 + RDZV_ADDR_MAX)) {
                errprintf (err, "the server's admission has a bad size %u", size);
                return -2;
            }
            *need = RDZV_ADMIT_FIXED + (size_t)size + RDZV_MAC;
            return 0;
        }
        case RDZV_FAIL: {
            uint32_t tlen;

            if (len < RDZV_HDR + 2) {
                *need = RDZV_HDR + 2;
                return 0;
            }
            if ((tlen = be_get16 (p + RDZV_HDR)) > RDZV_FAIL_TEXT) {
                errprintf (
                    err, "a FAIL text of %u bytes (at most %d)", tlen, RDZV_FAIL_TEXT);
                return -2;
            }
            *need = RDZV_HDR + 2 + tlen;
            return 0;
        }
    }
    return errprintf (err, "a rendezvous message of unknown type %d", type);
}

/* p[0..len) is exactly one message of type want: 0, or -1 with err (its
 * header or type, a refused length, cut short, bytes left over). */
static int
exact (const uint8_t *p, size_t len, int want, uint32_t nnodes, elastic_error_t *err)
{
    size_t have = RDZV_HDR, need;
    int type;

    if (rdzv_hdr_decode (p, len, &type, err) < 0)
        return -1;
    /* as a reader would: need grows with what is there, then stays */
    for (;;) {
        if (rdzv_msg_need (p, have, want, nnodes, &need, err) < 0)
            return -1;
        if (need <= have)
            break;
        if (need > len)
            return errprintf (err,
                              "a %s of %zu bytes is cut short (expected %zu)",
                              type_name (want),
                              len,
                              need);
        have = need;
    }
    if (len != have)
        return errprintf (err,
                          "a %s of %zu bytes has %zu bytes too many",
                          type_name (want),
                          len,
                          len - have);
    return 0;
}

/* ---- keys and MACs ------------------------------------------------------ */

void rdzv_key (const uint8_t key[RDZV_KEY], uint8_t kr[RDZV_KEY])
{
    static const char label[] = "elastic-rdzv-v1";

    crypto_generichash (
        kr, RDZV_KEY, (const uint8_t *)label, sizeof (label), key, RDZV_KEY);
}

void rdzv_join_mac (const uint8_t kr[RDZV_KEY],
                    const uint8_t ns[RDZV_NONCE],
                    const uint8_t *msg,
                    size_t len,
                    uint8_t mac[RDZV_MAC])
{
    uint8_t t[RDZV_NONCE + RDZV_JOIN_MAX];

    if (len > RDZV_JOIN_MAX)
        len = RDZV_JOIN_MAX; /* never: callers pass a JOIN up to its mac */
    memcpy (t, ns, RDZV_NONCE);
    memcpy (t + RDZV_NONCE, msg, len);
    mesh_auth_msg_mac (kr, RDZV_JOIN, t, RDZV_NONCE + len, mac);
}

static void digest_of (const uint8_t *head,
                       size_t hlen,
                       const uint8_t *body,
                       size_t size,
                       uint8_t digest[32])
{
    crypto_generichash_state st;

    crypto_generichash_init (&st, NULL, 0, 32);
    crypto_generichash_update (&st, head, hlen);
    crypto_generichash_update (&st, body, size);
    crypto_generichash_final (&st, digest, 32);
}

void rdzv_list_digest (const uint8_t *head,
                       const uint8_t *body,
                       size_t size,
                       uint8_t digest[32])
{
    digest_of (head, RDZV_LIST_FIXED, body, size, digest);
}

/* A LIST's or an ADMIT's MAC (type: the counter): nc | digest. */
static void answer_mac (const uint8_t kr[RDZV_KEY],
                        int type,
                        const uint8_t nc[RDZV_NONCE],
                        const uint8_t digest[32],
                        uint8_t mac[RDZV_MAC])
{
    uint8_t t[RDZV_NONCE + 32];

    memcpy (t, nc, RDZV_NONCE);
    memcpy (t + RDZV_NONCE, digest, 32);
    mesh_auth_msg_mac (kr, (uint64_t)type, t, sizeof (t), mac);
}

void rdzv_list_mac (const uint8_t kr[RDZV_KEY],
                    const uint8_t nc[RDZV_NONCE],
                    const uint8_t digest[32],
                    uint8_t mac[RDZV_MAC])
{
    answer_mac (kr, RDZV_LIST, nc, digest, mac);
}

/* ACK's MAC: ns | nc | rank. */
static void ack_mac (const uint8_t kr[RDZV_KEY],
                     const uint8_t *ns,
                     const uint8_t *nc,
                     uint32_t rank,
                     uint8_t mac[RDZV_MAC])
{
    uint8_t t[2 * RDZV_NONCE + 4];

    memcpy (t, ns, RDZV_NONCE);
    memcpy (t + RDZV_NONCE, nc, RDZV_NONCE);
    be_put32 (t + 2 * RDZV_NONCE, rank);
    mesh_auth_msg_mac (kr, RDZV_ACK, t, sizeof (t), mac);
}

/* ---- addresses ---------------------------------------------------------- */

int rdzv_addr_check (
    const char *what, const uint8_t *s, size_t len, char *host, elastic_error_t *err)
{
    char buf[RDZV_ADDR_MAX + 1];
    int port;

    if (len == 0 || len > RDZV_ADDR_MAX)
        return errprintf (
            err, "%s: address of %zu bytes (expected 1..%d)", what, len, RDZV_ADDR_MAX);
    for (size_t i = 0; i < len; i++)
        if (s[i] <= ' ' || s[i] > '~')
            return errprintf (
                err, "%s: address has a byte 0x%02x (expected HOST:PORT)", what, s[i]);
    memcpy (buf, s, len);
    buf[len] = '\0';
    if (jobmap_parse_endpoint (what, buf, 0, host, RDZV_ADDR_MAX + 1, &port, err) < 0)
        return -1;
    if (port <= 0)
        return errprintf (err, "%s '%s' has no port (expected HOST:PORT)", what, buf);
    return 0;
}

void rdzv_addrs_free (char **addrs, uint32_t n)
{
    for (uint32_t i = 0; addrs && i < n; i++)
        free (addrs[i]);
    free (addrs);
}

/* ---- HELLO -------------------------------------------------------------- */

void rdzv_hello_encode (const uint8_t ns[RDZV_NONCE], uint8_t out[RDZV_HELLO_SIZE])
{
    put_hdr (out, RDZV_HELLO);
    memcpy (out + RDZV_HDR, ns, RDZV_NONCE);
}

int rdzv_hello_decode (const uint8_t *p,
                       size_t len,
                       uint8_t ns[RDZV_NONCE],
                       elastic_error_t *err)
{
    if (exact (p, len, RDZV_HELLO, 0, err) < 0)
        return -1;
    memcpy (ns, p + RDZV_HDR, RDZV_NONCE);
    return 0;
}

/* ---- JOIN --------------------------------------------------------------- */

size_t rdzv_join_encode (const uint8_t kr[RDZV_KEY],
                         const uint8_t ns[RDZV_NONCE],
                         const struct rdzv_join *j,
                         uint8_t out[RDZV_JOIN_MAX])
{
    size_t len = RDZV_JOIN_FIXED + j->addr_len;

    if (j->addr_len == 0 || j->addr_len > RDZV_ADDR_MAX)
        return 0;
    put_hdr (out, RDZV_JOIN);
    be_put32 (out + RDZV_HDR, j->rank);
    be_put32 (out + RDZV_HDR + 4, j->nnodes);
    memcpy (out + RDZV_HDR + 8, j->nonce, RDZV_NONCE);
    be_put16 (out + RDZV_JOIN_FIXED - 2, (uint32_t)j->addr_len);
    memcpy (out + RDZV_JOIN_FIXED, j->addr, j->addr_len);
    rdzv_join_mac (kr, ns, out, len, out + len);
    return len + RDZV_MAC;
}

int rdzv_join_decode (const uint8_t kr[RDZV_KEY],
                      const uint8_t ns[RDZV_NONCE],
                      const uint8_t *p,
                      size_t len,
                      struct rdzv_join *j,
                      elastic_error_t *err)
{
    uint8_t want[RDZV_MAC];
    size_t alen;
    int rc;

    if (exact (p, len, RDZV_JOIN, 0, err) < 0)
        return -1;
    alen = len - RDZV_JOIN_FIXED - RDZV_MAC;
    rdzv_join_mac (kr, ns, p, RDZV_JOIN_FIXED + alen, want);
    rc = sodium_memcmp (want, p + RDZV_JOIN_FIXED + alen, RDZV_MAC);
    sodium_memzero (want, sizeof (want));
    if (rc != 0 && be_get32 (p + RDZV_HDR) == RDZV_RANK_ANY)
        return errprintf (err,
                          "a node without --node-rank: the JOIN's MAC does not verify "
                          "(not the same mesh secret?)");
    if (rc != 0)
        return errprintf (err,
                          "node rank %u: the JOIN's MAC does not verify (not the "
                          "same mesh secret?)",
                          be_get32 (p + RDZV_HDR));
    j->rank = be_get32 (p + RDZV_HDR);
    j->nnodes = be_get32 (p + RDZV_HDR + 4);
    memcpy (j->nonce, p + RDZV_HDR + 8, RDZV_NONCE);
    j->addr = p + RDZV_JOIN_FIXED;
    j->addr_len = alen;
    return 0;
}

/* ---- LIST --------------------------------------------------------------- */

int rdzv_list_encode (char *const *addr,
                      uint32_t n,
                      uint8_t head[RDZV_LIST_FIXED],
                      uint8_t **body,
                      size_t *size,
                      uint8_t digest[32],
                      elastic_error_t *err)
{
    size_t total = 0, off = 0;
    uint8_t *b;

    if (n < 1 || n > RDZV_NODES_MAX)
        return errprintf (err, "a list of %u nodes (1..%d)", n, RDZV_NODES_MAX);
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strlen (addr[i]);

        if (len == 0 || len > RDZV_ADDR_MAX)
            return errprintf (err,
                              "node rank %u: address of %zu bytes (expected 1..%d)",
                              i,
                              len,
                              RDZV_ADDR_MAX);
        total += 2 + len; /* at most 65536 * 302: no overflow, fits a u32 */
    }
    if (!(b = malloc (total)))
        return errprintf (err, "out of memory building the list");
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strlen (addr[i]);

        be_put16 (b + off, (uint32_t)len);
        memcpy (b + off + 2, addr[i], len);
        off += 2 + len;
    }
    put_hdr (head, RDZV_LIST);
    be_put32 (head + RDZV_HDR, n);
    be_put32 (head + RDZV_HDR + 4, (uint32_t)total);
    rdzv_list_digest (head, b, total, digest);
    *body = b;
    *size = total;
    return 0;
}

int rdzv_list_decode (const uint8_t kr[RDZV_KEY],
                      const uint8_t nc[RDZV_NONCE],
                      const uint8_t *p,
                      size_t len,
                      uint32_t nnodes,
                      uint32_t *n,
                      char ***addrs,
                      elastic_error_t *err)
{
    const uint8_t *body = p + RDZV_LIST_FIXED;
    uint8_t digest[32], want[RDZV_MAC];
    char **l = NULL;
    size_t size, off = 0;
    uint32_t count;
    int rc;

    if (exact (p, len, RDZV_LIST, nnodes, err) < 0)
        return -1;
    count = be_get32 (p + RDZV_HDR); /* 1..nnodes: exact checked it */
    size = len - RDZV_LIST_FIXED - RDZV_MAC;
    rdzv_list_digest (p, body, size, digest);
    rdzv_list_mac (kr, nc, digest, want);
    rc = sodium_memcmp (want, body + size, RDZV_MAC);
    sodium_memzero (want, sizeof (want));
    if (rc != 0)
        return errprintf (err,
                          "the list's MAC does not verify (not the same mesh secret?)");
    if (!(l = calloc (count, sizeof (*l))))
        return errprintf (err, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        char host[RDZV_ADDR_MAX + 1], what[32];
        size_t alen = off + 2 <= size ? be_get16 (body + off) : 0;

        if (off + 2 + alen > size) {
            errprintf (err, "the server's list is cut short at node rank %u", i);
            goto error;
        }
        snprintf (what, sizeof (what), "node rank %u", i);
        if (rdzv_addr_check (what, body + off + 2, alen, host, err) < 0)
            goto error;
        if (!(l[i] = strndup ((const char *)body + off + 2, alen))) {
            errprintf (err, "out of memory");
            goto error;
        }
        off += 2 + alen;
    }
    if (off != size) {
        errprintf (err, "the server's list has %zu bytes too many", size - off);
        goto error;
    }
    *n = count;
    *addrs = l;
    return 0;
error:
    rdzv_addrs_free (l, count);
    return -1;
}

/* ---- ACK ---------------------------------------------------------------- */

void rdzv_ack_encode (const uint8_t kr[RDZV_KEY],
                      const uint8_t ns[RDZV_NONCE],
                      const uint8_t nc[RDZV_NONCE],
                      uint32_t rank,
                      uint8_t out[RDZV_ACK_SIZE])
{
    put_hdr (out, RDZV_ACK);
    be_put32 (out + RDZV_HDR, rank);
    ack_mac (kr, ns, nc, rank, out + RDZV_HDR + 4);
}

int rdzv_ack_decode (const uint8_t kr[RDZV_KEY],
                     const uint8_t ns[RDZV_NONCE],
                     const uint8_t nc[RDZV_NONCE],
                     uint32_t rank,
                     const uint8_t *p,
                     size_t len,
                     elastic_error_t *err)
{
    uint8_t want[RDZV_MAC];
    int rc;

    if (exact (p, len, RDZV_ACK, 0, err) < 0)
        return -1;
    if (be_get32 (p + RDZV_HDR) != rank)
        return errprintf (
            err, "an ACK of node rank %u (expected %u)", be_get32 (p + RDZV_HDR), rank);
    ack_mac (kr, ns, nc, rank, want);
    rc = sodium_memcmp (want, p + RDZV_HDR + 4, RDZV_MAC);
    sodium_memzero (want, sizeof (want));
    if (rc != 0)
        return errprintf (err, "node rank %u: the ACK's MAC does not verify", rank);
    return 0;
}

/* ---- ADMIT -------------------------------------------------------------- */

int rdzv_admit_encode (const uint8_t kr[RDZV_KEY],
                       const uint8_t nc[RDZV_NONCE],
                       const struct rdzv_admission *a,
                       uint8_t head[RDZV_ADMIT_FIXED],
                       uint8_t **body,
                       size_t *size,
                       uint8_t mac[RDZV_MAC],
                       elastic_error_t *err)
{
    size_t total = 0, off = 0;
    uint8_t digest[32], *b;

    if (a->n < 1 || a->n > RDZV_NODES_MAX || a->slot >= a->n || a->base < 1 ||
        a->base > a->n || a->slot < a->base)
        return errprintf (err,
                          "an admission to slot %u of %u (members at the start: %u)",
                          a->slot,
                          a->n,
                          a->base);
    for (uint32_t i = 0; i < a->n; i++) {
        size_t len =
            a->states[i] == RDZV_SLOT_LIVE && a->addrs[i] ? strlen (a->addrs[i]) : 0;

        if (a->states[i] > RDZV_SLOT_LOST ||
            (a->states[i] == RDZV_SLOT_LIVE) != (len > 0) || len > RDZV_ADDR_MAX)
            return errprintf (err,
                              "an admission's slot %u: state %u, address of %zu bytes",
                              i,
                              a->states[i],
                              len);
        total += 3 + len; /* at most 65536 * 303: fits a u32 */
    }
    if (!(b = malloc (total)))
        return errprintf (err, "out of memory building an admission");
    for (uint32_t i = 0; i < a->n; i++) {
        size_t len = a->states[i] == RDZV_SLOT_LIVE ? strlen (a->addrs[i]) : 0;

        b[off] = a->states[i];
        be_put16 (b + off + 1, (uint32_t)len);
        memcpy (b + off + 3, len ? a->addrs[i] : "", len);
        off += 3 + len;
    }
    put_hdr (head, RDZV_ADMIT);
    be_put32 (head + RDZV_HDR, a->slot);
    be_put32 (head + RDZV_HDR + 4, a->n);
    be_put32 (head + RDZV_HDR + 8, a->base);
    be_put32 (head + RDZV_HDR + 12, a->epoch);
    be_put32 (head + RDZV_HDR + 16, (uint32_t)total);
    digest_of (head, RDZV_ADMIT_FIXED, b, total, digest);
    answer_mac (kr, RDZV_ADMIT, nc, digest, mac);
    *body = b;
    *size = total;
    return 0;
}

void rdzv_admit_mac (const uint8_t kr[RDZV_KEY],
                     const uint8_t nc[RDZV_NONCE],
                     const uint8_t *msg,
                     size_t len,
                     uint8_t mac[RDZV_MAC])
{
    uint8_t digest[32];

    digest_of (
        msg, RDZV_ADMIT_FIXED, msg + RDZV_ADMIT_FIXED, len - RDZV_ADMIT_FIXED, digest);
    answer_mac (kr, RDZV_ADMIT, nc, digest, mac);
}

void rdzv_admission_free (struct rdzv_admission *a)
{
    if (!a)
        return;
    rdzv_addrs_free (a->addrs, a->n);
    free (a->states);
    a->addrs = NULL;
    a->states = NULL;
}

int rdzv_admit_decode (const uint8_t kr[RDZV_KEY],
                       const uint8_t nc[RDZV_NONCE],
                       const uint8_t *p,
                       size_t len,
                       uint32_t nslots,
                       struct rdzv_admission *a,
                       elastic_error_t *err)
{
    const uint8_t *body = p + RDZV_ADMIT_FIXED;
    uint8_t digest[32], want[RDZV_MAC];
    struct rdzv_admission r = {0};
    size_t size, off = 0;
    int rc;

    if (exact (p, len, RDZV_ADMIT, nslots, err) < 0)
        return -1;
    r.slot = be_get32 (p + RDZV_HDR);
    r.n = be_get32 (p + RDZV_HDR + 4); /* 1..nslots: exact checked it */
    r.base = be_get32 (p + RDZV_HDR + 8);
    r.epoch = be_get32 (p + RDZV_HDR + 12);
    size = len - RDZV_ADMIT_FIXED - RDZV_MAC;
    digest_of (p, RDZV_ADMIT_FIXED, body, size, digest);
    answer_mac (kr, RDZV_ADMIT, nc, digest, want);
    rc = sodium_memcmp (want, body + size, RDZV_MAC);
    sodium_memzero (want, sizeof (want));
    if (rc != 0)
        return errprintf (
            err, "the admission's MAC does not verify (not the same mesh secret?)");
    if (r.slot >= r.n || r.base < 1 || r.base > r.n || r.slot < r.base)
        return errprintf (err,
                          "the server's admission gives slot %u of %u (members at the "
                          "start: %u)",
                          r.slot,
                          r.n,
                          r.base);
    if (!(r.states = calloc (r.n, 1)) || !(r.addrs = calloc (r.n, sizeof (char *)))) {
        rdzv_admission_free (&r);
        return errprintf (err, "out of memory");
    }
    for (uint32_t i = 0; i < r.n; i++) {
        char host[RDZV_ADDR_MAX + 1], what[32];
        size_t alen = off + 3 <= size ? be_get16 (body + off + 1) : 0;
        uint8_t st = off + 3 <= size ? body[off] : 0xff;

        if (off + 3 + alen > size) {
            errprintf (err, "the server's admission is cut short at slot %u", i);
            goto error;
        }
        if (st > RDZV_SLOT_LOST || (st == RDZV_SLOT_LIVE) != (alen > 0) ||
            (st == RDZV_SLOT_ABSENT && i < r.base)) {
            errprintf (err,
                       "the server's admission: slot %u has state %u and an address "
                       "of %zu bytes",
                       i,
                       st,
                       alen);
            goto error;
        }
        r.states[i] = st;
        snprintf (what, sizeof (what), "slot %u", i);
        if (alen && rdzv_addr_check (what, body + off + 3, alen, host, err) < 0)
            goto error;
        if (alen && !(r.addrs[i] = strndup ((const char *)body + off + 3, alen))) {
            errprintf (err, "out of memory");
            goto error;
        }
        off += 3 + alen;
    }
    if (off != size) {
        errprintf (err, "the server's admission has %zu bytes too many", size - off);
        goto error;
    }
    if (r.states[r.slot] != RDZV_SLOT_LIVE) {
        errprintf (
            err, "the server's admission: this member's slot %u is not live", r.slot);
        goto error;
    }
    *a = r;
    return 0;
error:
    rdzv_admission_free (&r);
    return -1;
}

/* ---- FAIL --------------------------------------------------------------- */

size_t rdzv_fail_encode (const char *text, uint8_t out[RDZV_FAIL_MAX])
{
    size_t len = strlen (text);

    if (len > RDZV_FAIL_TEXT)
        len = RDZV_FAIL_TEXT;
    put_hdr (out, RDZV_FAIL);
    be_put16 (out + RDZV_HDR, (uint32_t)len);
    memcpy (out + RDZV_HDR + 2, text, len);
    return RDZV_HDR + 2 + len;
}

int rdzv_fail_decode (const uint8_t *p,
                      size_t len,
                      char text[RDZV_FAIL_TEXT + 1],
                      elastic_error_t *err)
{
    size_t tlen;

    if (exact (p, len, RDZV_FAIL, 0, err) < 0)
        return -1;
    tlen = len - RDZV_HDR - 2;
    for (size_t i = 0; i < tlen; i++) {
        uint8_t c = p[RDZV_HDR + 2 + i];

        text[i] = c < ' ' || c > '~' ? '?' : (char)c;
    }
    text[tlen] = '\0';
    return 0;
}
