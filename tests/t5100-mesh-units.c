/* t5100-mesh-units - the mesh's wire format, authentication and tree
 *
 * proto: every message type round-trips; every malformed input is refused
 * with a reason and never read outside its buffer (every truncation of
 * every message, a byte too many, wrong magic, version, type, flags,
 * oversized lengths, impossible counts, out-of-range members).
 * auth: same secret and job give the same key, a wrong secret, another
 * job, a reflected or replayed proof do not verify; secret files must be
 * 0600.  tree: parents, children, root loss, interior loss, routing, and
 * the invariants over random live sets.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/mesh/auth.h"
#include "exec/mesh/mesh.h"
#include "exec/mesh/proto.h"
#include "exec/mesh/tree.h"
#include "lib/tap.h"

/* --- proto ----------------------------------------------------------- */

static int encode (struct mesh_wbuf *b, int type)
{
    size_t off =
        mesh_msg_begin (b, type, type == MESH_FENCE_UP ? MESH_F_RESULT : 0, 7, 3);
    uint8_t x[32];

    memset (x, 0xab, sizeof (x));
    switch (type) {
        case MESH_HELLO:
            mesh_put_u32 (b, 1);
            mesh_put_u32 (b, 5);
            mesh_put_bytes (b, x, 32);
            break;
        case MESH_CHALLENGE:
            mesh_put_bytes (b, x, 32);
            mesh_put_bytes (b, x, 32);
            break;
        case MESH_AUTH:
            mesh_put_bytes (b, x, 32);
            break;
        case MESH_HEARTBEAT:
            break;
        case MESH_LOST:
            mesh_put_u32 (b, 2);
            mesh_put_u32 (b, 4);
            mesh_put_u8 (b, MESH_CAUSE_TIMEOUT);
            mesh_put_u32 (b, 9);
            mesh_put_u8 (b, MESH_CAUSE_EOF);
            break;
        case MESH_FENCE_UP:
        case MESH_FENCE_DOWN:
            mesh_put_u32 (b, 42);
            mesh_put_u32 (b, 2);
            mesh_put_u32 (b, 0);
            mesh_put_blob (b, "abc", 3);
            mesh_put_u32 (b, 2);
            mesh_put_blob (b, "", 0);
            break;
        case MESH_DMODEX_REQ:
        case MESH_DMODEX_RESP:
            mesh_put_u64 (b, 0x1122334455667788ull);
            mesh_put_u32 (b, 3);
            mesh_put_u32 (b, 4);
            if (type == MESH_DMODEX_RESP)
                mesh_put_u32 (b, (uint32_t)-113);
            mesh_put_blob (b, "req", 3);
            break;
        case MESH_BCAST:
            mesh_put_u32 (b, 3);
            mesh_put_u32 (b, 17);
            mesh_put_u8 (b, MESH_BCAST_NOTIFY);
            mesh_put_blob (b, "event", 5);
            break;
        case MESH_BYE:
            mesh_put_u8 (b, MESH_BYE_YOU_LOST);
            break;
        case MESH_JOINED:
            mesh_put_u32 (b, 2);
            mesh_put_u32 (b, 5);
            mesh_put_blob (b, "10.0.0.7:4242", 13);
            mesh_put_u32 (b, 6);
            mesh_put_blob (b, "", 0);
            break;
        case MESH_ADMIT: {
            const uint8_t slots[3] = {MESH_SLOT_LIVE, MESH_SLOT_LOST, MESH_SLOT_LIVE};
            const char *addrs[3] = {"10.0.0.1:17000", NULL, "10.0.0.3:17001"};
            mesh_admit_payload (b, MESH_ADMIT_OK, 2, 3, 2, 4, slots, addrs, "i", 1);
            break;
        }
    }
    return mesh_msg_end (b, off);
}

static void set_len (uint8_t *p, uint32_t n)
{
    p[8] = (uint8_t)(n >> 24);
    p[9] = (uint8_t)(n >> 16);
    p[10] = (uint8_t)(n >> 8);
    p[11] = (uint8_t)n;
}

static int decode (const uint8_t *p, size_t n, struct mesh_msg *msg, elastic_error_t *err)
{
    /* a private copy of exactly n bytes: ASan sees any read past it */
    uint8_t *copy = malloc (n ? n : 1);
    int rc;

    memcpy (copy, p, n);
    rc = mesh_msg_decode (copy, n, MESH_MAX_PAYLOAD, msg, err);
    free (copy);
    return rc;
}

static void test_roundtrip (void)
{
    for (int t = 1; t <= MESH_TYPE_MAX; t++) {
        struct mesh_wbuf b = {0};
        struct mesh_msg msg;
        elastic_error_t err = {{0}};
        int rc;
        int enc = encode (&b, t);

        ok (enc == 0, "%s: encoded (%zu bytes)", mesh_type_name (t), b.len);
        rc = mesh_msg_decode (b.buf, b.len, MESH_MAX_PAYLOAD, &msg, &err);
        ok (rc == 0 && msg.hdr.type == t && msg.hdr.epoch == 7 && msg.hdr.source == 3,
            "%s: decodes back (%s)",
            mesh_type_name (t),
            rc ? err.text : "ok");
        if (t == MESH_LOST) {
            struct mesh_list it = msg.u.lost;
            uint32_t m1 = 0, m2 = 0;
            uint8_t c1 = 0, c2 = 0;
            int n = mesh_list_next (&it, 0, &m1, &c1, NULL, NULL);
            n += mesh_list_next (&it, 0, &m2, &c2, NULL, NULL);
            n += mesh_list_next (&it, 0, &m2, &c2, NULL, NULL);
            ok (n == 2 && m1 == 4 && c1 == MESH_CAUSE_TIMEOUT && m2 == 9 &&
                    c2 == MESH_CAUSE_EOF,
                "lost: two entries, members and causes intact");
        } else if (t == MESH_FENCE_UP) {
            struct mesh_list it = msg.u.fence.blobs;
            uint32_t m1, m2, l1, l2;
            const uint8_t *d1, *d2;
            int n = mesh_list_next (&it, 1, &m1, NULL, &d1, &l1);
            n += mesh_list_next (&it, 1, &m2, NULL, &d2, &l2);
            ok (n == 2 && msg.u.fence.seq == 42 && msg.hdr.flags == MESH_F_RESULT &&
                    m1 == 0 && l1 == 3 && memcmp (d1, "abc", 3) == 0 && m2 == 2 &&
                    l2 == 0,
                "fence-up: seq, flag, two blobs intact");
        } else if (t == MESH_JOINED) {
            struct mesh_list it = msg.u.joined;
            uint32_t m1, m2, l1, l2;
            const uint8_t *d1, *d2;
            int n = mesh_list_next (&it, 1, &m1, NULL, &d1, &l1);
            n += mesh_list_next (&it, 1, &m2, NULL, &d2, &l2);
            ok (n == 2 && m1 == 5 && l1 == 13 && memcmp (d1, "10.0.0.7:4242", 13) == 0 &&
                    m2 == 6 && l2 == 0,
                "joined: two members, an address and an empty one intact");
        } else if (t == MESH_DMODEX_RESP) {
            ok (msg.u.dmodex.id == 0x1122334455667788ull && msg.u.dmodex.origin == 3 &&
                    msg.u.dmodex.target == 4 && msg.u.dmodex.status == -113 &&
                    msg.u.dmodex.len == 3 && memcmp (msg.u.dmodex.data, "req", 3) == 0,
                "dmodex-response: id, members, status, data intact");
        } else if (t == MESH_BCAST) {
            ok (msg.u.bcast.origin == 3 && msg.u.bcast.seq == 17 &&
                    msg.u.bcast.kind == MESH_BCAST_NOTIFY && msg.u.bcast.len == 5,
                "broadcast: origin, seq, kind, data intact");
        }
        mesh_wbuf_free (&b);
    }
}

/* every strict prefix, with the header's length as it is and with it
 * patched to the prefix, and one byte too many: all refused */
static void test_truncations (void)
{
    for (int t = 1; t <= MESH_TYPE_MAX; t++) {
        struct mesh_wbuf b = {0};
        struct mesh_msg msg;
        int refused = 0, tried = 0;
        uint8_t *big;

        encode (&b, t);
        for (size_t n = 0; n < b.len; n++) {
            elastic_error_t err = {{0}};
            uint8_t *p = malloc (b.len);
            memcpy (p, b.buf, b.len);
            tried++;
            refused += decode (p, n, &msg, &err) < 0 && err.text[0];
            if (n >= MESH_HDR_SIZE) {
                set_len (p, (uint32_t)(n - MESH_HDR_SIZE));
                tried++;
                refused += decode (p, n, &msg, &err) < 0 && err.text[0];
            }
            free (p);
        }
        big = malloc (b.len + 1);
        memcpy (big, b.buf, b.len);
        big[b.len] = 0;
        set_len (big, (uint32_t)(b.len + 1 - MESH_HDR_SIZE));
        {
            elastic_error_t err = {{0}};
            tried++;
            refused += decode (big, b.len + 1, &msg, &err) < 0;
        }
        free (big);
        is_int (refused,
                tried,
                "%s: all %d truncated or padded forms refused",
                mesh_type_name (t),
                tried);
        mesh_wbuf_free (&b);
    }
}

static void
expect_refused (const uint8_t *p, size_t n, const char *what, const char *needle)
{
    struct mesh_msg msg;
    elastic_error_t err = {{0}};
    int rc = decode (p, n, &msg, &err);

    ok (rc < 0 && strstr (err.text, needle), "%s refused: %s", what, err.text);
}

static void test_malformed (void)
{
    struct mesh_wbuf b = {0};
    uint8_t *p;
    struct mesh_hdr h;
    elastic_error_t err = {{0}};

    encode (&b, MESH_BCAST);
    p = malloc (b.len);

    memcpy (p, b.buf, b.len);
    p[0] = 'G';
    expect_refused (p, b.len, "bad magic", "magic");
    memcpy (p, b.buf, b.len);
    p[4] = MESH_VERSION + 1;
    expect_refused (p, b.len, "version 2", "version");
    memcpy (p, b.buf, b.len);
    p[5] = 0;
    expect_refused (p, b.len, "type 0", "type");
    memcpy (p, b.buf, b.len);
    p[5] = MESH_TYPE_MAX + 1;
    expect_refused (p, b.len, "type past the last", "type");
    memcpy (p, b.buf, b.len);
    p[7] = 0x80;
    expect_refused (p, b.len, "unknown flag", "flags");
    memcpy (p, b.buf, b.len);
    p[7] = MESH_F_RESULT;
    expect_refused (p, b.len, "RESULT flag on a broadcast", "flags");
    memcpy (p, b.buf, b.len);
    p[16] = 0xff; /* source */
    expect_refused (p, b.len, "source out of range", "range");
    memcpy (p, b.buf, b.len);
    p[MESH_HDR_SIZE + 8] = MESH_BCAST_KIND_MAX + 1; /* kind */
    expect_refused (p, b.len, "unknown broadcast kind", "kind");
    memcpy (p, b.buf, b.len);
    set_len (p, 0xffffffffu);
    ok (mesh_hdr_decode (p, b.len, MESH_MAX_PAYLOAD, &h, &err) < 0 &&
            strstr (err.text, "at most"),
        "4 GiB payload refused from the header alone: %s",
        err.text);
    memcpy (p, b.buf, b.len);
    ok (mesh_hdr_decode (p, b.len, 8, &h, &err) < 0,
        "a payload over the pre-authentication limit refused: %s",
        err.text);
    free (p);
    mesh_wbuf_free (&b);

    /* lists: a count the bytes cannot hold, a bad cause, a member out of range */
    {
        struct mesh_wbuf l = {0};
        size_t off = mesh_msg_begin (&l, MESH_LOST, 0, 0, 0);
        mesh_put_u32 (&l, 1000000);
        mesh_put_u32 (&l, 1);
        mesh_put_u8 (&l, 1);
        mesh_msg_end (&l, off);
        expect_refused (l.buf, l.len, "a million lost entries in 5 bytes", "entries");
        l.len = 0;
        off = mesh_msg_begin (&l, MESH_LOST, 0, 0, 0);
        mesh_put_u32 (&l, 1);
        mesh_put_u32 (&l, 1);
        mesh_put_u8 (&l, 77);
        mesh_msg_end (&l, off);
        expect_refused (l.buf, l.len, "an unknown cause", "cause");
        l.len = 0;
        off = mesh_msg_begin (&l, MESH_LOST, 0, 0, 0);
        mesh_put_u32 (&l, 1);
        mesh_put_u32 (&l, MESH_MAX_MEMBERS);
        mesh_put_u8 (&l, 1);
        mesh_msg_end (&l, off);
        expect_refused (l.buf, l.len, "a lost member out of range", "range");
        l.len = 0;
        off = mesh_msg_begin (&l, MESH_FENCE_DOWN, 0, 0, 0);
        mesh_put_u32 (&l, 1);
        mesh_put_u32 (&l, 1);
        mesh_put_u32 (&l, 0);
        mesh_put_u32 (&l, 0x7fffffff); /* a blob longer than the message */
        mesh_msg_end (&l, off);
        expect_refused (l.buf, l.len, "a blob longer than its message", "truncated");
        l.len = 0;
        off = mesh_msg_begin (&l, MESH_BYE, 0, 0, 0);
        mesh_put_u8 (&l, 0);
        mesh_msg_end (&l, off);
        expect_refused (l.buf, l.len, "bye with reason 0", "reason");
        mesh_wbuf_free (&l);
    }
    /* rank-failed payloads */
    {
        struct mesh_wbuf r = {0};
        uint32_t rank;
        int32_t status;
        char ns[16];
        mesh_rank_failed_encode (&r, 5, -190, "job.1");
        ok (mesh_rank_failed_decode (
                r.buf, r.len, &rank, &status, ns, sizeof (ns), &err) == 0 &&
                rank == 5 && status == -190 && strcmp (ns, "job.1") == 0,
            "rank-failed payload round-trips");
        ok (mesh_rank_failed_decode (
                r.buf, r.len - 1, &rank, &status, ns, sizeof (ns), &err) < 0,
            "a truncated rank-failed payload refused: %s",
            err.text);
        ok (mesh_rank_failed_decode (r.buf, r.len, &rank, &status, ns, 4, &err) < 0,
            "a namespace longer than the buffer refused: %s",
            err.text);
        mesh_wbuf_free (&r);
    }
}

/* --- auth ------------------------------------------------------------ */

static void test_auth (void)
{
    uint8_t k1[MESH_KEY_SIZE], k2[MESH_KEY_SIZE], k3[MESH_KEY_SIZE], k4[MESH_KEY_SIZE];
    uint8_t nc[MESH_NONCE_SIZE], ns[MESH_NONCE_SIZE], mac[MESH_MAC_SIZE];
    elastic_error_t err = {{0}};
    char path[] = "/tmp/t5100-secret.XXXXXX";
    int fd;

    ok (mesh_auth_key_derive ("job1", "secret", 6, k1, &err) == 0, "key derived");
    mesh_auth_key_derive ("job1", "secret", 6, k2, &err);
    ok (memcmp (k1, k2, MESH_KEY_SIZE) == 0, "same secret and job: same key");
    mesh_auth_key_derive ("job1", "secreT", 6, k3, &err);
    ok (memcmp (k1, k3, MESH_KEY_SIZE) != 0, "another secret: another key");
    mesh_auth_key_derive ("job2", "secret", 6, k4, &err);
    ok (memcmp (k1, k4, MESH_KEY_SIZE) != 0, "another job: another key");
    ok (mesh_auth_key_derive ("job1", "", 0, k4, &err) < 0,
        "empty secret refused: %s",
        err.text);

    mesh_auth_nonce (nc, sizeof (nc));
    mesh_auth_nonce (ns, sizeof (ns));
    ok (memcmp (nc, ns, sizeof (nc)) != 0, "nonces differ");
    mesh_auth_mac (k1, MESH_ROLE_SERVER, nc, ns, 4, 1, 5, mac);
    ok (mesh_auth_verify (k1, MESH_ROLE_SERVER, nc, ns, 4, 1, 5, mac) == 0,
        "server proof verifies");
    ok (mesh_auth_verify (k3, MESH_ROLE_SERVER, nc, ns, 4, 1, 5, mac) < 0,
        "wrong secret: server proof refused");
    ok (mesh_auth_verify (k1, MESH_ROLE_CLIENT, nc, ns, 4, 1, 5, mac) < 0,
        "a server proof reflected as a client proof is refused");
    ok (mesh_auth_verify (k1, MESH_ROLE_SERVER, ns, nc, 4, 1, 5, mac) < 0,
        "nonces swapped (a replay): refused");
    ok (mesh_auth_verify (k1, MESH_ROLE_SERVER, nc, ns, 3, 1, 5, mac) < 0,
        "another client member: refused");
    ok (mesh_auth_verify (k1, MESH_ROLE_SERVER, nc, ns, 4, 1, 6, mac) < 0,
        "another mesh size: refused");

    /* per-message MACs after the handshake */
    {
        uint8_t c2s[MESH_KEY_SIZE], s2c[MESH_KEY_SIZE], c2s2[MESH_KEY_SIZE],
            s2c2[MESH_KEY_SIZE];
        uint8_t msg[40], m2[MESH_MAC_SIZE];
        memset (msg, 7, sizeof (msg));
        mesh_auth_session_keys (k1, nc, ns, c2s, s2c);
        mesh_auth_session_keys (k1, nc, ns, c2s2, s2c2);
        ok (memcmp (c2s, c2s2, MESH_KEY_SIZE) == 0 &&
                memcmp (s2c, s2c2, MESH_KEY_SIZE) == 0 &&
                memcmp (c2s, s2c, MESH_KEY_SIZE) != 0,
            "session keys: the same on both sides, one per direction");
        mesh_auth_session_keys (k1, ns, nc, c2s2, s2c2);
        ok (memcmp (c2s, c2s2, MESH_KEY_SIZE) != 0, "session keys depend on the nonces");
        mesh_auth_msg_mac (c2s, 5, msg, sizeof (msg), m2);
        ok (mesh_auth_msg_verify (c2s, 5, msg, sizeof (msg), m2) == 0,
            "a sealed message verifies");
        ok (mesh_auth_msg_verify (c2s, 4, msg, sizeof (msg), m2) < 0 &&
                mesh_auth_msg_verify (c2s, 6, msg, sizeof (msg), m2) < 0,
            "replayed or reordered (another counter): refused");
        ok (mesh_auth_msg_verify (s2c, 5, msg, sizeof (msg), m2) < 0,
            "reflected back to its sender (the other direction's key): refused");
        msg[20] ^= 1;
        ok (mesh_auth_msg_verify (c2s, 5, msg, sizeof (msg), m2) < 0,
            "one bit altered: refused");
    }

    fd = mkstemp (path);
    if (write (fd, "file-secret\n", 12) != 12)
        diag ("short write");
    close (fd);
    chmod (path, 0644);
    ok (mesh_auth_key_from_file ("job1", path, k2, &err) < 0 && strstr (err.text, "0600"),
        "a 0644 secret file refused: %s",
        err.text);
    chmod (path, 0600);
    ok (mesh_auth_key_from_file ("job1", path, k2, &err) == 0,
        "a 0600 secret file accepted");
    mesh_auth_key_derive ("job1", "file-secret", 11, k3, &err);
    ok (memcmp (k2, k3, MESH_KEY_SIZE) == 0,
        "the file's trailing newline is not part of the secret");
    unsetenv ("ELASTIC_MESH_SECRET");
    setenv ("ELASTIC_MESH_SECRET_FILE", path, 1);
    ok (mesh_auth_key_from_env ("job1", k4, &err) == 0 &&
            memcmp (k4, k2, MESH_KEY_SIZE) == 0,
        "ELASTIC_MESH_SECRET_FILE read");
    unlink (path);
    unsetenv ("ELASTIC_MESH_SECRET_FILE");
    ok (mesh_auth_key_from_env ("job1", k4, &err) < 0 &&
            strstr (err.text, "ELASTIC_MESH_SECRET"),
        "no secret at all: refused: %s",
        err.text);
}

/* --- tree ------------------------------------------------------------ */

static void test_tree (void)
{
    uint8_t live[16];
    uint32_t parent[16], kids[16];
    size_t nk;

    memset (live, 1, sizeof (live));
    tree_parents (7, 2, live, parent);
    ok (parent[0] == MESH_NONE && parent[1] == 0 && parent[2] == 0 && parent[3] == 1 &&
            parent[4] == 1 && parent[5] == 2 && parent[6] == 2,
        "7 members, radix 2: a binary heap");
    nk = tree_children (7, parent, 1, kids, 16);
    ok (nk == 2 && kids[0] == 3 && kids[1] == 4, "children of 1: 3, 4");
    is_int (tree_depth (7, parent), 2, "depth 2");
    is_int (tree_next_hop (7, parent, 0, 4), 1, "0 -> 4 goes through 1");
    is_int (tree_next_hop (7, parent, 3, 6), 1, "3 -> 6 goes up to 1");
    is_int (tree_next_hop (7, parent, 1, 1), MESH_NONE, "no hop to oneself");

    live[1] = 0; /* an interior member */
    tree_parents (7, 2, live, parent);
    ok (parent[3] == 0 && parent[4] == 0 && parent[5] == 2 && parent[1] == MESH_NONE,
        "1 lost: its children 3, 4 hang under its parent 0, nothing else moves");
    is_int (tree_parent (7, 2, live, 4), 0, "tree_parent agrees");

    live[0] = 0; /* the root too */
    tree_parents (7, 2, live, parent);
    is_int (tree_root (7, live), 2, "0 and 1 lost: the root is 2, the lowest live");
    ok (parent[2] == MESH_NONE && parent[3] == 2 && parent[4] == 2 && parent[5] == 2 &&
            parent[6] == 2,
        "orphans 3, 4 hang under the new root 2; 5, 6 keep their parent");
    is_int (tree_next_hop (7, parent, 3, 6), 2, "3 -> 6 through the new root");

    memset (live, 0, sizeof (live));
    live[5] = 1;
    tree_parents (7, 2, live, parent);
    ok (tree_root (7, live) == 5 && parent[5] == MESH_NONE,
        "one member left: it is the root");
    memset (live, 0, sizeof (live));
    ok (tree_root (7, live) == MESH_NONE, "nobody left: no root");

    /* invariants over random live sets: every live non-root member has a
     * live parent with a lower id, and its chain reaches the root */
    srand (5100);
    {
        int good = 1, trials = 2000;
        static uint8_t lv[300];
        static uint32_t par[300];
        for (int t = 0; t < trials && good; t++) {
            uint32_t n = 1 + (uint32_t)(rand () % 300), k = 1 + (uint32_t)(rand () % 9);
            uint32_t root;
            for (uint32_t i = 0; i < n; i++)
                lv[i] = rand () % 4 != 0;
            tree_parents (n, k, lv, par);
            root = tree_root (n, lv);
            for (uint32_t i = 0; i < n && good; i++) {
                uint32_t m = i, steps = 0;
                if (!lv[i]) {
                    good = par[i] == MESH_NONE;
                    continue;
                }
                if (i != root && (par[i] == MESH_NONE || par[i] >= i || !lv[par[i]] ||
                                  par[i] != tree_parent (n, k, lv, i)))
                    good = 0;
                while (m != root && m != MESH_NONE && steps++ < n)
                    m = par[m];
                if (m != root)
                    good = 0;
                if (good && root != MESH_NONE && i != root) {
                    uint32_t hop = tree_next_hop (n, par, root, i);
                    good = hop != MESH_NONE && par[hop] == root &&
                           tree_in_subtree (n, par, hop, i);
                }
            }
            if (!good)
                diag ("trial %d: n %u radix %u", t, n, k);
        }
        ok (good,
            "%d random live sets: parents live, lower, chains reach the root, routes "
            "right",
            trials);
    }
}

/* the partition rule, from the view of one member */
static int minority (const char *live, const char *suspect, const char *left)
{
    uint8_t l[16] = {0}, s[16] = {0}, b[16] = {0};
    uint32_t n = (uint32_t)strlen (live);

    for (uint32_t i = 0; i < n; i++) {
        l[i] = live[i] == '1';
        s[i] = suspect[i] == '1';
        b[i] = left[i] == '1';
    }
    return tree_minority (n, l, s, b);
}

static void test_partition_rule (void)
{
    ok (!minority ("11011", "00100", "00000"), "5 members, one silent: the four go on");
    ok (minority ("00100", "11011", "00000"),
        "the silent one, seeing four silent: minority");
    ok (!minority ("00100", "00000", "00000"),
        "four killed (closed connections): the last goes on");
    ok (!minority ("10000", "01000", "00000"),
        "2 members, 1 silent: member 0 keeps the tie");
    ok (minority ("01000", "10000", "00000"),
        "2 members, 0 silent: member 1 loses the tie");
    ok (!minority ("00100", "10000", "01011"),
        "members that said bye count on this side");
    ok (minority ("11000", "00111", "00000"), "2 of 5 against 3 silent: minority");
    ok (!minority ("00111", "11000", "00000"), "3 of 5 against 2 silent: majority");
    ok (minority ("0011", "1100", "0000"),
        "2 against 2, the lowest on the other side: fence");
}

/* the rendezvous's majority rule: prev, now, gone as strings of 0/1 */
static int quorum (const char *prev, const char *now, const char *gone)
{
    uint8_t p[16] = {0}, w[16] = {0}, g[16] = {0};
    uint32_t n = (uint32_t)strlen (prev);

    for (uint32_t i = 0; i < n; i++) {
        p[i] = prev[i] == '1';
        w[i] = now[i] == '1';
        g[i] = gone[i] == '1';
    }
    return tree_quorum (n, p, w, g);
}

static void test_quorum_rule (void)
{
    ok (quorum ("111", "110", "000"), "quorum: 2 of 3 (one silent) form a group");
    ok (!quorum ("111", "001", "000"), "quorum: 1 of 3 (two silent) does not");
    ok (quorum ("111", "001", "110"),
        "quorum: 1 of 3 whose two others were seen to end does");
    ok (quorum ("1111", "1100", "0000"),
        "quorum: 2 of 4 holding the lowest form a group");
    ok (!quorum ("1111", "0011", "0000"), "quorum: the other 2 of 4 do not");
    ok (quorum ("11111", "00111", "00000") && !quorum ("11111", "11000", "00000"),
        "quorum: 3 of 5 do, the other 2 do not");
    ok (quorum ("11100", "11111", "00000"), "quorum: newcomers join a majority");
    ok (!quorum ("11100", "00111", "00000"),
        "quorum: newcomers do not make a minority of the last group a majority");
    ok (quorum ("000", "100", "000"), "quorum: the first round (no last group) forms");
    {
        /* every split of 6 members (64 of them), with each member gone or
         * not: the two sides never both form a group */
        int both = 0;
        for (int gone = 0; gone < 64; gone++)
            for (int side = 0; side < 64; side++) {
                uint8_t p[6], a[6], b[6], g[6];
                for (int i = 0; i < 6; i++) {
                    p[i] = 1;
                    g[i] = (uint8_t)(gone >> i & 1);
                    a[i] = !g[i] && (side >> i & 1);
                    b[i] = !g[i] && !(side >> i & 1);
                }
                both += tree_quorum (6, p, a, g) && tree_quorum (6, p, b, g) &&
                        (side & ~gone & 63) && (~side & ~gone & 63);
            }
        is_int (both, 0, "quorum: no split of 6 members gives two groups");
    }
}

/* How many of the truncations of message buf (n bytes, its length field
 * fixed to each) decode: none should. */
static size_t truncations_decoded (const uint8_t *buf, size_t n)
{
    struct mesh_msg msg;
    elastic_error_t err = {{0}};
    size_t bad = 0;

    for (size_t k = MESH_HDR_SIZE; k < n; k++) {
        uint8_t *p = malloc (n);
        memcpy (p, buf, n);
        set_len (p, (uint32_t)(k - MESH_HDR_SIZE));
        bad += decode (p, k, &msg, &err) == 0;
        free (p);
    }
    return bad;
}

/* a HELLO that carries a munge credential (MESH_F_CRED) and, port >= 0,
 * the sender's listening port (MESH_F_PORT) */
static size_t hello_msg (
    struct mesh_wbuf *b, unsigned flags, const char *cred, size_t len, long long port)
{
    uint8_t nonce[MESH_NONCE_SIZE];
    size_t off;

    b->len = 0;
    memset (nonce, 7, sizeof (nonce));
    off = mesh_msg_begin (b, MESH_HELLO, flags, 0, 3);
    mesh_put_u32 (b, 1);
    mesh_put_u32 (b, 5);
    mesh_put_bytes (b, nonce, sizeof (nonce));
    if (cred)
        mesh_put_blob (b, cred, len);
    if (port >= 0)
        mesh_put_u32 (b, (uint32_t)port);
    mesh_msg_end (b, off);
    return b->len;
}

static size_t
hello_cred (struct mesh_wbuf *b, unsigned flags, const char *cred, size_t len)
{
    return hello_msg (b, flags, cred, len, -1);
}

/* a HELLO naming the port its sender listens on (candidate ports) */
static void test_hello_port (void)
{
    static const char cred[] = "MUNGE:AwQFAAB1ZXN0:";
    struct mesh_wbuf b = {0};
    struct mesh_msg msg;
    elastic_error_t err = {{0}};
    size_t n = hello_msg (&b, MESH_F_PORT, NULL, 0, 17346), bad = 0;

    ok (decode (b.buf, n, &msg, &err) == 0 && msg.u.hello.port == 17346 &&
            msg.u.hello.cred == NULL && msg.u.hello.target == 1,
        "hello with a port: decodes back (%s)",
        err.text[0] ? err.text : "ok");
    n = hello_msg (&b, MESH_F_CRED | MESH_F_PORT, cred, strlen (cred), 65535);
    ok (decode (b.buf, n, &msg, &err) == 0 && msg.u.hello.port == 65535 &&
            msg.u.hello.cred_len == strlen (cred),
        "hello with a credential and a port: decodes back (%s)",
        err.text[0] ? err.text : "ok");
    bad = truncations_decoded (b.buf, n);
    ok (bad == 0,
        "hello with a credential and a port: each of %zu truncations refused",
        n - MESH_HDR_SIZE);
    n = hello_msg (&b, 0, NULL, 0, -1);
    ok (decode (b.buf, n, &msg, &err) == 0 && msg.u.hello.port == 0,
        "hello without a port (an older member): port 0, decodes (%s)",
        err.text[0] ? err.text : "ok");
    n = hello_msg (&b, MESH_F_PORT, NULL, 0, 0);
    expect_refused (b.buf, n, "listening port 0", "listening port 0");
    n = hello_msg (&b, MESH_F_PORT, NULL, 0, 65536);
    expect_refused (b.buf, n, "listening port 65536", "listening port 65536");
    n = hello_msg (&b, MESH_F_PORT, NULL, 0, -1);
    expect_refused (b.buf, n, "the port flag without a port", "");
    n = hello_msg (&b, 0, NULL, 0, 4242);
    expect_refused (b.buf, n, "a port without the flag", "");
    b.len = 0;
    encode (&b, MESH_HEARTBEAT);
    b.buf[7] = MESH_F_PORT;
    expect_refused (b.buf, b.len, "PORT flag on a heartbeat", "flags");
    mesh_wbuf_free (&b);
}

static void test_hello_cred (void)
{
    static const char cred[] = "MUNGE:AwQFAAB1ZXN0:";
    struct mesh_wbuf b = {0};
    struct mesh_msg msg;
    elastic_error_t err = {{0}};
    size_t n = hello_cred (&b, MESH_F_CRED, cred, strlen (cred)), bad = 0;

    /* decoded in place: msg.u.hello.cred points into the buffer (decode ()
     * frees its copy before the comparison) */
    ok (mesh_msg_decode (b.buf, n, MESH_MAX_PAYLOAD, &msg, &err) == 0 &&
            msg.u.hello.cred_len == strlen (cred) &&
            memcmp (msg.u.hello.cred, cred, strlen (cred)) == 0 &&
            msg.u.hello.target == 1 && msg.u.hello.nmembers == 5,
        "hello with a credential: decodes back (%s)",
        err.text[0] ? err.text : "ok");
    bad = truncations_decoded (b.buf, n);
    ok (bad == 0,
        "hello with a credential: each of %zu truncations refused",
        n - MESH_HDR_SIZE);
    n = hello_cred (&b, MESH_F_CRED, "", 0);
    expect_refused (b.buf, n, "an empty credential", "empty");
    n = hello_cred (&b, 0, cred, strlen (cred));
    expect_refused (b.buf, n, "a credential without the flag", "");
    n = hello_cred (&b, MESH_F_CRED, NULL, 0);
    expect_refused (b.buf, n, "the flag without a credential", "");
    n = hello_cred (&b, MESH_F_RESULT, NULL, 0);
    expect_refused (b.buf, n, "RESULT flag on a hello", "flags");
    b.len = 0;
    encode (&b, MESH_HEARTBEAT);
    b.buf[7] = MESH_F_CRED;
    expect_refused (b.buf, b.len, "CRED flag on a heartbeat", "flags");
    mesh_wbuf_free (&b);
}

int main (void)
{
    if (mesh_auth_init (NULL) < 0)
        bail_out ("libsodium does not initialise");
    test_roundtrip ();
    test_truncations ();
    test_malformed ();
    test_hello_cred ();
    test_hello_port ();
    test_auth ();
    test_tree ();
    test_partition_rule ();
    test_quorum_rule ();
    return done_testing ();
}
