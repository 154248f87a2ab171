/* rdzv_tcp.h - the bootstrap rendezvous of a torchrun-style launch
 *
 * Outside Slurm (issue 14: `elastic-exec --nnodes N --node-rank K
 * --rdzv-endpoint HOST:PORT --nproc-per-node P ./app` on every node) no
 * launcher tells a member where the others are.  This exchange does, once,
 * before the mesh starts: every member learns every member's mesh address
 * ("addr:port"); afterwards the mesh takes over and the rendezvous is gone
 * (no single point of failure after the start).
 *
 * Server election (as torchrun's c10d store: the agent on the endpoint's
 * host hosts it): every member tries to bind and listen on the endpoint
 * (SO_REUSEADDR).  The one that succeeds serves, in a thread of its own;
 * the others (EADDRINUSE, EADDRNOTAVAIL) and the server itself, through its
 * own connection, are clients, which connect and retry until the timeout
 * (the server may start later).  The election happens once per exchange:
 * if the serving member dies before the list is out, the others fail at
 * the timeout (as torchrun's static c10d store does).
 *
 * The messages (HELLO, JOIN, LIST, ACK, FAIL; authenticated under a key
 * derived from the mesh key) and their decoding are in rdzv_proto.h; this
 * file moves them over TCP.
 *
 * The server refuses (FAIL, then closes) a JOIN whose address is longer
 * than RDZV_ADDR_MAX, whose MAC does not verify (another secret), whose
 * nnodes differs from its own, whose rank is out of range, whose address
 * is not HOST:PORT, or a second JOIN of a rank with a different address
 * (the same address again is the same member reconnecting); it drops
 * garbage (another version included), any other message and a connection
 * that sends no JOIN within RDZV_IDLE_S seconds, and never waits on one
 * connection.  When all nnodes have joined (or MIN of a MIN:MAX range
 * and the last call passed) it sends every one the LIST, keeps serving (a
 * member that lost its connection rejoins and gets it; any other JOIN is
 * refused: "the job started with 2 of at most 3 nodes") until every
 * member ACKed it, then closes; at its timeout it sends FAIL ("2 of 3
 * nodes joined within 60 s (missing node ranks: 2)") to those waiting.
 *
 * Joins (opts.slots > 0: a job whose nodes may come after its start, the
 * elastic rendezvous over the mesh): the job's map has opts.slots nodes,
 * member slots of which those that started are the first; the server
 * does not close after the start but goes on serving until
 * rdzv_tcp_server_stop, and answers the JOIN of a node that is not in the
 * list with an ADMIT: the admission its member's mesh gives
 * (rdzv_tcp_server_set_admit: mesh_admit), or a FAIL with the reason (the
 * job is full, no mesh yet, ...).  The admitted node starts its mesh with
 * that view.  Joins need the endpoint's host, the server's: while it is
 * gone nodes cannot join (the running job is not affected).
 */
#ifndef ELASTIC_EXEC_RDZV_TCP_H
#define ELASTIC_EXEC_RDZV_TCP_H

#include <stdint.h>

#include "common/error.h"
#include "jobmap.h"
#include "rdzv_proto.h"

#define RDZV_IDLE_S  5.0  /* a connection silent this long is dropped */
#define RDZV_GRACE_S 10.0 /* a joined client waits its timeout + this */

/* What a member brings to the exchange. */
struct rdzv_tcp_opts {
    const uint8_t *key;    /* the mesh key, 32 bytes */
    const char *self_addr; /* NULL: the address this host uses toward the endpoint */
    int self_port;         /* 1..65535: the port its mesh socket is bound to */
    double timeout;        /* > 0: how long to wait for the job's nodes */
    int min_nodes;         /* --nnodes MIN:MAX's MIN (0: all MAX) */
    double last_call;      /* once MIN joined, how long the server waits for
                              more before the job starts with those there */
    int any_rank;          /* 1: no --node-rank; the server places this node */
    uint32_t slots;        /* > 0: joins (see above): this many member slots
                              (>= nnodes; every member must give the same) */
};

/* With opts.slots: the mesh's view of the slots and, on the member that
 * serves the endpoint, the server that admits nodes (rdzv_tcp_joins_free). */
struct rdzv_tcp_joins {
    uint8_t *slots; /* [slots] RDZV_SLOT_* (rdzv_proto.h; = mesh.h's MESH_SLOT_*) */
    uint32_t base;  /* the nodes the job started with (slots 0..base-1) */
    uint32_t epoch; /* admitted: the mesh's epoch with this member in it */
    int late;       /* 1: this member was admitted into the running job */
    struct rdzv_tcp_server *server; /* this member serves the endpoint, or NULL */
};

struct rdzv_tcp_server;

/* Admit the node listening on addr into the running job: fill *a (the
 * server frees it with rdzv_admission_free) and return 0, or return -1
 * with a one-line reason in why (sent to the node).  Runs on the server's
 * thread. */
typedef int (*rdzv_tcp_admit_fn) (
    void *arg, const char *addr, struct rdzv_admission *a, char *why, size_t whysize);

/* Set (fn NULL: clear) the server's admission function; returns once no
 * admission runs.  NULL-safe. */
void rdzv_tcp_server_set_admit (struct rdzv_tcp_server *s,
                                rdzv_tcp_admit_fn fn,
                                void *arg);

/* Stop serving and free (NULL-safe). */
void rdzv_tcp_server_stop (struct rdzv_tcp_server *s);

/* Free what joins holds, stopping its server (NULL-safe; joins is kept). */
void rdzv_tcp_joins_free (struct rdzv_tcp_joins *joins);

/* Exchange mesh addresses with the other members of the torchrun map *mp
 * ((*mp)->rdzv_host:rdzv_port, its node_id unless o->any_rank, its
 * nnodes: MAX), authenticated with o->key.  The job starts with every
 * node that joined once MAX did, or MIN did and o->last_call passed (the
 * serving member's MIN and last call decide; a member whose MIN is larger
 * than the count fails), or at the timeout with at least MIN.  On success
 * *mp is the job's map (replaced by one of fewer nodes, or with this
 * member at another place, when the job started so: node ranks with a
 * --node-rank keep its order, those without follow in the order they
 * came), every node's host set (jobmap_set_host), *addrs a malloc'ed
 * array of (*mp)->nnodes malloc'ed "addr:port" strings in node order
 * (with o->slots: the map has o->slots nodes, *addrs NULL for the slots
 * without a live member, and *joins says which are live; a node that
 * came after the start was admitted and *mp places it in its slot);
 * returns 0.  Else -1 with one line in err naming the endpoint and what
 * went wrong. */
int rdzv_tcp_exchange (struct jobmap **mp,
                       const struct rdzv_tcp_opts *o,
                       char ***addrs,
                       struct rdzv_tcp_joins *joins,
                       elastic_error_t *err);

/* Free what rdzv_tcp_exchange returned in *addrs (NULL-safe). */
void rdzv_tcp_addrs_free (char **addrs, int n);

#endif /* ELASTIC_EXEC_RDZV_TCP_H */
