/* rdzv_proto.h - the wire format of the torchrun-style rendezvous
 *
 * rdzv_tcp.c's messages, encoded and decoded apart from its sockets (so
 * that tests/fuzz/fuzz_rdzv.c and t5112 reach them with plain buffers).
 *
 * Version 1; integers big-endian; every message starts with the 3 bytes
 * "ERZ", the version byte and a type byte:
 *   HELLO   S->C  nonce_s[32]
 *   JOIN    C->S  rank u32 | nnodes u32 | nonce_c[32] | len u16 | addr[len]
 *                 | mac[32]       (len 1..RDZV_ADDR_MAX, "addr:port";
 *                 rank RDZV_RANK_ANY: no --node-rank, the server places
 *                 it; nnodes: --nnodes N, or MIN:MAX's MAX)
 *   LIST    S->C  n u32 | size u32 | size bytes: n times (len u16 |
 *                 addr[len]), in the job's node order | mac[32]
 *                 (n 1..nnodes: a job may start with fewer than MAX)
 *   ACK     C->S  index u32 | mac[32]  (the client's place in the LIST,
 *                 or its slot in an ADMIT)
 *   FAIL    S->C  len u16 | text[len]  (why; the server closes after it)
 *   ADMIT   S->C  slot u32 | n u32 | base u32 | epoch u32 | size u32 |
 *                 size bytes: n times (state u8 | len u16 | addr[len]) |
 *                 mac[32]         (a JOIN after the start, admitted into
 *                 the running job's mesh: the client's slot, the mesh's
 *                 n slots, their states RDZV_SLOT_*, a live slot's
 *                 address (len 1..RDZV_ADDR_MAX; 0 for the others); base:
 *                 the members at the start; epoch: the mesh's)
 * The MACs (libsodium's HMAC-SHA-512-256, mesh/auth.c's mesh_auth_msg_mac
 * with the message type as its counter) are under a rendezvous key
 * derived from the mesh key (keyed BLAKE2b, label "elastic-rdzv-v1"): a
 * JOIN's covers the server's fresh nonce and the JOIN; a LIST's (an
 * ADMIT's) covers the client's fresh nonce and a BLAKE2b digest of the
 * LIST (ADMIT); an ACK's both
 * nonces and the rank.  A replayed JOIN, LIST or ACK does not verify on
 * another connection.  FAIL is not authenticated: it only ends the
 * exchange with the server's reason, which a stranger that can close the
 * connection could do anyway.
 *
 * Reading a message from a stream: rdzv_msg_need says how many bytes the
 * message needs in all, as far as the bytes so far tell (read up to that
 * and ask again until it is what is there), or refuses it; then the
 * type's decoder checks the whole message (its exact length, its MAC) and
 * returns what it says.  Every refusal is -1 (or -2, see rdzv_msg_need)
 * with one line in err; nothing is read outside the buffer given.
 */
#ifndef ELASTIC_EXEC_RDZV_PROTO_H
#define ELASTIC_EXEC_RDZV_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define RDZV_VERSION   1
#define RDZV_ADDR_MAX  300         /* longest "addr:port" ("[v6%scope]:65535") */
#define RDZV_NODES_MAX 65536       /* the most nodes a LIST may name (JOBMAP_MAX_NODES) */
#define RDZV_RANK_ANY  0xffffffffu /* a JOIN without --node-rank */

#define RDZV_KEY         32
#define RDZV_NONCE       32
#define RDZV_MAC         32
#define RDZV_HDR         5                                   /* "ERZ" | version | type */
#define RDZV_HELLO_SIZE  (RDZV_HDR + RDZV_NONCE)             /* 37 */
#define RDZV_JOIN_FIXED  (RDZV_HDR + 4 + 4 + RDZV_NONCE + 2) /* 47, then addr and mac */
#define RDZV_JOIN_MAX    (RDZV_JOIN_FIXED + RDZV_ADDR_MAX + RDZV_MAC)
#define RDZV_LIST_FIXED  (RDZV_HDR + 4 + 4)        /* 13, then size bytes and mac */
#define RDZV_ACK_SIZE    (RDZV_HDR + 4 + RDZV_MAC) /* 41 */
#define RDZV_FAIL_TEXT   255                       /* longest FAIL text */
#define RDZV_FAIL_MAX    (RDZV_HDR + 2 + RDZV_FAIL_TEXT)
#define RDZV_ADMIT_FIXED (RDZV_HDR + 5 * 4) /* 25, then size bytes and mac */

/* a slot's state in an ADMIT (mesh.h's MESH_SLOT_*) */
enum { RDZV_SLOT_LIVE = 0, RDZV_SLOT_ABSENT = 1, RDZV_SLOT_LOST = 2 };

enum {
    RDZV_HELLO = 1,
    RDZV_JOIN = 2,
    RDZV_LIST = 3,
    RDZV_ACK = 4,
    RDZV_FAIL = 5,
    RDZV_ADMIT = 6,
};

/* What an ADMIT says (decoded: malloc'ed; rdzv_admission_free). */
struct rdzv_admission {
    uint32_t slot, n, base, epoch;
    uint8_t *states; /* [n] RDZV_SLOT_* */
    char **addrs;    /* [n] a live slot's "addr:port", NULL for the others */
};

/* What a JOIN says.  Decoded, addr points into the message (addr_len
 * bytes, not NUL-terminated, not yet checked: rdzv_addr_check). */
struct rdzv_join {
    uint32_t rank, nnodes;
    uint8_t nonce[RDZV_NONCE]; /* the client's */
    const uint8_t *addr;
    size_t addr_len;
};

/* The rendezvous key kr from the mesh key (so that no MAC of this
 * protocol is ever one of the mesh's).  Never fails. */
void rdzv_key (const uint8_t key[RDZV_KEY], uint8_t kr[RDZV_KEY]);

/* The header at p[0..len): 0 with *type (any byte), or -1 with err when
 * it is shorter than RDZV_HDR, not "ERZ" or of another version. */
int rdzv_hdr_decode (const uint8_t *p, size_t len, int *type, elastic_error_t *err);

/* How many bytes the message that starts with p[0..len) needs in all, when
 * it must be of type want (0: none is expected, so any is refused once
 * its header is in): 0 with *need (at least RDZV_HDR; more than len: read
 * up to it, then ask again).  nnodes: the most nodes a LIST (slots an
 * ADMIT) may name.
 * Returns -1 with err when the bytes are not a message of type want of
 * this version, -2 with err when they are but its length is refused (a
 * JOIN's address longer than RDZV_ADDR_MAX, a LIST of more than nnodes
 * nodes or a size that cannot hold its addresses, a FAIL text longer than
 * RDZV_FAIL_TEXT): the server answers such a JOIN with a FAIL. */
int rdzv_msg_need (const uint8_t *p,
                   size_t len,
                   int want,
                   uint32_t nnodes,
                   size_t *need,
                   elastic_error_t *err);

/* 0 when s (len bytes, not NUL-terminated) is an address a member may
 * give, "HOST:PORT" or "[ADDR]:PORT" (printable, 1..RDZV_ADDR_MAX bytes,
 * a port 1..65535); host (RDZV_ADDR_MAX + 1 bytes) gets the host.  -1
 * with err (starting with what) otherwise. */
int rdzv_addr_check (
    const char *what, const uint8_t *s, size_t len, char *host, elastic_error_t *err);

/* HELLO: out gets RDZV_HELLO_SIZE bytes.  Decode: 0 with the server's
 * nonce ns, or -1 with err (length, header, type). */
void rdzv_hello_encode (const uint8_t ns[RDZV_NONCE], uint8_t out[RDZV_HELLO_SIZE]);
int rdzv_hello_decode (const uint8_t *p,
                       size_t len,
                       uint8_t ns[RDZV_NONCE],
                       elastic_error_t *err);

/* JOIN j to the server whose HELLO nonce is ns, MAC'ed under kr: out
 * (RDZV_JOIN_MAX bytes) gets it.  Returns its length, or 0 when j's
 * address is empty or longer than RDZV_ADDR_MAX. */
size_t rdzv_join_encode (const uint8_t kr[RDZV_KEY],
                         const uint8_t ns[RDZV_NONCE],
                         const struct rdzv_join *j,
                         uint8_t out[RDZV_JOIN_MAX]);

/* The JOIN p[0..len) on the connection whose HELLO nonce is ns: 0 with
 * *j, or -1 with err: not a JOIN of this version, a length that is not
 * the one its address length gives, an address longer than RDZV_ADDR_MAX
 * ("a JOIN with an address of N bytes (at most 300)"), a MAC that does
 * not verify under kr ("node rank R: the JOIN's MAC does not verify (not
 * the same mesh secret?)", R as the JOIN says).  The address itself is
 * the caller's to check (rdzv_addr_check), after its own checks. */
int rdzv_join_decode (const uint8_t kr[RDZV_KEY],
                      const uint8_t ns[RDZV_NONCE],
                      const uint8_t *p,
                      size_t len,
                      struct rdzv_join *j,
                      elastic_error_t *err);

/* The JOIN's MAC: over ns | msg[0..len) (len <= RDZV_JOIN_FIXED +
 * RDZV_ADDR_MAX: the JOIN up to its mac). */
void rdzv_join_mac (const uint8_t kr[RDZV_KEY],
                    const uint8_t ns[RDZV_NONCE],
                    const uint8_t *msg,
                    size_t len,
                    uint8_t mac[RDZV_MAC]);

/* The LIST of addr[0..n-1] (n 1..RDZV_NODES_MAX, each address
 * 1..RDZV_ADDR_MAX bytes): head (RDZV_LIST_FIXED bytes), *body (malloc'ed,
 * *size bytes) and digest (what each connection's MAC covers, with
 * rdzv_list_mac).  On the wire: head | body | mac.  Returns 0, or -1 with
 * err. */
int rdzv_list_encode (char *const *addr,
                      uint32_t n,
                      uint8_t head[RDZV_LIST_FIXED],
                      uint8_t **body,
                      size_t *size,
                      uint8_t digest[32],
                      elastic_error_t *err);

/* The BLAKE2b digest of a LIST: head (RDZV_LIST_FIXED bytes) | body. */
void rdzv_list_digest (const uint8_t *head,
                       const uint8_t *body,
                       size_t size,
                       uint8_t digest[32]);

/* The LIST's MAC to the client whose JOIN nonce is nc. */
void rdzv_list_mac (const uint8_t kr[RDZV_KEY],
                    const uint8_t nc[RDZV_NONCE],
                    const uint8_t digest[32],
                    uint8_t mac[RDZV_MAC]);

/* The LIST p[0..len) to the client whose JOIN nonce is nc, of a job of
 * at most nnodes nodes: 0 with *n (1..nnodes) and *addrs (*n malloc'ed
 * NUL-terminated addresses in the job's node order, each passed
 * rdzv_addr_check; rdzv_addrs_free), or -1 with err: header, length, node
 * count, size, MAC (checked before the body is read), an address cut
 * short or refused, bytes left over. */
int rdzv_list_decode (const uint8_t kr[RDZV_KEY],
                      const uint8_t nc[RDZV_NONCE],
                      const uint8_t *p,
                      size_t len,
                      uint32_t nnodes,
                      uint32_t *n,
                      char ***addrs,
                      elastic_error_t *err);

/* Free n addresses and their array (NULL-safe). */
void rdzv_addrs_free (char **addrs, uint32_t n);

/* ACK of index (the client's place in the LIST), from the client with
 * nonce nc to the server with nonce ns:
 * out gets RDZV_ACK_SIZE bytes.  Decode: 0 when p[0..len) is exactly that
 * ACK (the rank and the MAC), else -1 with err. */
void rdzv_ack_encode (const uint8_t kr[RDZV_KEY],
                      const uint8_t ns[RDZV_NONCE],
                      const uint8_t nc[RDZV_NONCE],
                      uint32_t rank,
                      uint8_t out[RDZV_ACK_SIZE]);
int rdzv_ack_decode (const uint8_t kr[RDZV_KEY],
                     const uint8_t ns[RDZV_NONCE],
                     const uint8_t nc[RDZV_NONCE],
                     uint32_t rank,
                     const uint8_t *p,
                     size_t len,
                     elastic_error_t *err);

/* ADMIT a: head (RDZV_ADMIT_FIXED bytes), *body (malloc'ed, *size bytes)
 * and its MAC to the client whose JOIN nonce is nc (mac).  On the wire:
 * head | body | mac.  Returns 0, or -1 with err (a slot out of range, a
 * live slot without an address, an address too long). */
int rdzv_admit_encode (const uint8_t kr[RDZV_KEY],
                       const uint8_t nc[RDZV_NONCE],
                       const struct rdzv_admission *a,
                       uint8_t head[RDZV_ADMIT_FIXED],
                       uint8_t **body,
                       size_t *size,
                       uint8_t mac[RDZV_MAC],
                       elastic_error_t *err);

/* An ADMIT's MAC to the client whose JOIN nonce is nc: over the message
 * msg[0..len) (head and body, len >= RDZV_ADMIT_FIXED). */
void rdzv_admit_mac (const uint8_t kr[RDZV_KEY],
                     const uint8_t nc[RDZV_NONCE],
                     const uint8_t *msg,
                     size_t len,
                     uint8_t mac[RDZV_MAC]);

/* The ADMIT p[0..len) to the client whose JOIN nonce is nc, of a mesh of
 * at most nslots slots: 0 with *a, or -1 with err: header, length, slot
 * count, size, MAC (checked before the body is read), a slot, base or
 * state out of range, the client's own slot not live, an address cut
 * short, refused (rdzv_addr_check) or where none belongs, bytes left
 * over. */
int rdzv_admit_decode (const uint8_t kr[RDZV_KEY],
                       const uint8_t nc[RDZV_NONCE],
                       const uint8_t *p,
                       size_t len,
                       uint32_t nslots,
                       struct rdzv_admission *a,
                       elastic_error_t *err);

/* Free what an admission holds (NULL-safe; a is kept). */
void rdzv_admission_free (struct rdzv_admission *a);

/* FAIL with text (cut at RDZV_FAIL_TEXT bytes): out (RDZV_FAIL_MAX bytes)
 * gets it; returns its length.  Decode: 0 with text (RDZV_FAIL_TEXT + 1
 * bytes: NUL-terminated, every byte outside ' '..'~' made '?'), or -1
 * with err (header, type, length). */
size_t rdzv_fail_encode (const char *text, uint8_t out[RDZV_FAIL_MAX]);
int rdzv_fail_decode (const uint8_t *p,
                      size_t len,
                      char text[RDZV_FAIL_TEXT + 1],
                      elastic_error_t *err);

#endif /* ELASTIC_EXEC_RDZV_PROTO_H */
