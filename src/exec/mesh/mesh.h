/* mesh.h - the elastic-exec mesh: the members of a job joined in a tree
 *
 * A mesh joins the n supervisors (members 0..n-1) of a job: each knows
 * every member's address, listens on its own, connects to its parent in
 * the tree (tree.h) and authenticates every connection (auth.h).  It runs
 * on its own thread with its own epoll loop, so heartbeats are never late
 * because the agent or PMIx is busy, and callers never block:
 *
 *   failure detection  heartbeats between tree neighbours (every
 *                      node_timeout / 5) and TCP EOF; a neighbour silent
 *                      for node_timeout, closed, or refusing connections is
 *                      lost.  A lost member is flooded to every live member
 *                      (the set of lost members only grows, so merging is a
 *                      union and every member ends with the same set); the
 *                      tree is repaired and the epoch bumped.  Lost
 *                      members never come back.
 *   joins              a mesh may have more member slots than members at
 *                      the start (mesh_config.slots: absent ones); a
 *                      member admits a newcomer into the lowest absent
 *                      slot (mesh_admit) and floods "member k joined at
 *                      addr" (a slot's state only rises, absent < live <
 *                      lost, so merging is again a union); the tree is
 *                      recomputed over the live set as after a loss.  The
 *                      newcomer starts its mesh with the admitter's view
 *                      (mesh_config.joining) and takes up the fence
 *                      sequence of its parent.  The epoch counts losses
 *                      and joins since the start.
 *   fence              an allgather of one blob per member, rolled up the
 *                      tree and broadcast down.  A loss mid-fence restarts
 *                      the rollup over the repaired tree; a result, once
 *                      made, is the result (members that have it hand it
 *                      on), so a fence never hangs on a lost member and
 *                      every member gets the blob of every member live at
 *                      completion (they may differ only in blobs of members
 *                      lost meanwhile).
 *   broadcast          rank-failed and notify messages, flooded along the
 *                      tree, deduplicated by (origin, seq), re-flooded over
 *                      the repaired tree after a loss.
 *   direct modex       a request routed along the tree to the member that
 *                      hosts a rank, answered by that member's handler;
 *                      fails at once when the target is (or becomes) lost.
 *   self-fencing       a member told it was declared lost, or that lost
 *                      more members by silence than it can still see (the
 *                      minority side of a partition; a tie goes to the side
 *                      with the lowest member), stops and calls
 *                      ops.self_fence: the agent kills its ranks there.
 *
 * Every callback runs on the mesh thread and must not block or call
 * mesh_destroy; it may call the other functions.  The functions below are
 * thread-safe and return at once.
 */
#ifndef ELASTIC_EXEC_MESH_MESH_H
#define ELASTIC_EXEC_MESH_MESH_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct mesh;
struct mesh_request;

/* status codes given to completion callbacks (negative errno) */
#define MESH_OK      0
#define MESH_ELOST   (-113) /* -EHOSTUNREACH: the target member is lost */
#define MESH_ECANCEL (-125) /* -ECANCELED: the mesh stopped or fenced itself */
#define MESH_EBUSY   (-16)  /* -EBUSY: a fence is already in progress here */

struct mesh_fence_result {
    uint32_t seq;   /* the fence's number (1, 2, ... on every member) */
    uint32_t epoch; /* the epoch the result was made in */
    uint32_t count; /* how many blobs */
    const uint32_t *members;
    const uint8_t *const *data;
    const uint32_t *len;
};

typedef void (*mesh_fence_cb) (void *arg,
                               int status,
                               const struct mesh_fence_result *res);
typedef void (*mesh_dmodex_cb) (void *arg, int status, const void *data, size_t len);

struct mesh_ops {
    /* members newly lost (count of them), the new epoch and live count */
    void (*lost) (
        void *arg, const uint32_t *members, size_t count, uint32_t epoch, uint32_t nlive);
    /* a broadcast from another member (kind: MESH_BCAST_* of proto.h) */
    void (*broadcast) (
        void *arg, uint32_t origin, int kind, const void *data, size_t len);
    /* a direct-modex request for this member: answer (now or later, from
     * any thread) with mesh_dmodex_respond(req, ...); exactly once */
    void (*dmodex_request) (void *arg,
                            struct mesh_request *req,
                            uint32_t origin,
                            const void *data,
                            size_t len);
    /* this member is cut off from the mesh: the mesh has stopped */
    void (*self_fence) (void *arg, const char *reason);
    /* every member this one knows of is connected (once, after start) */
    void (*joined) (void *arg);
    /* members newly admitted (count of them) with their "host:port" (NULL
     * where not known yet; addrs itself NULL when out of memory), the new
     * epoch and live count */
    void (*admitted) (void *arg,
                      const uint32_t *members,
                      const char *const *addrs,
                      size_t count,
                      uint32_t epoch,
                      uint32_t nlive);
};

/* a member slot's state (mesh_config.slots, mesh_admission.slots) */
enum { MESH_SLOT_LIVE = 0, MESH_SLOT_ABSENT = 1, MESH_SLOT_LOST = 2 };

struct mesh_config {
    uint32_t nmembers; /* member slots */
    uint32_t self;
    const char *const *addrs; /* "host:port" of every live member (others: NULL) */
    /* joins: NULL: every slot live.  Else a state for each slot
     * (MESH_SLOT_*); base: the slots below it were members at the start
     * (the epoch counts joins into the others; 0: nmembers); max_live:
     * mesh_admit admits no one while this many are live (0: nmembers);
     * joining: this member was admitted into a running mesh (its view is
     * its admitter's: mesh_admission) */
    const uint8_t *slots;
    uint32_t base, max_live;
    int joining;
    /* newcomers that ask by the admission handshake (a HELLO flagged JOIN,
     * mesh_join_request): admit_info non-NULL: admitted like mesh_admit,
     * and told admit_info (copied; may be empty: len 0) with their view;
     * NULL: refused (MESH_ADMIT_NOJOIN) */
    const void *admit_info;
    size_t admit_info_len;
    int listen_fd; /* >= 0: a bound, listening socket to use (taken) */
    /* nports > 1: candidate ports, the same for every member (the ports in
     * addrs are not used): a member listens on the first it can bind, and
     * a peer looks for it on each in turn (a refused connection, or one
     * closed or timed out before it authenticated, moves on to the next)
     * until it has once linked with it; a HELLO names the port its sender
     * listens on, so a member connects there first.  With listen_fd: only
     * to look for the others (a newcomer bound one of them itself) */
    const int *ports;
    uint32_t nports;
    uint32_t radix;      /* tree fan-out; 0: 8 */
    double node_timeout; /* seconds; 0: 2.0; at least 0.2 */
    double join_timeout; /* first contact with a neighbour; 0: 60 */
    const uint8_t *key;  /* MESH_KEY_SIZE bytes (auth.h); MESH_AUTH_MUNGE: unused */
    struct mesh_ops ops;
    void *arg;
    /* how connections are authenticated (auth.h): MESH_AUTH_SECRET (0, the
     * key above) or MESH_AUTH_MUNGE (a munge credential in every HELLO;
     * needs libmunge and munged: check with mesh_auth_munge_probe) */
    int auth;
    const char *job;          /* MESH_AUTH_MUNGE: the job id credentials name */
    const char *munge_socket; /* MESH_AUTH_MUNGE: munged's socket; NULL: default */
};
enum { MESH_AUTH_SECRET = 0, MESH_AUTH_MUNGE = 1 };

/* Create a mesh (binds its listening socket unless listen_fd is given; no
 * thread yet).  Returns NULL with err. */
struct mesh *mesh_create (const struct mesh_config *cfg, elastic_error_t *err);

/* The port this member listens on (with candidate ports: the one it got). */
int mesh_listen_port (const struct mesh *m);

/* Start the mesh thread.  Returns 0 or -1 with err. */
int mesh_start (struct mesh *m, elastic_error_t *err);

/* Say bye to the neighbours, stop the thread, fail what is pending
 * (MESH_ECANCEL, callbacks run before it returns) and free.  NULL-safe.
 * Never from a callback. */
void mesh_destroy (struct mesh *m);

/* Contribute blob to the next fence; cb gets every member's blob.  Returns
 * 0 (cb pending), or -1 with errno (EBUSY: a fence is pending here,
 * ECANCELED: stopped, ENOMEM). */
int mesh_fence (
    struct mesh *m, const void *blob, size_t len, mesh_fence_cb cb, void *arg);

/* What mesh_admit tells a newcomer: its slot and the admitter's view. */
struct mesh_admission {
    uint32_t slot;  /* the newcomer's */
    uint32_t n;     /* slots */
    uint32_t base;  /* mesh_config.base */
    uint32_t epoch; /* after the admission */
    uint8_t *slots; /* [n] MESH_SLOT_* (the newcomer's live) */
    char **addrs;   /* [n] "host:port" of the live members, NULL elsewhere */
};
void mesh_admission_free (struct mesh_admission *a);

/* Admit a newcomer listening on addr ("host:port") into the lowest absent
 * slot, flood its joining and fill *a (free with mesh_admission_free).
 * Blocks until the mesh thread did it (never call from a callback).
 * Returns 0, or -1 with errno: ENOSPC (max_live members are live), EMLINK
 * (no absent slot is left), EINVAL (a bad address), ECANCELED (the mesh
 * stopped or fenced itself), ENOMEM. */
int mesh_admit (struct mesh *m, const char *addr, struct mesh_admission *a);

/* The newcomer's side of the admission handshake (elastic-exec --join):
 * connect to member `member` at addr, authenticate both ways as a newcomer
 * (HELLO flagged JOIN: the credential or MACs bind MESH_NEWCOMER as the
 * client, the member's id, size 0 and this connection's nonces), and read
 * its MESH_ADMIT.  listen_port: where the newcomer listens (the member
 * admits "its address as the member sees it:listen_port").  auth, key,
 * job and munge_socket as in mesh_config. */
struct mesh_join_opts {
    const char *addr;
    uint32_t member;
    int listen_port;
    int auth;
    const uint8_t *key;
    const char *job;
    const char *munge_socket;
    double timeout; /* connect, handshake and answer; 0: 5 s */
};
/* Returns 1 admitted (*a filled: mesh_admission_free; *info, *info_len:
 * the member's admit_info, malloc'ed and NUL-terminated), 0 refused by
 * the member after authentication (*status: MESH_ADMIT_* of proto.h, err
 * says why), -1 when no member answered there (refused or closed
 * connection, a stranger, a failed authentication, garbage, a timeout:
 * err says which; the caller tries the next address). */
int mesh_join_request (const struct mesh_join_opts *o,
                       struct mesh_admission *a,
                       char **info,
                       size_t *info_len,
                       int *status,
                       elastic_error_t *err);

/* Broadcast (kind, data) to every other live member.  Returns 0 or -1. */
int mesh_broadcast (struct mesh *m, int kind, const void *data, size_t len);

/* Broadcast that rank of nspace failed with status.  Returns 0 or -1. */
int mesh_broadcast_failure (struct mesh *m,
                            uint32_t rank,
                            int32_t status,
                            const char *nspace);

/* Ask member target's dmodex_request handler; cb gets its answer, or
 * MESH_ELOST when target is or becomes lost.  Returns 0 or -1 with errno. */
int mesh_dmodex (struct mesh *m,
                 uint32_t target,
                 const void *data,
                 size_t len,
                 mesh_dmodex_cb cb,
                 void *arg);

/* Answer a dmodex request (any thread, once; frees req). */
void mesh_dmodex_respond (struct mesh_request *req,
                          int status,
                          const void *data,
                          size_t len);

/* A snapshot of the mesh's state (thread-safe). */
struct mesh_stats {
    uint32_t epoch;
    uint32_t nlive;
    uint32_t parent; /* MESH_NONE (tree.h) at the root */
    uint32_t nchildren;
    uint32_t fences; /* completed */
    uint64_t sent_bytes, recv_bytes, heartbeats_sent;
    int fenced; /* self-fenced */
};
void mesh_get_stats (struct mesh *m, struct mesh_stats *st);

/* Copy the live set (n bytes, 1 = live) into live.  Thread-safe. */
void mesh_get_live (struct mesh *m, uint8_t *live, uint32_t n);

/* Why each member was lost (n bytes: MESH_CAUSE_* of proto.h; 0 for a
 * live or absent member).  Thread-safe. */
void mesh_get_causes (struct mesh *m, uint8_t *cause, uint32_t n);

/* Seconds since each neighbour was last heard from (n entries; -1 for a
 * member that is not a live neighbour), as of the mesh thread's last
 * tick.  Thread-safe. */
void mesh_get_ages (struct mesh *m, double *age, uint32_t n);

/* TEST ONLY: cut (on = 1) or restore (0) this member's network as a
 * partition would: nothing it sends arrives, nothing sent to it is read,
 * its connection attempts never complete; its thread keeps running.
 * on = 2 cuts only what comes in (its sends, connects and closes go out),
 * as a member whose input is not read for a while sees its neighbours go
 * silent while they hear it. */
void mesh_test_cut (struct mesh *m, int on);

#endif /* ELASTIC_EXEC_MESH_MESH_H */
