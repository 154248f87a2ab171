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
 * connection.  When all nnodes have joined it sends every one the LIST,
 * keeps serving (a member that lost its connection rejoins and gets it)
 * until every member ACKed it, then closes; at its timeout it sends FAIL
 * ("2 of 3 nodes joined within 60 s (missing node ranks: 2)") to those
 * waiting.
 */
#ifndef ELASTIC_EXEC_RDZV_TCP_H
#define ELASTIC_EXEC_RDZV_TCP_H

#include <stdint.h>

#include "common/error.h"
#include "jobmap.h"
#include "rdzv_proto.h"

#define RDZV_IDLE_S  5.0  /* a connection silent this long is dropped */
#define RDZV_GRACE_S 10.0 /* a joined client waits its timeout + this */

/* Exchange mesh addresses with the other members of the torchrun map m
 * (m->rdzv_host:m->rdzv_port, m->node_id, m->nnodes), authenticated with
 * key (the mesh key, 32 bytes).  self_addr/self_port: this member's mesh
 * address (self_port 1..65535: the port its mesh socket is bound to);
 * self_addr NULL: the address this host uses to reach the endpoint.
 * Waits up to timeout seconds (> 0).  On success sets every node's host
 * (jobmap_set_host), *addrs = a malloc'ed array of m->nnodes malloc'ed
 * "addr:port" strings (node-rank order), and returns 0; else -1 with one
 * line in err naming the endpoint and what went wrong. */
int rdzv_tcp_exchange (struct jobmap *m,
                       const uint8_t key[32],
                       const char *self_addr,
                       int self_port,
                       double timeout,
                       char ***addrs,
                       elastic_error_t *err);

/* Free what rdzv_tcp_exchange returned in *addrs (NULL-safe). */
void rdzv_tcp_addrs_free (char **addrs, int n);

#endif /* ELASTIC_EXEC_RDZV_TCP_H */
