/* proto.h - the mesh's wire format: one fixed header, then a payload
 *
 * Every message between two members is
 *
 *     magic u32 "MESH" | version u8 | type u8 | flags u16 | length u32 |
 *     epoch u32 | source u32 | payload (length bytes)
 *
 * all integers big-endian.  The header is MESH_HDR_SIZE bytes; the payload
 * is at most MESH_MAX_PAYLOAD bytes (MESH_MAX_PREAUTH before the peer is
 * authenticated).  A message of another version, an unknown type, a flag
 * this version does not define, a payload too long, too short, or with bytes
 * left over is refused by mesh_msg_decode with a one-line reason: the
 * connection that sent it is dropped.  Nothing here allocates: a decoded
 * message points into the caller's buffer.
 */
#ifndef ELASTIC_EXEC_MESH_PROTO_H
#define ELASTIC_EXEC_MESH_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define MESH_MAGIC       0x4d455348u /* "MESH" */
#define MESH_VERSION     1
#define MESH_HDR_SIZE    20
#define MESH_MAX_PAYLOAD (64u << 20)
#define MESH_MAX_PREAUTH 256
#define MESH_NONCE_SIZE  32
#define MESH_MAC_SIZE    32
#define MESH_MAX_MEMBERS (1u << 20)

enum mesh_type {
    MESH_HELLO = 1,   /* client -> server: who I am, whom I call, my nonce */
    MESH_CHALLENGE,   /* server -> client: its nonce and its proof */
    MESH_AUTH,        /* client -> server: the client's proof */
    MESH_HEARTBEAT,   /* empty: I am alive */
    MESH_LOST,        /* members lost (the full known set; a union merges) */
    MESH_FENCE_UP,    /* fence contributions up the tree (flag RESULT: final) */
    MESH_FENCE_DOWN,  /* a fence's result down the tree */
    MESH_DMODEX_REQ,  /* a direct-modex request, routed to its target */
    MESH_DMODEX_RESP, /* its answer, routed back to the origin */
    MESH_BCAST,       /* a broadcast (rank failed, notify), deduplicated */
    MESH_BYE,         /* I close this connection, and why */
    MESH_JOINED,      /* members admitted after the start, with their
                         addresses (the full known set; a union merges) */
    MESH_ADMIT,       /* member -> newcomer (after a HELLO flagged JOIN and
                         the handshake): admitted (its slot and the view)
                         or refused, and why */
    MESH_TYPE_MAX = MESH_ADMIT
};

/* flags */
#define MESH_F_RESULT 0x1u /* FENCE_UP: the blobs are a completed result */
#define MESH_F_CRED   0x2u /* HELLO: a u32-length munge credential follows */
#define MESH_F_PORT   0x4u /* HELLO: then the sender's listening port (u32, 1-65535) */
#define MESH_F_JOIN                                                                      \
    0x8u /* HELLO: a newcomer asks to be admitted (source 0,                             \
            nmembers 0, PORT required; mesh_join_request) */
#define MESH_F_ALL (MESH_F_RESULT | MESH_F_CRED | MESH_F_PORT | MESH_F_JOIN)

/* The member id a newcomer's handshake binds as the client's (never a
 * member's: ids are below MESH_MAX_MEMBERS) */
#define MESH_NEWCOMER 0xfffffffeu

/* MESH_ADMIT's status */
enum mesh_admit_status {
    MESH_ADMIT_OK = 0,
    MESH_ADMIT_FULL,     /* as many members live as the mesh takes (ENOSPC) */
    MESH_ADMIT_SPENT,    /* no absent slot left (EMLINK) */
    MESH_ADMIT_NOJOIN,   /* this mesh takes no newcomers by this handshake */
    MESH_ADMIT_STOPPING, /* the member is stopping or cut off (ECANCELED) */
    MESH_ADMIT_ERROR,    /* anything else (a bad address, out of memory) */
    MESH_ADMIT_STATUS_MAX = MESH_ADMIT_ERROR
};

/* why a member was lost (MESH_LOST entries) */
enum mesh_cause {
    MESH_CAUSE_TIMEOUT = 1, /* silent for the node timeout: maybe a partition */
    MESH_CAUSE_EOF,         /* its connection closed or was refused: it died */
    MESH_CAUSE_LEFT,        /* it said bye (end of job) */
    MESH_CAUSE_MAX = MESH_CAUSE_LEFT
};

/* why a connection is closed (MESH_BYE) */
enum mesh_bye_reason {
    MESH_BYE_SHUTDOWN = 1, /* the member ends */
    MESH_BYE_YOU_LOST,     /* you were declared lost: fence yourself */
    MESH_BYE_FENCED,       /* the member fenced itself */
    MESH_BYE_REASON_MAX = MESH_BYE_FENCED
};

/* broadcast kinds (MESH_BCAST) */
enum mesh_bcast_kind {
    MESH_BCAST_RANK_FAILED = 1, /* payload: u32 rank, i32 status, string nspace */
    MESH_BCAST_NOTIFY,          /* payload: opaque (a PMIx event, packed) */
    MESH_BCAST_DONE,            /* payload: opaque (a member's outcome: its
                                   ranks are gone; pmix_transport_mesh.c; or
                                   its workers are done: rdzv_mesh.c) */
    MESH_BCAST_ROUND,           /* payload: a rendezvous round started
                                   (rdzv_mesh.c) */
    MESH_BCAST_CLOSE,           /* payload: the rendezvous is closed, and why
                                   (rdzv_mesh.c) */
    MESH_BCAST_ROOM,            /* payload: JSON, a member's free slots
                                   (pmix_grow.c) */
    MESH_BCAST_SPAWN,           /* payload: JSON, a spawn placed on a member
                                   (pmix_grow.c) */
    MESH_BCAST_SPAWN_END,       /* payload: JSON, a spawn joined or failed
                                   (pmix_grow.c) */
    MESH_BCAST_PUBLISH,         /* payload: PMIx-packed published data
                                   (pmix_transport_mesh.c) */
    MESH_BCAST_KIND_MAX = MESH_BCAST_PUBLISH
};

struct mesh_hdr {
    uint8_t version;
    uint8_t type;
    uint16_t flags;
    uint32_t length;
    uint32_t epoch;
    uint32_t source;
};

/* A validated list of (member u32, cause u8) or (member u32, len u32,
 * bytes) entries, read with mesh_list_next. */
struct mesh_list {
    const uint8_t *p;
    size_t len;
    uint32_t count;
};

struct mesh_msg {
    struct mesh_hdr hdr;
    union {
        struct {
            uint32_t target;   /* the member the client believes it reached */
            uint32_t nmembers; /* the size of the job's mesh */
            uint8_t nonce[MESH_NONCE_SIZE];
            const uint8_t *cred; /* MESH_F_CRED: the munge credential (no NUL) */
            uint32_t cred_len;   /* 0 without the flag */
            uint32_t port;       /* MESH_F_PORT: where the sender listens; else 0 */
        } hello;
        struct {
            uint8_t nonce[MESH_NONCE_SIZE];
            uint8_t mac[MESH_MAC_SIZE];
        } challenge;
        struct {
            uint8_t mac[MESH_MAC_SIZE];
        } auth;
        struct mesh_list lost;   /* entries: member, cause */
        struct mesh_list joined; /* entries: member, "host:port" (may be empty) */
        struct {
            uint32_t seq;
            struct mesh_list blobs; /* entries: member, blob */
        } fence;
        struct {
            uint64_t id;
            uint32_t origin, target;
            int32_t status; /* responses only */
            const uint8_t *data;
            uint32_t len;
        } dmodex;
        struct {
            uint32_t origin, seq;
            uint8_t kind;
            const uint8_t *data;
            uint32_t len;
        } bcast;
        struct {
            uint8_t reason;
        } bye;
        struct {
            uint32_t status; /* MESH_ADMIT_*; the rest only when OK */
            uint32_t slot, n, base, epoch;
            const uint8_t *slots;   /* [n] MESH_SLOT_* (mesh.h); slot's live */
            struct mesh_list addrs; /* entries: member, "host:port" */
            const uint8_t *info;    /* the mesh owner's blob (may be empty) */
            uint32_t info_len;
        } admit;
    } u;
};

/* A growable output buffer; on allocation failure `failed` is set and
 * further writes are ignored (checked once, at the end). */
struct mesh_wbuf {
    uint8_t *buf;
    size_t len, cap;
    int failed;
};

/* Start a message of type with the header's epoch and source; the length is
 * filled by mesh_msg_end.  Returns the offset of the message in b. */
size_t mesh_msg_begin (
    struct mesh_wbuf *b, int type, unsigned flags, uint32_t epoch, uint32_t source);
/* Fill in the length of the message begun at off.  Returns 0, or -1 when
 * the buffer failed or the payload is over MESH_MAX_PAYLOAD (the message
 * is then removed from b). */
int mesh_msg_end (struct mesh_wbuf *b, size_t off);

void mesh_put_u8 (struct mesh_wbuf *b, uint8_t v);
void mesh_put_u16 (struct mesh_wbuf *b, uint16_t v);
void mesh_put_u32 (struct mesh_wbuf *b, uint32_t v);
void mesh_put_u64 (struct mesh_wbuf *b, uint64_t v);
void mesh_put_bytes (struct mesh_wbuf *b, const void *p, size_t n);
/* u32 length, then the bytes */
void mesh_put_blob (struct mesh_wbuf *b, const void *p, size_t n);

/* Drop the first n bytes of b (sent). */
void mesh_wbuf_consume (struct mesh_wbuf *b, size_t n);
void mesh_wbuf_free (struct mesh_wbuf *b);

/* Decode a header from at least MESH_HDR_SIZE bytes, checking magic,
 * version, type, flags and that length <= max_payload.  Returns 0, or -1
 * with the reason in err. */
int mesh_hdr_decode (const uint8_t *buf,
                     size_t len,
                     uint32_t max_payload,
                     struct mesh_hdr *hdr,
                     elastic_error_t *err);

/* Decode and validate one whole message (header + payload, exactly len
 * bytes).  Pointers in msg refer into buf.  Returns 0, or -1 with the
 * reason in err (never reads outside buf). */
int mesh_msg_decode (const uint8_t *buf,
                     size_t len,
                     uint32_t max_payload,
                     struct mesh_msg *msg,
                     elastic_error_t *err);

/* Next entry of a validated list: sets *member and either *cause (LOST) or
 * data and len (fence blobs; pass cause NULL).  Returns 1, or 0 at the end. */
int mesh_list_next (struct mesh_list *it,
                    int blobs,
                    uint32_t *member,
                    uint8_t *cause,
                    const uint8_t **data,
                    uint32_t *len);

/* The name of a type ("hello"), or "unknown". */
const char *mesh_type_name (int type);

/* A MESH_ADMIT payload: status; when MESH_ADMIT_OK, the newcomer's slot,
 * the slot count n, base, epoch, the slots' states slots[n], the live
 * members' addresses addrs[n] (NULL elsewhere) and info (info_len bytes). */
void mesh_admit_payload (struct mesh_wbuf *b,
                         uint32_t status,
                         uint32_t slot,
                         uint32_t n,
                         uint32_t base,
                         uint32_t epoch,
                         const uint8_t *slots,
                         const char *const *addrs,
                         const void *info,
                         size_t info_len);

/* What a MESH_ADMIT status means, for a message ("no room: ..."). */
const char *mesh_admit_status_text (uint32_t status);

/* Encode and decode a rank-failed broadcast payload.  decode returns 0, or
 * -1 with err; nspace is copied NUL-terminated into (ns, nssize). */
int mesh_rank_failed_encode (struct mesh_wbuf *b,
                             uint32_t rank,
                             int32_t status,
                             const char *nspace);
int mesh_rank_failed_decode (const uint8_t *p,
                             size_t len,
                             uint32_t *rank,
                             int32_t *status,
                             char *ns,
                             size_t nssize,
                             elastic_error_t *err);

#endif /* ELASTIC_EXEC_MESH_PROTO_H */
