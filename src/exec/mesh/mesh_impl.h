/* mesh_impl.h - the mesh's state, shared by its files (never installed)
 *
 * Everything below `lock` is owned by the mesh thread; the API functions
 * only queue commands (under lock) and wake the thread through evfd.
 */
#ifndef ELASTIC_EXEC_MESH_IMPL_H
#define ELASTIC_EXEC_MESH_IMPL_H

#include <pthread.h>
#include <sys/socket.h>

#include "auth.h"
#include "mesh.h"
#include "proto.h"
#include "tree.h"

enum conn_state {
    CONN_CONNECTING = 1, /* client: connect(2) in progress */
    CONN_WAIT_CHALLENGE, /* client: HELLO sent */
    CONN_WAIT_HELLO,     /* server: accepted, nothing heard yet */
    CONN_WAIT_AUTH,      /* server: CHALLENGE sent */
    CONN_UP,             /* authenticated both ways */
};

struct conn {
    int fd;
    int state;
    int outbound;
    int want_out;    /* EPOLLOUT armed */
    int closed;      /* on the graveyard, freed after this round of events */
    uint32_t member; /* the peer (claimed until UP), MESH_NONE unknown */
    uint8_t nonce_c[MESH_NONCE_SIZE], nonce_s[MESH_NONCE_SIZE];
    /* after the handshake: a MAC trailer on every message (auth.h) */
    uint8_t key[MESH_KEY_SIZE]; /* the handshake's: the job's, or munge's */
    uint8_t tx_key[MESH_KEY_SIZE], rx_key[MESH_KEY_SIZE];
    uint64_t tx_seq, rx_seq;
    int tx_sealed, rx_sealed;
    uint8_t *in;
    size_t inlen, incap;
    struct mesh_wbuf out;
    double created, last_rx, last_tx;
    char name[64];       /* for log lines: "member 3" or "127.0.0.1:4242" */
    uint32_t hello_port; /* inbound: the port its HELLO says the peer listens on */
    int newcomer;        /* inbound: a HELLO flagged JOIN (member stays MESH_NONE) */
    struct sockaddr_storage peer; /* inbound: where it came from */
    struct conn *next;
};

struct peer {
    struct conn *conn;        /* UP, or our outbound handshake to it */
    struct mesh_wbuf pending; /* messages held until the link is up */
    double since;             /* became a neighbour at */
    double last_rx;           /* last message from it */
    double next_connect;      /* earliest retry of a refused connect */
    int ever_up;
    double join_by;    /* a neighbour from the start, or admitted: it may take
                          join_timeout to appear (until then) */
    int refused;       /* our last connect to it was refused (nobody listens) */
    uint32_t port_idx; /* mesh_config.ports: the candidate tried next */
    int port_known;    /* we linked with it on that port: no more trying */
    int neighbour;
    int bye_due; /* lost with its link up: MESH_BYE_YOU_LOST once this member
                    knows it is not the minority (mesh_view_changed) */
};

struct cmd {
    int type;
    uint8_t *data;
    size_t len;
    int kind;
    uint32_t target;
    int status;
    mesh_fence_cb fcb;
    mesh_dmodex_cb dcb;
    void *arg;
    uint64_t id; /* CMD_RESPOND: the request */
    uint32_t origin;
    struct cmd *next;
};
enum { CMD_FENCE = 1, CMD_BCAST, CMD_DMODEX, CMD_RESPOND, CMD_DEAF, CMD_ADMIT };

/* mesh_admit's request, answered by the mesh thread */
struct admit_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, err;
    const char *addr;
    struct mesh_admission *a;
};

struct mesh_request {
    struct mesh *m;
    uint64_t id;
    uint32_t origin;
};

struct dreq { /* a direct-modex request we wait on */
    uint64_t id;
    uint32_t target;
    uint8_t *data;
    uint32_t len;
    mesh_dmodex_cb cb;
    void *arg;
    struct dreq *next;
};

struct fence_slot { /* contributions to one fence, by member */
    uint32_t seq;
    uint8_t *have;
    uint8_t **blob;
    uint32_t *len;
};

#define MESH_RECENT 64 /* broadcasts kept for re-flooding after a repair */

struct mesh {
    /* configuration */
    uint32_t n, self, radix;
    double node_timeout, join_timeout, hb_interval, hs_timeout;
    uint8_t key[MESH_KEY_SIZE];
    int auth;                 /* MESH_AUTH_SECRET or MESH_AUTH_MUNGE */
    char *job, *munge_socket; /* MESH_AUTH_MUNGE */
    struct mesh_ops ops;
    void *arg;
    struct sockaddr_storage *addr;
    socklen_t *addrlen;
    int *ports; /* mesh_config.ports (nports > 1), or NULL */
    uint32_t nports;
    int listen_port; /* ours, named in our HELLOs */

    int listen_fd, epfd, evfd;
    pthread_t thread;
    int started;

    pthread_mutex_t lock; /* guards the fields up to the thread's own */
    struct cmd *cmds, **cmds_tail;
    int stop, fence_busy, dead; /* dead: fenced or stopping */
    struct mesh_stats stats;
    uint8_t *live_snapshot, *cause_snapshot;
    double *rx_snapshot; /* [n] last message from each neighbour (0: not a
                            neighbour), copied under lock every tick */

    /* the mesh thread's own */
    double start;
    double woke;                            /* when epoll_wait last returned */
    uint8_t *live, *cause, *suspect, *left; /* suspect, left: lost recently */
    uint8_t *absent;                        /* a slot nobody joined yet */
    char **addr_text;                       /* "host:port" where known, or NULL */
    double *lost_at;
    uint32_t nlive, epoch, nlost, njoined;
    uint32_t base, max_live; /* mesh_config's */
    uint8_t *admit_info;     /* mesh_config's (a copy), NULL: no JOIN hellos */
    size_t admit_info_len;
    int catch_up; /* admitted late: no fence of its own completed yet */
    uint32_t *parent;
    struct peer *peers;
    struct conn *conns;
    struct conn *graveyard;
    int fenced, joined_told;
    int deaf;      /* test: the network is cut (mesh_test_cut) */
    int *mute_fds; /* test: sockets closed while cut, kept open (no FIN) */
    size_t nmute;
    double last_change, rejoin_deadline;
    uint32_t *newly_lost, *newly_joined;
    size_t nnewly_lost, nnewly_joined;
    /* fences */
    struct fence_slot cur, next;
    int fence_pending, fence_sent_up;
    mesh_fence_cb fence_cb;
    void *fence_arg;
    uint32_t done_seq, done_epoch, done_count;
    struct mesh_wbuf done_list; /* the last result, as a blob list */
    uint32_t *known_done;       /* by member: the last fence it is known to have */
    /* direct modex */
    struct dreq *dreqs;
    uint64_t next_id;
    /* broadcasts */
    uint32_t bcast_seq;
    uint64_t *seen;
    size_t nseen, seen_cap;
    struct mesh_wbuf recent[MESH_RECENT]; /* whole encoded messages */
    size_t nrecent;
    /* counters */
    uint64_t sent_bytes, recv_bytes, heartbeats_sent;
    uint32_t fences_done;
};

/* conn.c */
struct conn *conn_accept (struct mesh *m);
int conn_connect (struct mesh *m, uint32_t member);
void conn_close (struct mesh *m, struct conn *c, int bye_reason);
void conn_io (struct mesh *m, struct conn *c, int events);
void conn_flush (struct mesh *m, struct conn *c);
void conn_send (struct mesh *m, struct conn *c, const uint8_t *p, size_t len);
void conn_tick (struct mesh *m, double now);
void conn_bury (struct mesh *m);
void mesh_addr_set_port (struct sockaddr_storage *ss, int port);
int mesh_addr_port (const struct sockaddr_storage *ss);
/* "host:port" ("[host]:port" for IPv6) of ss's host with port */
void mesh_addr_format (const struct sockaddr_storage *ss,
                       int port,
                       char *buf,
                       size_t size);
int mesh_parse_addr (const char *s,
                     struct sockaddr_storage *ss,
                     socklen_t *len,
                     elastic_error_t *err);

/* mesh.c */
double mesh_now (void);
void mesh_handle (struct mesh *m,
                  struct conn *c,
                  const struct mesh_msg *msg,
                  const uint8_t *raw,
                  size_t rawlen);
void mesh_link_up (struct mesh *m, struct conn *c);
void mesh_link_down (struct mesh *m, struct conn *c);
void mesh_mark_lost (struct mesh *m, uint32_t member, int cause);
void mesh_view_changed (struct mesh *m);
/* A newcomer authenticated by the admission handshake (c, listening at
 * addr): admit it (or refuse), answer MESH_ADMIT and close c. */
void mesh_admit_newcomer (struct mesh *m, struct conn *c, const char *addr);
void mesh_self_fence (struct mesh *m, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
/* send an encoded message to member (held until the link is up) */
void mesh_send_member (struct mesh *m, uint32_t member, const uint8_t *p, size_t len);
void mesh_send_lost_set (struct mesh *m, uint32_t member);
void mesh_send_joined_set (struct mesh *m, uint32_t member);
int mesh_mark_joined (struct mesh *m, uint32_t member, const char *addr);
size_t mesh_begin (struct mesh *m, struct mesh_wbuf *b, int type, unsigned flags);

/* fence.c */
int fence_init (struct mesh *m);
void fence_free (struct mesh *m);
void fence_local (struct mesh *m, uint8_t *blob, size_t len, mesh_fence_cb cb, void *arg);
void fence_up (struct mesh *m, uint32_t from, const struct mesh_msg *msg);
void fence_down (struct mesh *m, const struct mesh_msg *msg);
void fence_progress (struct mesh *m);
void fence_view_changed (struct mesh *m);
void fence_link_up (struct mesh *m, uint32_t member);
void fence_cancel (struct mesh *m, int status);

/* route.c */
void route_dmodex (struct mesh *m,
                   uint8_t *data,
                   size_t len,
                   uint32_t target,
                   mesh_dmodex_cb cb,
                   void *arg);
void route_respond (struct mesh *m,
                    uint64_t id,
                    uint32_t origin,
                    int status,
                    const uint8_t *data,
                    size_t len);
void route_handle (struct mesh *m,
                   uint32_t from,
                   const struct mesh_msg *msg,
                   const uint8_t *raw,
                   size_t rawlen);
void route_lost (struct mesh *m, uint32_t member);
void route_view_changed (struct mesh *m);
void route_cancel (struct mesh *m, int status);
void bcast_send (struct mesh *m, int kind, const uint8_t *data, size_t len);
void bcast_link_up (struct mesh *m, uint32_t member);
void bcast_free (struct mesh *m);

#endif /* ELASTIC_EXEC_MESH_IMPL_H */
