/* fuzz_rdzv - the torchrun-style rendezvous's wire decoder
 * (src/exec/rdzv_proto.c, what src/exec/rdzv_tcp.c does with the bytes a
 * peer sends to --rdzv-endpoint or answers from it)
 *
 * The input is decoded
 *   - as one message by every decoder (HELLO, JOIN, LIST of the node
 *     count its head says and of 3 nodes, ACK of the rank it says, FAIL,
 *     ADMIT of the slot count its head says and of 8 slots),
 *     under the harness's fixed key and nonces, with which the seeds were
 *     made, so that a seed verifies;
 *   - re-signed: its last 32 bytes replaced by the MAC the message it
 *     claims to be would need, so that mutations also reach what follows
 *     the MAC check (the address checks, the LIST's split);
 *   - as the stream a server reads, cut as conn_read cuts it (a JOIN,
 *     then the ACK of the rank and nonce it gave), and as the stream a
 *     client reads (a HELLO, then a LIST, an ADMIT or a FAIL);
 *   - as an address (rdzv_addr_check, jobmap_parse_endpoint).
 * Every decode must end in success or a refusal with a reason; a message
 * that decodes must encode back to the same bytes; the server's reader
 * never asks for more than its buffer (RDZV_JOIN_MAX) holds.
 *
 * FUZZ_RDZV_SEEDS=DIR fuzz_rdzv writes the seed corpus (tests/fuzz/
 * corpus/rdzv) into DIR with the real encoders, and exits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/mesh/auth.h"
#include "exec/rdzv_proto.h"
#include "fuzz.h"

#define NNODES 3 /* the seeds' job */
#define NSLOTS 8 /* its member slots (an ADMIT's) */

static uint8_t kr[RDZV_KEY], ns[RDZV_NONCE], nc[RDZV_NONCE];

static uint32_t get32 (const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* a refusal always says why */
static void refused (int rc, const elastic_error_t *err)
{
    if (rc < 0 && !err->text[0])
        abort ();
}

static void check_hello (const uint8_t *p, size_t len)
{
    elastic_error_t err = {{0}};
    uint8_t n[RDZV_NONCE], out[RDZV_HELLO_SIZE];
    int rc = rdzv_hello_decode (p, len, n, &err);

    refused (rc, &err);
    if (rc == 0) {
        rdzv_hello_encode (n, out);
        if (len != sizeof (out) || memcmp (out, p, len))
            abort ();
    }
}

/* The JOIN to the server whose nonce is ns; 0 with *j. */
static int check_join (const uint8_t *p, size_t len, struct rdzv_join *j)
{
    elastic_error_t err = {{0}};
    uint8_t out[RDZV_JOIN_MAX];
    char host[RDZV_ADDR_MAX + 1];
    int rc = rdzv_join_decode (kr, ns, p, len, j, &err);

    refused (rc, &err);
    if (rc < 0)
        return -1;
    /* an empty address decodes (the server refuses it after its own
     * checks, with rdzv_addr_check) but is never encoded */
    if (j->addr_len > 0 &&
        (rdzv_join_encode (kr, ns, j, out) != len || memcmp (out, p, len)))
        abort ();
    err.text[0] = '\0';
    refused (rdzv_addr_check ("node rank 0", j->addr, j->addr_len, host, &err), &err);
    return 0;
}

static void check_list (const uint8_t *p, size_t len, uint32_t nmax)
{
    elastic_error_t err = {{0}};
    uint8_t head[RDZV_LIST_FIXED], digest[32], mac[RDZV_MAC], *body = NULL;
    char **addrs = NULL;
    size_t size = 0;
    uint32_t nnodes = 0;
    int rc = rdzv_list_decode (kr, nc, p, len, nmax, &nnodes, &addrs, &err);

    refused (rc, &err);
    if (rc < 0)
        return;
    if (nnodes < 1 || nnodes > nmax) /* a job of 1..MAX nodes */
        abort ();
    if (rdzv_list_encode (addrs, nnodes, head, &body, &size, digest, &err) < 0)
        abort ();
    rdzv_list_mac (kr, nc, digest, mac);
    if (RDZV_LIST_FIXED + size + RDZV_MAC != len || memcmp (head, p, RDZV_LIST_FIXED) ||
        memcmp (body, p + RDZV_LIST_FIXED, size) ||
        memcmp (mac, p + RDZV_LIST_FIXED + size, RDZV_MAC))
        abort ();
    free (body);
    rdzv_addrs_free (addrs, nnodes);
}

static void check_admit (const uint8_t *p, size_t len, uint32_t nmax)
{
    elastic_error_t err = {{0}};
    uint8_t head[RDZV_ADMIT_FIXED], mac[RDZV_MAC], *body = NULL;
    struct rdzv_admission a = {0};
    size_t size = 0;
    int rc = rdzv_admit_decode (kr, nc, p, len, nmax, &a, &err);

    refused (rc, &err);
    if (rc < 0)
        return;
    if (a.n < 1 || a.n > nmax || a.slot >= a.n || a.states[a.slot] != RDZV_SLOT_LIVE)
        abort ();
    if (rdzv_admit_encode (kr, nc, &a, head, &body, &size, mac, &err) < 0)
        abort ();
    if (RDZV_ADMIT_FIXED + size + RDZV_MAC != len || memcmp (head, p, RDZV_ADMIT_FIXED) ||
        memcmp (body, p + RDZV_ADMIT_FIXED, size) ||
        memcmp (mac, p + RDZV_ADMIT_FIXED + size, RDZV_MAC))
        abort ();
    free (body);
    rdzv_admission_free (&a);
}

static void check_ack (const uint8_t *p, size_t len, uint32_t rank, const uint8_t *cn)
{
    elastic_error_t err = {{0}};
    uint8_t out[RDZV_ACK_SIZE];
    int rc = rdzv_ack_decode (kr, ns, cn, rank, p, len, &err);

    refused (rc, &err);
    if (rc == 0) {
        rdzv_ack_encode (kr, ns, cn, rank, out);
        if (len != sizeof (out) || memcmp (out, p, len))
            abort ();
    }
}

static void check_fail (const uint8_t *p, size_t len)
{
    elastic_error_t err = {{0}};
    char text[RDZV_FAIL_TEXT + 1], again[RDZV_FAIL_TEXT + 1];
    uint8_t out[RDZV_FAIL_MAX];
    int rc = rdzv_fail_decode (p, len, text, &err);
    size_t n;

    refused (rc, &err);
    if (rc < 0)
        return;
    n = rdzv_fail_encode (text, out);
    if (n != len || rdzv_fail_decode (out, n, again, &err) < 0 || strcmp (text, again))
        abort ();
}

/* The input as one message of each type. */
static void decode_all (const uint8_t *p, size_t len)
{
    elastic_error_t err = {{0}};
    struct rdzv_join j;
    int type;

    refused (rdzv_hdr_decode (p, len, &type, &err), &err);
    check_hello (p, len);
    (void)check_join (p, len, &j);
    check_list (p, len, NNODES);
    if (len >= RDZV_HDR + 4 && get32 (p + RDZV_HDR) != NNODES)
        check_list (p, len, get32 (p + RDZV_HDR));
    check_ack (p, len, len >= RDZV_HDR + 4 ? get32 (p + RDZV_HDR) : 0, nc);
    check_fail (p, len);
    check_admit (p, len, NSLOTS);
    if (len >= RDZV_HDR + 8 && get32 (p + RDZV_HDR + 4) != NSLOTS)
        check_admit (p, len, get32 (p + RDZV_HDR + 4));
}

/* The input with the MAC it claims to need (a copy: p is not changed). */
static void resigned (const uint8_t *p, size_t len)
{
    uint8_t *b, digest[32];
    size_t body;
    int type;

    if (len < RDZV_HDR + RDZV_MAC || rdzv_hdr_decode (p, len, &type, NULL) < 0)
        return;
    if (!(b = malloc (len)))
        abort ();
    memcpy (b, p, len);
    body = len - RDZV_MAC;
    if (type == RDZV_JOIN && body <= RDZV_JOIN_FIXED + RDZV_ADDR_MAX)
        rdzv_join_mac (kr, ns, b, body, b + body);
    else if (type == RDZV_LIST && body >= RDZV_LIST_FIXED) {
        rdzv_list_digest (b, b + RDZV_LIST_FIXED, body - RDZV_LIST_FIXED, digest);
        rdzv_list_mac (kr, nc, digest, b + body);
    } else if (type == RDZV_ADMIT && body >= RDZV_ADMIT_FIXED) {
        rdzv_admit_mac (kr, nc, b, body, b + body);
    } else if (type == RDZV_ACK && len == RDZV_ACK_SIZE)
        rdzv_ack_encode (kr, ns, nc, get32 (b + RDZV_HDR), b);
    decode_all (b, len);
    free (b);
}

/* Cut p[*off..len) as a reader does: the next message of type want, read
 * up to what rdzv_msg_need asks.  Returns its length (at *off; *off moves
 * past it), or 0 when it is refused or the input ends first. */
static size_t next_msg (
    const uint8_t *p, size_t len, size_t *off, int want, uint32_t nnodes, size_t max)
{
    elastic_error_t err = {{0}};
    size_t have = 0, need;

    for (;;) {
        int rc = rdzv_msg_need (p + *off, have, want, nnodes, &need, &err);

        refused (rc, &err);
        if (rc < 0)
            return 0;
        if (need < have || need < RDZV_HDR || need > max)
            abort (); /* need only grows, and fits the reader's buffer */
        if (need == have)
            break;
        if (need > len - *off)
            return 0;
        have = need;
    }
    *off += have;
    return have;
}

/* The server's side: a JOIN, then the ACK of its rank and nonce. */
static void server_stream (const uint8_t *p, size_t len)
{
    struct rdzv_join j;
    size_t off = 0, n;

    if (!(n = next_msg (p, len, &off, RDZV_JOIN, 0, RDZV_JOIN_MAX)) ||
        check_join (p + off - n, n, &j) < 0)
        return;
    if ((n = next_msg (p, len, &off, RDZV_ACK, 0, RDZV_JOIN_MAX)))
        check_ack (p + off - n, n, j.rank, j.nonce);
}

/* The client's side: a HELLO, then a LIST or a FAIL. */
static void client_stream (const uint8_t *p, size_t len)
{
    size_t off = 0, n;
    int type;

    if (!(n = next_msg (p, len, &off, RDZV_HELLO, 0, RDZV_HELLO_SIZE)))
        return;
    check_hello (p, n);
    if (rdzv_hdr_decode (p + off, len - off, &type, NULL) < 0)
        return;
    if (type == RDZV_FAIL && (n = next_msg (p, len, &off, type, 0, RDZV_FAIL_MAX)))
        check_fail (p + off - n, n);
    else if (type == RDZV_LIST && (n = next_msg (p, len, &off, type, NNODES, SIZE_MAX)))
        check_list (p + off - n, n, NNODES);
    else if (type == RDZV_ADMIT && (n = next_msg (p, len, &off, type, NSLOTS, SIZE_MAX)))
        check_admit (p + off - n, n, NSLOTS);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    /* a private copy of exactly size bytes, so ASan sees any overread */
    uint8_t *buf = malloc (size ? size : 1);
    char host[RDZV_ADDR_MAX + 1];
    elastic_error_t err = {{0}};

    if (!buf)
        abort ();
    memcpy (buf, data, size);
    decode_all (buf, size);
    resigned (buf, size);
    server_stream (buf, size);
    client_stream (buf, size);
    refused (rdzv_addr_check ("fuzz", buf, size, host, &err), &err);
    free (buf);
    return 0;
}

/* ---- the seed corpus ------------------------------------------------------ */

static void seed (const char *dir, const char *name, const uint8_t *p, size_t len)
{
    char path[4096];
    FILE *f;

    snprintf (path, sizeof (path), "%s/%s", dir, name);
    if (!(f = fopen (path, "wb")) || fwrite (p, 1, len, f) != len || fclose (f) != 0) {
        perror (path);
        exit (1);
    }
}

static size_t join_of (uint32_t rank, const char *addr, uint8_t *out)
{
    struct rdzv_join j = {
        .rank = rank,
        .nnodes = NNODES,
        .addr = (const uint8_t *)addr,
        .addr_len = strlen (addr),
    };

    memcpy (j.nonce, nc, RDZV_NONCE);
    return rdzv_join_encode (kr, ns, &j, out);
}

static size_t list_of (char *const *addr, uint32_t n, uint8_t *out)
{
    uint8_t digest[32], *body;
    size_t size;

    if (rdzv_list_encode (addr, n, out, &body, &size, digest, NULL) < 0)
        exit (1);
    memcpy (out + RDZV_LIST_FIXED, body, size);
    rdzv_list_mac (kr, nc, digest, out + RDZV_LIST_FIXED + size);
    free (body);
    return RDZV_LIST_FIXED + size + RDZV_MAC;
}

static size_t admit_of (uint32_t slot, uint8_t *out)
{
    static uint8_t states[NSLOTS] = {RDZV_SLOT_LIVE,
                                     RDZV_SLOT_LOST,
                                     RDZV_SLOT_LIVE,
                                     RDZV_SLOT_LIVE,
                                     RDZV_SLOT_ABSENT,
                                     RDZV_SLOT_ABSENT,
                                     RDZV_SLOT_ABSENT,
                                     RDZV_SLOT_ABSENT};
    static char *addrs[NSLOTS] = {
        "10.0.0.1:29500", NULL, "10.0.0.3:29500", "[fe80::1%eth0]:7"};
    struct rdzv_admission a = {.slot = slot,
                               .n = NSLOTS,
                               .base = NNODES,
                               .epoch = 2,
                               .states = states,
                               .addrs = addrs};
    uint8_t *body;
    size_t size;

    if (rdzv_admit_encode (kr, nc, &a, out, &body, &size, out + 1024, NULL) < 0)
        exit (1);
    memcpy (out + RDZV_ADMIT_FIXED, body, size);
    memmove (out + RDZV_ADMIT_FIXED + size, out + 1024, RDZV_MAC);
    free (body);
    return RDZV_ADMIT_FIXED + size + RDZV_MAC;
}

static void write_seeds (const char *dir)
{
    static char *three[] = {"10.0.0.1:29500", "10.0.0.2:29500", "[fe80::1%eth0]:29502"};
    static char *one[] = {"node-01.cluster:1"};
    uint8_t m[2048], s[4096];
    size_t n, k;

    rdzv_hello_encode (ns, m);
    seed (dir, "hello", m, RDZV_HELLO_SIZE);
    n = join_of (1, "10.0.0.2:29500", m);
    seed (dir, "join", m, n);
    seed (dir, "join-truncated", m, n - 10);
    m[3] = 2;
    seed (dir, "join-version-2", m, n);
    m[3] = RDZV_VERSION;
    m[RDZV_JOIN_FIXED - 2] = 0xff;
    m[RDZV_JOIN_FIXED - 1] = 0xff;
    seed (dir, "join-oversized", m, RDZV_JOIN_FIXED);
    n = join_of (2, "[fe80::1%eth0]:29502", m);
    seed (dir, "join-v6", m, n);
    m[n - 1] ^= 1;
    seed (dir, "join-bad-mac", m, n);
    n = list_of (three, 3, m);
    seed (dir, "list", m, n);
    seed (dir, "list-truncated", m, n - 1);
    m[RDZV_HDR + 7] = 2; /* size 2: cannot hold 3 addresses */
    seed (dir, "list-bad-size", m, RDZV_LIST_FIXED);
    n = list_of (one, 1, m);
    seed (dir, "list-1", m, n);
    rdzv_ack_encode (kr, ns, nc, 1, m);
    seed (dir, "ack", m, RDZV_ACK_SIZE);
    n = rdzv_fail_encode ("2 of 3 nodes joined within 60 s (missing node ranks: 2)", m);
    seed (dir, "fail", m, n);
    /* the server's stream: JOIN | ACK; the client's: HELLO | LIST, HELLO | FAIL */
    k = join_of (1, "10.0.0.2:29500", s);
    rdzv_ack_encode (kr, ns, nc, 1, s + k);
    seed (dir, "stream-server", s, k + RDZV_ACK_SIZE);
    rdzv_hello_encode (ns, s);
    k = list_of (three, 3, s + RDZV_HELLO_SIZE);
    seed (dir, "stream-client", s, RDZV_HELLO_SIZE + k);
    k = rdzv_fail_encode ("node rank 4 says --nnodes 5; the endpoint's server has 3",
                          s + RDZV_HELLO_SIZE);
    seed (dir, "stream-client-fail", s, RDZV_HELLO_SIZE + k);
    n = admit_of (3, m);
    seed (dir, "admit", m, n);
    seed (dir, "admit-truncated", m, n - 1);
    m[RDZV_HDR + 3] = 1; /* slot 1: lost, and below base */
    seed (dir, "admit-bad-slot", m, n);
    rdzv_hello_encode (ns, s);
    k = admit_of (3, s + RDZV_HELLO_SIZE);
    seed (dir, "stream-client-admit", s, RDZV_HELLO_SIZE + k);
    memset (m, 0x5a, 64); /* t5112's garbage */
    seed (dir, "garbage", m, 64);
    seed (dir, "address", (const uint8_t *)"[::1]:29400", 11);
}

int LLVMFuzzerInitialize (int *argc, char ***argv)
{
    const char *dir = getenv ("FUZZ_RDZV_SEEDS");
    uint8_t key[RDZV_KEY];

    (void)argc;
    (void)argv;
    if (mesh_auth_init (NULL) < 0)
        abort ();
    for (int i = 0; i < RDZV_KEY; i++)
        key[i] = (uint8_t)i;
    rdzv_key (key, kr);
    memset (ns, 0xa5, sizeof (ns));
    memset (nc, 0xc3, sizeof (nc));
    if (dir) {
        write_seeds (dir);
        exit (0);
    }
    return 0;
}
