/* t5112-rdzv-tcp - the torchrun-style rendezvous (src/exec/rdzv_tcp.c)
 *
 * Members are forked processes on 127.0.0.1, each with its own mesh port,
 * the endpoint on 127.0.0.1:<free port>.  To make the serving member the
 * last one started, the test first holds the endpoint itself (listening):
 * every member started then loses the election and
 * connects to the test, which keeps each connection until all have come
 * (so they are the members, not retries), then lets go and starts the
 * member that serves; the others retry until it is there.
 *
 * Cases: 3 and 5 members (all get the same list, in node-rank order, and
 * the job map's hosts); garbage, an oversized JOIN, a JOIN with a bad MAC
 * and a silent connection to the server while a member is still missing
 * do not stop the others; a wrong key is refused at once with a clear
 * error; a duplicate node rank is refused; a member with another --nnodes
 * is refused; a member that never comes times every joined member out
 * naming it, and a silent connection is dropped before that; no server at
 * all; a server of another version, or one that says nothing; self_addr
 * NULL; bad arguments.  A range --nnodes 2:4: the job starts with the
 * three that came once the last call passed, a fourth is refused while
 * the server serves; members without --node-rank are placed; a MIN not
 * reached; a member whose MIN is above the count the server started
 * with.  Joins (a job with member slots): the serving member (the test
 * itself) keeps serving after the start; a late JOIN is refused while no
 * admission function is set, then admitted (ADMIT, its slot, the view)
 * by hand and by a member's exchange, which gets its slot; a refusal's
 * reason reaches the node; the server stops.
 *
 * First, without sockets, the wire format (src/exec/rdzv_proto.c): every
 * message encoded and decoded back, and the decoders' refusals: truncated
 * at every length, another version, a length not the message's own, an
 * address too long, a MAC under another key or for another connection,
 * a LIST of another node count, size or with a bad address, a message
 * where none is expected, a FAIL too long; nothing decided on no bytes.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "exec/jobmap.h"
#include "exec/mesh/auth.h"
#include "exec/rdzv_tcp.h"
#include "lib/tap.h"

#define WAIT_S 60.0 /* the longest any event may take (generous, never slept) */

static int ep_port;
static char ep[64];

struct member {
    int rank, nnodes;   /* rank -1: no --node-rank */
    int nmin;           /* MIN of MIN:MAX (0: nnodes) */
    double last_call;   /* the serving member's (0: none) */
    const char *secret; /* NULL: the job's */
    int port;           /* its mesh port */
    double timeout;
    uint32_t slots; /* > 0: a job with joins (rdzv_tcp_opts.slots) */
    /* the result */
    pid_t pid;
    int fd;
    char out[4096];
    size_t outlen;
    int done, ok;
    double elapsed;
    int index; /* its place in the job ("I=") */
};

/* A free TCP port on 127.0.0.1. */
static int free_port (void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof (sa);
    int fd = socket (AF_INET, SOCK_STREAM, 0), port;

    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (fd < 0 || bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        getsockname (fd, (struct sockaddr *)&sa, &sl) < 0) {
        perror ("free_port");
        exit (1);
    }
    port = ntohs (sa.sin_port);
    close (fd);
    return port;
}

static void new_endpoint (void)
{
    ep_port = free_port ();
    snprintf (ep, sizeof (ep), "127.0.0.1:%d", ep_port);
}

static struct jobmap *torchrun_map (int nnodes, int rank, const char *endpoint)
{
    struct jobmap_torchrun t = {
        .nnodes = nnodes,
        .node_rank = rank,
        .nproc_per_node = 1,
        .rdzv_endpoint = endpoint,
        .run_id = "t5112",
    };
    elastic_error_t err;
    struct jobmap *m = jobmap_from_torchrun (&t, &err);

    if (!m)
        diag ("jobmap_from_torchrun: %s", err.text);
    return m;
}

static void key_of (const char *secret, uint8_t key[32])
{
    elastic_error_t err;

    if (mesh_auth_key_derive ("t5112", secret, strlen (secret), key, &err) < 0) {
        diag ("key: %s", err.text);
        exit (1);
    }
}

/* The child: one exchange; writes "OK a0 a1 ...", or "ERR text"; then
 * " T=<seconds>", and " I=<its node rank in the job>" when it joined. */
static void member_main (struct member *mb, int fd)
{
    struct jobmap *m = torchrun_map (mb->nnodes, mb->rank >= 0 ? mb->rank : 0, ep);
    elastic_error_t err = {{0}};
    uint8_t key[32];
    char **addrs = NULL, buf[4096];
    struct rdzv_tcp_opts o = {
        .key = key,
        .self_addr = "127.0.0.1",
        .self_port = mb->port,
        .timeout = mb->timeout,
        .min_nodes = mb->nmin,
        .last_call = mb->last_call,
        .any_rank = mb->rank < 0,
        .slots = mb->slots,
    };
    struct rdzv_tcp_joins joins = {0};
    size_t off = 0;
    double t0 = mono_now ();
    int rc;

    if (!m)
        _exit (2);
    key_of (mb->secret ? mb->secret : "the job's secret", key);
    rc = rdzv_tcp_exchange (&m, &o, &addrs, mb->slots ? &joins : NULL, &err);
    if (rc == 0) {
        off += (size_t)snprintf (buf + off, sizeof (buf) - off, "OK");
        for (int i = 0; i < m->nnodes; i++) {
            if (mb->slots && !addrs[i]) { /* a slot without a member */
                off += (size_t)snprintf (buf + off, sizeof (buf) - off, " -");
                continue;
            }
            if (!m->node[i].name || strcmp (m->node[i].name, "127.0.0.1") != 0) {
                off = (size_t)snprintf (buf, sizeof (buf), "ERR host %d not set", i);
                break;
            }
            off += (size_t)snprintf (buf + off, sizeof (buf) - off, " %s", addrs[i]);
        }
        rdzv_tcp_addrs_free (addrs, m->nnodes);
        if (mb->slots)
            off += (size_t)snprintf (
                buf + off, sizeof (buf) - off, " B=%u L=%d", joins.base, joins.late);
        rdzv_tcp_joins_free (&joins);
    } else
        off += (size_t)snprintf (buf + off, sizeof (buf) - off, "ERR %s", err.text);
    off += (size_t)snprintf (buf + off, sizeof (buf) - off, " T=%.2f", mono_now () - t0);
    if (rc == 0)
        snprintf (buf + off, sizeof (buf) - off, " I=%d", m->node_id);
    if (write (fd, buf, strlen (buf)) < 0)
        _exit (3);
    jobmap_destroy (m);
    _exit (rc == 0 ? 0 : 1);
}

static void start (struct member *mb)
{
    int p[2];

    if (mb->timeout == 0)
        mb->timeout = 30;
    if (pipe (p) < 0 || (mb->pid = fork ()) < 0) {
        perror ("start");
        exit (1);
    }
    if (mb->pid == 0) {
        /* only the pipe: not the test's hold on the endpoint, nor its
         * other members' pipes */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != p[1])
                close (fd);
        member_main (mb, p[1]);
    }
    close (p[1]);
    mb->fd = p[0];
}

/* Wait for member mb's result (by until).  Returns 1 when it is done. */
static int finish (struct member *mb, double until)
{
    if (mb->pid <= 0) /* never started */
        return 0;
    while (!mb->done) {
        struct pollfd pfd = {.fd = mb->fd, .events = POLLIN};
        ssize_t n;
        int st;

        if (mono_now () >= until) {
            kill (mb->pid, SIGKILL);
            waitpid (mb->pid, NULL, 0);
            close (mb->fd);
            mb->done = 1;
            snprintf (mb->out, sizeof (mb->out), "HUNG");
            return 1;
        }
        if (poll (&pfd, 1, 200) <= 0)
            continue;
        n = read (mb->fd, mb->out + mb->outlen, sizeof (mb->out) - 1 - mb->outlen);
        if (n > 0) {
            mb->outlen += (size_t)n;
            mb->out[mb->outlen] = '\0';
            continue;
        }
        close (mb->fd);
        waitpid (mb->pid, &st, 0);
        mb->done = 1;
        mb->ok = WIFEXITED (st) && WEXITSTATUS (st) == 0 && !strncmp (mb->out, "OK", 2);
        if (strstr (mb->out, " T="))
            mb->elapsed = atof (strstr (mb->out, " T=") + 3);
        mb->index = strstr (mb->out, " I=") ? atoi (strstr (mb->out, " I=") + 3) : -1;
    }
    return 1;
}

/* Wait until any of mb[0..n-1] finishes; its index, or -1 by until. */
static int finish_any (struct member *mb, int n, double until)
{
    while (mono_now () < until) {
        struct pollfd pfd[16];
        int k = 0, idx[16];

        for (int i = 0; i < n; i++)
            if (!mb[i].done) {
                pfd[k].fd = mb[i].fd;
                pfd[k].events = POLLIN;
                idx[k++] = i;
            }
        if (k == 0 || poll (pfd, (nfds_t)k, 200) <= 0)
            continue;
        for (int j = 0; j < k; j++)
            if (pfd[j].revents) {
                /* read what is there; done on EOF */
                struct member *m = &mb[idx[j]];
                ssize_t r =
                    read (m->fd, m->out + m->outlen, sizeof (m->out) - 1 - m->outlen);
                if (r > 0) {
                    m->outlen += (size_t)r;
                    m->out[m->outlen] = '\0';
                } else {
                    int st;

                    close (m->fd);
                    waitpid (m->pid, &st, 0);
                    m->done = 1;
                    m->ok = WIFEXITED (st) && WEXITSTATUS (st) == 0 &&
                            !strncmp (m->out, "OK", 2);
                    return idx[j];
                }
            }
    }
    return -1;
}

/* The test holds the endpoint: it listens there. */
static int hold_endpoint (void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons ((uint16_t)ep_port)};
    int fd = socket (AF_INET, SOCK_STREAM, 0), one = 1;

    /* SO_REUSEADDR does not let a member bind while this listens, but
     * lets the server bind over the TIME_WAIT of the connections closed
     * here (they inherit it) */
    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    (void)setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof (one));
    if (fd < 0 || bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        listen (fd, 64) < 0) {
        perror ("hold_endpoint");
        exit (1);
    }
    return fd;
}

/* Accept n connections (members that lost the election), keeping each
 * open so that none counts twice; then let go of all.  Returns n or less. */
static int release_endpoint (int lfd, int n)
{
    int fds[64], got = 0;
    double until = mono_now () + WAIT_S;

    while (got < n && mono_now () < until) {
        struct pollfd pfd = {.fd = lfd, .events = POLLIN};

        if (poll (&pfd, 1, 200) > 0 && (fds[got] = accept (lfd, NULL, NULL)) >= 0)
            got++;
    }
    for (int i = 0; i < got; i++)
        close (fds[i]);
    close (lfd);
    return got;
}

static int connect_ep (void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons ((uint16_t)ep_port)};
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    double until = mono_now () + WAIT_S;

    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    while (connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        struct timespec ts = {0, 20 * 1000 * 1000};

        if (mono_now () > until) {
            perror ("connect_ep");
            exit (1);
        }
        close (fd);
        fd = socket (AF_INET, SOCK_STREAM, 0);
        nanosleep (&ts, NULL);
    }
    return fd;
}

/* Read from fd until EOF (or until, or size); returns the bytes read, and
 * *eof whether the peer closed. */
static size_t read_until_eof (int fd, uint8_t *buf, size_t size, double until, int *eof)
{
    size_t got = 0;

    *eof = 0;
    while (mono_now () < until && got < size) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll (&pfd, 1, 200) <= 0)
            continue;
        n = read (fd, buf + got, size - got);
        if (n <= 0) {
            *eof = 1;
            break;
        }
        got += (size_t)n;
    }
    return got;
}

static void
want_list (struct member *mb, int n, struct member *all, int nall, const char *what)
{
    char want[4096];
    size_t off = (size_t)snprintf (want, sizeof (want), "OK");
    int good = 1, nok = 0;

    for (int r = 0; r < n; r++)
        for (int i = 0; i < nall; i++)
            if (all[i].rank == r && all[i].ok) {
                off += (size_t)snprintf (
                    want + off, sizeof (want) - off, " 127.0.0.1:%d", all[i].port);
                break;
            }
    for (int i = 0; i < nall; i++) {
        if (!mb[i].ok)
            continue;
        nok++;
        if (strncmp (mb[i].out, want, off) != 0 || strncmp (mb[i].out + off, " T=", 3))
            good = 0;
    }
    if (!ok (good && nok == n,
             "%s: every member has the same list, in node-rank order",
             what))
        for (int i = 0; i < nall; i++)
            diag ("member %d: %s (want %s)", i, mb[i].out, want);
}

/* n members; server (a node rank) started last, after the others lost the
 * election. */
static void case_all_join (int n, int server, int port0)
{
    struct member mb[8] = {{0}};
    double until;
    int lfd, nok = 0;
    char what[64];

    snprintf (what, sizeof (what), "%d members", n);
    new_endpoint ();
    lfd = hold_endpoint ();
    for (int i = 0; i < n; i++) {
        mb[i].rank = i;
        mb[i].nnodes = n;
        mb[i].port = port0 + i;
        if (i != server)
            start (&mb[i]);
    }
    is_int (release_endpoint (lfd, n - 1),
            n - 1,
            "%s: the %d others lost the election and connected",
            what,
            n - 1);
    start (&mb[server]);
    until = mono_now () + WAIT_S;
    for (int i = 0; i < n; i++) {
        finish (&mb[i], until);
        nok += mb[i].ok;
        if (!mb[i].ok)
            diag ("node rank %d: %s", i, mb[i].out);
    }
    is_int (
        nok, n, "%s: all joined (the server, node rank %d, started last)", what, server);
    want_list (mb, n, mb, n, what);
}

/* 5 members; while node rank 4 has not come, strangers try the server. */
static void case_strangers (void)
{
    struct member mb[5] = {{0}};
    uint8_t buf[512], join[512];
    int lfd, g[5], eof, nok = 0;
    size_t n;
    double until;

    new_endpoint ();
    lfd = hold_endpoint ();
    for (int i = 0; i < 5; i++) {
        mb[i].rank = i;
        mb[i].nnodes = 5;
        mb[i].port = 21000 + i;
    }
    for (int i = 1; i <= 3; i++)
        start (&mb[i]);
    is_int (release_endpoint (lfd, 3), 3, "strangers: 3 members lost the election");
    start (&mb[0]); /* the server */
    until = mono_now () + WAIT_S;

    /* garbage: HELLO comes, then the server closes */
    g[0] = connect_ep ();
    memset (buf, 0x5a, 64);
    if (write (g[0], buf, 64) < 0)
        perror ("write");
    n = read_until_eof (g[0], buf, sizeof (buf), until, &eof);
    ok (eof && n == 37 && !memcmp (buf, "ERZ\x01\x01", 5),
        "garbage: the server sent its HELLO and closed (%zu bytes, eof %d)",
        n,
        eof);

    /* an oversized JOIN: refused with a reason */
    g[1] = connect_ep ();
    memset (join, 0, sizeof (join));
    memcpy (join, "ERZ\x01\x02", 5);
    join[45] = 0xff;
    join[46] = 0xff;
    if (write (g[1], join, 47) < 0)
        perror ("write");
    n = read_until_eof (g[1], buf, sizeof (buf) - 1, until, &eof);
    buf[n] = '\0';
    ok (eof && n > 37 + 7 && buf[37 + 4] == RDZV_FAIL &&
            strstr ((char *)buf + 37 + 7, "65535 bytes (at most 300)"),
        "oversized JOIN: refused (%s)",
        n > 44 ? (char *)buf + 44 : "");

    /* a JOIN for the missing node rank 4 with a MAC under no key */
    g[2] = connect_ep ();
    n = read_until_eof (g[2], buf, 37, until, &eof);
    memcpy (join, "ERZ\x01\x02", 5);
    join[5 + 3] = 4;     /* rank 4 */
    join[5 + 4 + 3] = 5; /* nnodes 5 */
    join[45] = 0;
    join[46] = 11;
    memcpy (join + 47, "127.0.0.1:1", 11);
    memset (join + 58, 0x11, 32);
    if (write (g[2], join, 90) < 0)
        perror ("write");
    n = read_until_eof (g[2], buf, sizeof (buf) - 1, until, &eof);
    buf[n] = '\0';
    ok (eof && n > 7 && buf[4] == RDZV_FAIL &&
            strstr ((char *)buf + 7, "MAC does not verify"),
        "forged JOIN for node rank 4: refused (%s)",
        n > 7 ? (char *)buf + 7 : "");

    /* a JOIN of version 2: the server sends its HELLO and drops it */
    g[4] = connect_ep ();
    memcpy (join, "ERZ\x02\x02", 5);
    if (write (g[4], join, 90) < 0)
        perror ("write");
    n = read_until_eof (g[4], buf, sizeof (buf), until, &eof);
    ok (eof && n == 37,
        "a JOIN of version 2: dropped after the HELLO, no answer (%zu bytes, eof %d)",
        n,
        eof);

    /* a silent one, kept open */
    g[3] = connect_ep ();

    start (&mb[4]);
    for (int i = 0; i < 5; i++) {
        finish (&mb[i], until);
        nok += mb[i].ok;
        if (!mb[i].ok)
            diag ("node rank %d: %s", i, mb[i].out);
    }
    is_int (nok, 5, "strangers: all 5 members joined anyway");
    want_list (mb, 5, mb, 5, "strangers");
    for (int i = 0; i < 5; i++)
        close (g[i]);
}

/* Node rank 1 holds another secret. */
static void case_wrong_key (void)
{
    struct member mb[3] = {{0}};
    int lfd;
    double until;

    new_endpoint ();
    lfd = hold_endpoint ();
    for (int i = 0; i < 3; i++) {
        mb[i].rank = i;
        mb[i].nnodes = 3;
        mb[i].port = 22000 + i;
        mb[i].timeout = 6;
    }
    mb[1].secret = "another secret";
    start (&mb[1]);
    start (&mb[2]);
    is_int (release_endpoint (lfd, 2), 2, "wrong key: 2 members lost the election");
    start (&mb[0]);
    until = mono_now () + WAIT_S;
    finish (&mb[1], until);
    ok (!mb[1].ok && strstr (mb[1].out, "node rank 1: the JOIN's MAC does not verify") &&
            strstr (mb[1].out, ep),
        "wrong key: node rank 1 is refused, naming the endpoint (%s)",
        mb[1].out);
    ok (mb[1].elapsed > 0 && mb[1].elapsed < 5.0,
        "wrong key: refused at once, not at the timeout (%.2f s)",
        mb[1].elapsed);
    for (int i = 0; i <= 2; i += 2) {
        finish (&mb[i], until);
        ok (!mb[i].ok && strstr (mb[i].out,
                                 "2 of 3 nodes joined within 6 s (missing "
                                 "node ranks: 1)"),
            "wrong key: node rank %d times out naming node rank 1 (%s)",
            i,
            mb[i].out);
    }
}

/* Two members say --node-rank 1; node rank 2 comes once one was refused. */
static void case_duplicate (void)
{
    struct member mb[4] = {{0}};
    int lfd, loser, winner, nok = 0;
    double until;

    new_endpoint ();
    lfd = hold_endpoint ();
    for (int i = 0; i < 4; i++) {
        mb[i].nnodes = 3;
        mb[i].port = 23000 + i;
    }
    mb[0].rank = 0;
    mb[1].rank = 1;
    mb[2].rank = 1; /* the duplicate */
    mb[3].rank = 2;
    start (&mb[1]);
    start (&mb[2]);
    is_int (
        release_endpoint (lfd, 2), 2, "duplicate: both node ranks 1 lost the election");
    start (&mb[0]);
    until = mono_now () + WAIT_S;
    loser = finish_any (&mb[1], 2, until);
    ok (loser >= 0 && !mb[1 + loser].ok &&
            strstr (mb[1 + loser].out, "node rank 1 already joined as 127.0.0.1:2300") &&
            strstr (mb[1 + loser].out, "two members with --node-rank 1?"),
        "duplicate: the second node rank 1 is refused (%s)",
        loser >= 0 ? mb[1 + loser].out : "none finished");
    if (loser < 0) {
        for (int i = 0; i < 4; i++)
            finish (&mb[i], 0); /* kills those still running */
        return;
    }
    winner = 1 + !loser;
    start (&mb[3]);
    for (int i = 0; i < 4; i++) {
        finish (&mb[i], until);
        nok += mb[i].ok;
    }
    is_int (nok, 3, "duplicate: the other three joined");
    {
        struct member sel[3] = {mb[0], mb[winner], mb[3]};
        want_list (sel, 3, sel, 3, "duplicate");
    }
}

/* Node rank 2 never comes; a member with another --nnodes is refused; a
 * silent connection is dropped before the timeout. */
static void case_timeout (void)
{
    struct member mb[3] = {{0}};
    uint8_t buf[64];
    int lfd, silent, eof;
    double until, t0;

    new_endpoint ();
    lfd = hold_endpoint ();
    mb[0] = (struct member){.rank = 0, .nnodes = 3, .port = 24000, .timeout = 10};
    mb[1] = (struct member){.rank = 1, .nnodes = 3, .port = 24001, .timeout = 10};
    mb[2] = (struct member){.rank = 4, .nnodes = 5, .port = 24004, .timeout = 10};
    start (&mb[1]);
    is_int (release_endpoint (lfd, 1), 1, "timeout: node rank 1 lost the election");
    start (&mb[0]);
    until = mono_now () + WAIT_S;
    silent = connect_ep ();
    t0 = mono_now ();
    start (&mb[2]);
    finish (&mb[2], until);
    ok (!mb[2].ok && strstr (mb[2].out,
                             "node rank 4 says --nnodes 5; the endpoint's "
                             "server has 3"),
        "timeout: a member with --nnodes 5 is refused (%s)",
        mb[2].out);
    (void)read_until_eof (silent, buf, sizeof (buf), until, &eof);
    ok (eof && mono_now () - t0 < 9.0,
        "timeout: a silent connection is dropped after %.0f s (%.1f s), before the "
        "timeout",
        RDZV_IDLE_S,
        mono_now () - t0);
    close (silent);
    for (int i = 0; i < 2; i++) {
        finish (&mb[i], until);
        ok (!mb[i].ok && strstr (mb[i].out, ep) &&
                strstr (mb[i].out,
                        "2 of 3 nodes joined within 10 s (missing node "
                        "ranks: 2)"),
            "timeout: node rank %d fails naming the missing node rank (%s)",
            i,
            mb[i].out);
        ok (mb[i].elapsed < 10 + RDZV_GRACE_S,
            "timeout: node rank %d within its bound",
            i);
    }
}

/* The test as a member, by hand: connect, JOIN as rank (RDZV_RANK_ANY:
 * none) of --nnodes nnodes with address addr, read the answer into buf
 * (up to size); *ns and *nc get the connection's nonces.  Returns the
 * socket (kept open: no ACK yet), the answer's length in *len. */
static int raw_join (uint32_t rank,
                     uint32_t nnodes,
                     const char *addr,
                     uint8_t *kr,
                     uint8_t *ns,
                     uint8_t *nc,
                     uint8_t *buf,
                     size_t size,
                     size_t *len)
{
    struct rdzv_join j = {.rank = rank,
                          .nnodes = nnodes,
                          .addr = (const uint8_t *)addr,
                          .addr_len = strlen (addr)};
    uint8_t hello[RDZV_HELLO_SIZE], join[RDZV_JOIN_MAX];
    int fd = connect_ep (), eof;
    size_t n, jl;

    n = read_until_eof (fd, hello, sizeof (hello), mono_now () + WAIT_S, &eof);
    if (n != sizeof (hello) || rdzv_hello_decode (hello, n, ns, NULL) < 0)
        diag ("raw_join: no HELLO (%zu bytes)", n);
    memset (nc, 0x3c, RDZV_NONCE);
    memcpy (j.nonce, nc, RDZV_NONCE);
    jl = rdzv_join_encode (kr, ns, &j, join);
    if (write (fd, join, jl) < 0)
        perror ("write");
    /* the answer: a LIST or a FAIL, whole (the server closes after a FAIL;
     * a LIST's length comes from its header) */
    *len = 0;
    while (*len < size) {
        size_t need;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t r;

        if (rdzv_msg_need (buf,
                           *len,
                           buf[4] == RDZV_FAIL || buf[4] == RDZV_ADMIT ? buf[4]
                                                                       : RDZV_LIST,
                           RDZV_NODES_MAX,
                           &need,
                           NULL) == 0 &&
            *len >= RDZV_HDR && need <= *len)
            break;
        if (poll (&pfd, 1, (int)(WAIT_S * 1000)) <= 0 ||
            (r = read (fd, buf + *len, size - *len)) <= 0)
            break;
        *len += (size_t)r;
    }
    return fd;
}

/* --nnodes 2:4 with a last call of 1 s: node ranks 0, 1 and 2 come (2 is
 * the test, by hand, slow to acknowledge), 3 does not: the job starts
 * with three after the last call, in node-rank order; node rank 3,
 * coming while the server still serves, is refused; once the server is
 * gone, a late member wins the election itself and waits for MIN in
 * vain (nothing of a started job stays at the endpoint). */
static void case_range (void)
{
    struct member mb[4] = {{0}};
    uint8_t key[32], kr[RDZV_KEY], ns[RDZV_NONCE], nc[RDZV_NONCE], buf[4096],
        ack[RDZV_ACK_SIZE];
    char **addrs = NULL;
    uint32_t nl = 0;
    size_t len = 0;
    double until;
    int fd, nok = 0;

    new_endpoint ();
    key_of ("the job's secret", key);
    rdzv_key (key, kr);
    for (int i = 0; i < 4; i++)
        mb[i] = (struct member){.rank = i,
                                .nnodes = 4,
                                .nmin = 2,
                                .last_call = 1.0,
                                .port = 27000 + i,
                                .timeout = 20};
    start (&mb[0]);
    start (&mb[1]);
    fd = raw_join (2, 4, "127.0.0.1:27002", kr, ns, nc, buf, sizeof (buf), &len);
    ok (len > RDZV_HDR && buf[4] == RDZV_LIST &&
            rdzv_list_decode (kr, nc, buf, len, 4, &nl, &addrs, NULL) == 0 && nl == 3 &&
            !strcmp (addrs[0], "127.0.0.1:27000") &&
            !strcmp (addrs[1], "127.0.0.1:27001") &&
            !strcmp (addrs[2], "127.0.0.1:27002"),
        "range 2:4: after the last call the list names 3 nodes, in node-rank order "
        "(%u)",
        nl);
    rdzv_addrs_free (addrs, nl);
    mb[3].timeout = 4;
    start (&mb[3]);
    until = mono_now () + WAIT_S;
    finish (&mb[3], until);
    ok (!mb[3].ok && strstr (mb[3].out,
                             "the job started with 3 of at most 4 nodes without node "
                             "rank 3: this job takes no node after its start"),
        "range 2:4: node rank 3, late, is refused while the server serves (%s)",
        mb[3].out);
    rdzv_ack_encode (kr, ns, nc, 2, ack);
    if (write (fd, ack, sizeof (ack)) < 0)
        perror ("write");
    for (int i = 0; i < 2; i++) {
        finish (&mb[i], until);
        nok += mb[i].ok && mb[i].index == i && mb[i].elapsed >= 0.9;
        if (!mb[i].ok)
            diag ("node rank %d: %s", i, mb[i].out);
    }
    is_int (nok,
            2,
            "range 2:4: node ranks 0 and 1 got the job of 3, in their places, "
            "after the last call");
    nok = 0;
    for (int i = 0; i < 2; i++)
        nok +=
            !strncmp (mb[i].out,
                      "OK 127.0.0.1:27000 127.0.0.1:27001 127.0.0.1:27002 T=",
                      strlen ("OK 127.0.0.1:27000 127.0.0.1:27001 127.0.0.1:27002 T="));
    is_int (nok, 2, "range 2:4: both have the list of the three, in node-rank order");
    close (fd);
    mb[3] =
        (struct member){.rank = 3, .nnodes = 4, .nmin = 2, .port = 27003, .timeout = 2};
    start (&mb[3]);
    finish (&mb[3], mono_now () + WAIT_S);
    ok (!mb[3].ok && strstr (mb[3].out,
                             "1 node joined within 2 s, fewer than the 2 that --nnodes "
                             "2:4 asks for at least"),
        "range 2:4: once the job started and the server is gone, a late member "
        "serves alone and fails at its timeout (%s)",
        mb[3].out);
}

/* Three members without --node-rank: each gets a place, the same list. */
static void case_any (void)
{
    struct member mb[3] = {{0}};
    double until = mono_now () + WAIT_S;
    int nok = 0, seen[3] = {0}, distinct = 1;
    char want[256];

    new_endpoint ();
    for (int i = 0; i < 3; i++) {
        mb[i] =
            (struct member){.rank = -1, .nnodes = 3, .port = 27100 + i, .timeout = 20};
        start (&mb[i]);
    }
    for (int i = 0; i < 3; i++) {
        finish (&mb[i], until);
        nok += mb[i].ok;
        if (!mb[i].ok)
            diag ("member %d: %s", i, mb[i].out);
        if (mb[i].index < 0 || mb[i].index > 2 || seen[mb[i].index]++)
            distinct = 0;
    }
    is_int (nok, 3, "no --node-rank: all three joined");
    ok (distinct, "no --node-rank: each has its own place (0, 1, 2)");
    /* the list: member at place k is at k */
    want[0] = '\0';
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++)
            if (mb[i].index == k)
                snprintf (want + strlen (want),
                          sizeof (want) - strlen (want),
                          " 127.0.0.1:%d",
                          mb[i].port);
    for (int i = 0; i < 3; i++)
        if (!mb[i].ok || strncmp (mb[i].out + 2, want, strlen (want)))
            distinct = 0;
    ok (distinct, "no --node-rank: every member has the same list, each at its place");
}

/* --nnodes 3:4 and two come: the timeout names MIN.  A member whose MIN
 * is larger than the serving one's refuses the job it started. */
static void case_min (void)
{
    struct member mb[2] = {{0}};
    double until;

    new_endpoint ();
    for (int i = 0; i < 2; i++) {
        mb[i] = (struct member){.rank = i,
                                .nnodes = 4,
                                .nmin = 3,
                                .last_call = 0.5,
                                .port = 27200 + i,
                                .timeout = 3};
        start (&mb[i]);
    }
    until = mono_now () + WAIT_S;
    for (int i = 0; i < 2; i++) {
        finish (&mb[i], until);
        ok (!mb[i].ok && strstr (mb[i].out,
                                 "2 nodes joined within 3 s, fewer than the 3 that "
                                 "--nnodes 3:4 asks for at least"),
            "min 3:4 with 2: node rank %d fails naming MIN (%s)",
            i,
            mb[i].out);
    }

    new_endpoint ();
    mb[0] = (struct member){.rank = 0,
                            .nnodes = 3,
                            .nmin = 2,
                            .last_call = 0.5,
                            .port = 27300,
                            .timeout = 20};
    start (&mb[0]); /* the server: it binds before the other starts */
    mb[1] =
        (struct member){.rank = 1, .nnodes = 3, .nmin = 3, .port = 27301, .timeout = 20};
    {
        int fd = -1;
        /* wait until node rank 0 serves: a connection is accepted */
        fd = connect_ep ();
        close (fd);
    }
    start (&mb[1]);
    until = mono_now () + WAIT_S;
    finish (&mb[0], until);
    finish (&mb[1], until);
    ok (mb[0].ok && mb[0].index == 0 &&
            strstr (mb[0].out, "OK 127.0.0.1:27300 127.0.0.1:27301 T="),
        "min mismatch: the server (2:3) starts with two (%s)",
        mb[0].out);
    ok (!mb[1].ok && strstr (mb[1].out,
                             "the job started with 2 nodes, fewer than the 3 that this "
                             "member's --nnodes 3:3 asks for at least"),
        "min mismatch: the member with 3:3 refuses the job of two, saying why (%s)",
        mb[1].out);
    ok (mb[0].elapsed < 10,
        "min mismatch: the server did not wait for an ACK (%.1f s)",
        mb[0].elapsed);
}

/* No member can serve (the test binds the endpoint, listening nowhere). */
static void case_no_server (void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct member mb = {.rank = 1, .nnodes = 2, .port = 25001, .timeout = 2};
    int fd;

    new_endpoint ();
    fd = socket (AF_INET, SOCK_STREAM, 0);
    sa.sin_port = htons ((uint16_t)ep_port);
    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0)
        perror ("bind");
    start (&mb);
    finish (&mb, mono_now () + WAIT_S);
    ok (!mb.ok && strstr (mb.out, "no rendezvous server answered within 2 s") &&
            strstr (mb.out, "Connection refused"),
        "no server: a clear error at the timeout (%s)",
        mb.out);
    close (fd);
}

/* ---- the wire format, without sockets ---------------------------------- */

static uint8_t pkr[RDZV_KEY], pns[RDZV_NONCE], pnc[RDZV_NONCE];

static size_t a_join (uint32_t rank, uint32_t nnodes, const char *addr, uint8_t *out)
{
    struct rdzv_join j = {
        .rank = rank,
        .nnodes = nnodes,
        .addr = (const uint8_t *)addr,
        .addr_len = strlen (addr),
    };

    memcpy (j.nonce, pnc, RDZV_NONCE);
    return rdzv_join_encode (pkr, pns, &j, out);
}

static size_t a_list (char *const *addr, uint32_t n, const uint8_t *nc, uint8_t *out)
{
    uint8_t digest[32], *body = NULL;
    size_t size = 0;

    if (rdzv_list_encode (addr, n, out, &body, &size, digest, NULL) < 0)
        return 0;
    memcpy (out + RDZV_LIST_FIXED, body, size);
    rdzv_list_mac (pkr, nc, digest, out + RDZV_LIST_FIXED + size);
    free (body);
    return RDZV_LIST_FIXED + size + RDZV_MAC;
}

/* an ADMIT of a to the client whose nonce is nc */
static size_t an_admit (const struct rdzv_admission *a, const uint8_t *nc, uint8_t *out)
{
    uint8_t *body = NULL;
    size_t size = 0;

    if (rdzv_admit_encode (pkr, nc, a, out, &body, &size, out + 1500, NULL) < 0)
        return 0;
    memcpy (out + RDZV_ADMIT_FIXED, body, size);
    memmove (out + RDZV_ADMIT_FIXED + size, out + 1500, RDZV_MAC);
    free (body);
    return RDZV_ADMIT_FIXED + size + RDZV_MAC;
}

/* rc < 0 with a reason that contains want */
static void refused (int rc, const elastic_error_t *e, const char *want, const char *what)
{
    if (!ok (rc < 0 && strstr (e->text, want), "proto: %s: refused (%s)", what, e->text))
        diag ("rc %d, want '%s'", rc, want);
}

static void case_proto_roundtrip (void)
{
    char *three[] = {"10.0.0.1:29500", "10.0.0.2:29500", "[fe80::1%eth0]:29502"};
    uint8_t m[2048], n[RDZV_NONCE];
    elastic_error_t e = {{0}};
    struct rdzv_join j;
    char **addrs = NULL, text[RDZV_FAIL_TEXT + 1];
    size_t len, need;
    uint32_t nl = 0;

    rdzv_hello_encode (pns, m);
    ok (rdzv_hello_decode (m, RDZV_HELLO_SIZE, n, &e) == 0 &&
            !memcmp (n, pns, RDZV_NONCE),
        "proto: a HELLO decodes to its nonce (%s)",
        e.text);
    len = a_join (2, 3, "[fe80::1%eth0]:29502", m);
    is_int ((int)len, 47 + 20 + 32, "proto: a JOIN is 47 bytes, the address, the MAC");
    ok (rdzv_join_decode (pkr, pns, m, len, &j, &e) == 0 && j.rank == 2 &&
            j.nnodes == 3 && j.addr_len == 20 &&
            !memcmp (j.addr, "[fe80::1%eth0]:29502", 20) &&
            !memcmp (j.nonce, pnc, RDZV_NONCE),
        "proto: the JOIN decodes to what was encoded (%s)",
        e.text);
    /* a reader's steps: the header, the fixed part, the whole */
    ok (rdzv_msg_need (m, 0, RDZV_JOIN, 0, &need, &e) == 0 && need == 5 &&
            rdzv_msg_need (m, 5, RDZV_JOIN, 0, &need, &e) == 0 && need == 47 &&
            rdzv_msg_need (m, 47, RDZV_JOIN, 0, &need, &e) == 0 && need == len,
        "proto: a reader of a JOIN asks for 5, 47, then %zu bytes",
        len);
    len = a_list (three, 3, pnc, m);
    ok (rdzv_list_decode (pkr, pnc, m, len, 3, &nl, &addrs, &e) == 0 && nl == 3 &&
            !strcmp (addrs[0], three[0]) && !strcmp (addrs[1], three[1]) &&
            !strcmp (addrs[2], three[2]),
        "proto: a LIST decodes to its 3 addresses, in order (%s)",
        e.text);
    rdzv_addrs_free (addrs, 3);
    ok (rdzv_list_decode (pkr, pnc, m, len, 5, &nl, &addrs, &e) == 0 && nl == 3,
        "proto: a LIST of 3 nodes is a job of --nnodes 3:5 (%s)",
        e.text);
    rdzv_addrs_free (addrs, nl);
    len = a_join (RDZV_RANK_ANY, 5, "10.0.0.9:1", m);
    ok (rdzv_join_decode (pkr, pns, m, len, &j, &e) == 0 && j.rank == RDZV_RANK_ANY,
        "proto: a JOIN without a node rank decodes (%s)",
        e.text);
    m[len - 1] ^= 1;
    refused (rdzv_join_decode (pkr, pns, m, len, &j, &e),
             &e,
             "a node without --node-rank: the JOIN's MAC does not verify",
             "a JOIN without a node rank, its MAC broken");
    rdzv_ack_encode (pkr, pns, pnc, 1, m);
    ok (rdzv_ack_decode (pkr, pns, pnc, 1, m, RDZV_ACK_SIZE, &e) == 0,
        "proto: an ACK verifies (%s)",
        e.text);
    len = rdzv_fail_encode ("bad\x01 news\n", m);
    ok (rdzv_fail_decode (m, len, text, &e) == 0 && !strcmp (text, "bad? news?"),
        "proto: a FAIL decodes, control bytes made '?' (%s)",
        text);
}

static void case_proto_refusals (void)
{
    char *three[] = {"10.0.0.1:29500", "10.0.0.2:29500", "10.0.0.3:29500"};
    char *noport[] = {"10.0.0.1:29500", "10.0.0.2", "10.0.0.3:29500"};
    uint8_t m[2048], other[RDZV_KEY], n[RDZV_NONCE], big[400];
    elastic_error_t e = {{0}};
    struct rdzv_join j;
    char **addrs = NULL, text[RDZV_FAIL_TEXT + 1], host[RDZV_ADDR_MAX + 1];
    size_t len, need;
    uint32_t nl = 0;
    int cut_ok = 1, rc;

    /* truncated at every length */
    len = a_join (1, 3, "10.0.0.2:29500", m);
    for (size_t i = 0; i < len; i++) {
        e.text[0] = '\0';
        if (rdzv_join_decode (pkr, pns, m, i, &j, &e) == 0 || !e.text[0])
            cut_ok = 0;
    }
    ok (cut_ok,
        "proto: a JOIN cut at any of its %zu lengths is refused with a reason",
        len);
    e.text[0] = '\0';
    refused (rdzv_join_decode (pkr, pns, m, len - 1, &j, &e),
             &e,
             "a JOIN of 92 bytes is cut short (expected 93)",
             "a JOIN one byte short");
    refused (rdzv_join_decode (pkr, pns, m, 3, &j, &e),
             &e,
             "shorter than its 5-byte header",
             "3 bytes");
    /* a length that is not its own */
    m[len] = 0;
    refused (rdzv_join_decode (pkr, pns, m, len + 1, &j, &e),
             &e,
             "has 1 bytes too many",
             "a JOIN with a byte more");
    /* another version */
    m[3] = 2;
    refused (rdzv_join_decode (pkr, pns, m, len, &j, &e),
             &e,
             "rendezvous version 2 (this member speaks 1)",
             "a JOIN of version 2");
    ok (rdzv_msg_need (m, 5, RDZV_JOIN, 0, &need, &e) == -1,
        "proto: a reader drops version 2 at its header");
    m[3] = RDZV_VERSION;
    memcpy (m, "ERY", 3);
    refused (rdzv_join_decode (pkr, pns, m, len, &j, &e), &e, "no \"ERZ\"", "not ERZ");
    /* bad authentication: another key, another connection's nonce */
    len = a_join (1, 3, "10.0.0.2:29500", m);
    memset (other, 7, sizeof (other));
    refused (rdzv_join_decode (other, pns, m, len, &j, &e),
             &e,
             "node rank 1: the JOIN's MAC does not verify",
             "a JOIN under another key");
    memset (n, 0x11, sizeof (n));
    refused (rdzv_join_decode (pkr, n, m, len, &j, &e),
             &e,
             "the JOIN's MAC does not verify",
             "a JOIN replayed on another connection");
    m[RDZV_HDR + 3] = 2; /* the rank, after the MAC was made */
    refused (rdzv_join_decode (pkr, pns, m, len, &j, &e),
             &e,
             "node rank 2: the JOIN's MAC does not verify",
             "a JOIN whose rank was changed");
    /* an address too long: refused by the reader (the server says why) */
    memset (big, 'a', sizeof (big));
    big[sizeof (big) - 1] = '\0';
    is_int (
        (int)a_join (1, 3, (char *)big, m), 0, "proto: no JOIN is encoded for 399 bytes");
    len = a_join (1, 3, "10.0.0.2:29500", m);
    m[RDZV_JOIN_FIXED - 2] = 301 >> 8;
    m[RDZV_JOIN_FIXED - 1] = 301 & 0xff;
    rc = rdzv_msg_need (m, RDZV_JOIN_FIXED, RDZV_JOIN, 0, &need, &e);
    ok (rc == -2 && strstr (e.text, "a JOIN with an address of 301 bytes (at most 300)"),
        "proto: a JOIN with a 301-byte address is refused with a reason (%d: %s)",
        rc,
        e.text);
    /* the address is the caller's to check */
    len = a_join (1, 3, "10.0.0.2", m);
    ok (rdzv_join_decode (pkr, pns, m, len, &j, &e) == 0,
        "proto: a JOIN without a port decodes (the server checks its address)");
    refused (rdzv_addr_check ("node rank 1", j.addr, j.addr_len, host, &e),
             &e,
             "node rank 1 '10.0.0.2' has no port",
             "an address without a port");
    refused (rdzv_addr_check ("node rank 1", (const uint8_t *)"a\tb:1", 5, host, &e),
             &e,
             "address has a byte 0x09",
             "an address with a tab");
    refused (rdzv_addr_check ("x", (const uint8_t *)"", 0, host, &e),
             &e,
             "address of 0 bytes",
             "an empty address");

    /* the LIST */
    len = a_list (three, 3, pnc, m);
    refused (rdzv_list_decode (pkr, pnc, m, len, 2, &nl, &addrs, &e),
             &e,
             "the server's list has 3 nodes (at most 2)",
             "a LIST of 3 nodes for --nnodes 2");
    refused (rdzv_list_decode (pkr, n, m, len, 3, &nl, &addrs, &e),
             &e,
             "the list's MAC does not verify",
             "a LIST for another client's nonce");
    refused (rdzv_list_decode (other, pnc, m, len, 3, &nl, &addrs, &e),
             &e,
             "the list's MAC does not verify",
             "a LIST under another key");
    refused (rdzv_list_decode (pkr, pnc, m, len - 1, 3, &nl, &addrs, &e),
             &e,
             "is cut short",
             "a LIST one byte short");
    m[RDZV_HDR + 4] = 0x7f; /* size: more than 3 addresses can take */
    refused (rdzv_list_decode (pkr, pnc, m, len, 3, &nl, &addrs, &e),
             &e,
             "the server's list has a bad size",
             "a LIST of a size 3 addresses cannot take");
    len = a_list (noport, 3, pnc, m);
    refused (rdzv_list_decode (pkr, pnc, m, len, 3, &nl, &addrs, &e),
             &e,
             "node rank 1 '10.0.0.2' has no port",
             "a LIST with an address without a port (MAC good)");
    /* a signed LIST whose entries do not fill its size, or overrun it */
    {
        uint8_t digest[32];
        size_t size;

        len = a_list (three, 3, pnc, m);
        size = len - RDZV_LIST_FIXED - RDZV_MAC;
        m[RDZV_HDR + 7] = (uint8_t)(size + 2); /* two more bytes of body */
        memmove (m + RDZV_LIST_FIXED + size + 2, m + RDZV_LIST_FIXED + size, RDZV_MAC);
        m[RDZV_LIST_FIXED + size] = 0;
        m[RDZV_LIST_FIXED + size + 1] = 0;
        rdzv_list_digest (m, m + RDZV_LIST_FIXED, size + 2, digest);
        rdzv_list_mac (pkr, pnc, digest, m + RDZV_LIST_FIXED + size + 2);
        refused (rdzv_list_decode (pkr, pnc, m, len + 2, 3, &nl, &addrs, &e),
                 &e,
                 "the server's list has 2 bytes too many",
                 "a signed LIST with bytes left over");
        len = a_list (three, 3, pnc, m);
        m[RDZV_LIST_FIXED + 2 * 16 + 1] = 200; /* node rank 2's length */
        rdzv_list_digest (m, m + RDZV_LIST_FIXED, size, digest);
        rdzv_list_mac (pkr, pnc, digest, m + RDZV_LIST_FIXED + size);
        refused (rdzv_list_decode (pkr, pnc, m, len, 3, &nl, &addrs, &e),
                 &e,
                 "the server's list is cut short at node rank 2",
                 "a signed LIST whose last address overruns it");
    }

    /* the ACK */
    rdzv_ack_encode (pkr, pns, pnc, 1, m);
    refused (rdzv_ack_decode (pkr, pns, pnc, 2, m, RDZV_ACK_SIZE, &e),
             &e,
             "an ACK of node rank 1 (expected 2)",
             "an ACK of another rank");
    refused (rdzv_ack_decode (pkr, n, pnc, 1, m, RDZV_ACK_SIZE, &e),
             &e,
             "the ACK's MAC does not verify",
             "an ACK replayed on another connection");

    /* the FAIL */
    len = rdzv_fail_encode ("why", m);
    m[RDZV_HDR] = 1; /* 256 bytes of text */
    ok (rdzv_msg_need (m, len, RDZV_FAIL, 0, &need, &e) == -2 &&
            strstr (e.text, "a FAIL text of 259 bytes (at most 255)"),
        "proto: a FAIL text of 259 bytes is refused (%s)",
        e.text);
    refused (rdzv_fail_decode (m, len, text, &e), &e, "at most 255", "a long FAIL");

    /* what a connection may send in its state: nothing, or the type expected */
    rdzv_hello_encode (pns, m);
    refused (rdzv_msg_need (m, RDZV_HDR, 0, 0, &need, &e),
             &e,
             "a rendezvous HELLO (type 1) where no message was expected",
             "a message from a joined member");
    refused (rdzv_msg_need (m, RDZV_HDR, RDZV_JOIN, 0, &need, &e),
             &e,
             "where JOIN was expected",
             "a HELLO where a JOIN is expected");
    m[4] = 9;
    refused (rdzv_hello_decode (m, RDZV_HELLO_SIZE, n, &e),
             &e,
             "type 9",
             "a message of an unknown type");
    /* a peer that says nothing: nothing decided, the header asked for */
    ok (rdzv_msg_need (m, 0, RDZV_JOIN, 0, &need, &e) == 0 && need == RDZV_HDR,
        "proto: no bytes yet: the reader waits for the %d-byte header",
        RDZV_HDR);
}

/* ADMIT: round trip and refusals */
static void case_proto_admit (void)
{
    uint8_t states[6] = {RDZV_SLOT_LIVE,
                         RDZV_SLOT_LOST,
                         RDZV_SLOT_LIVE,
                         RDZV_SLOT_LIVE,
                         RDZV_SLOT_ABSENT,
                         RDZV_SLOT_ABSENT};
    char *addrs[6] = {"10.0.0.1:29500", NULL, "10.0.0.3:29500", "10.0.0.9:7", NULL, NULL};
    struct rdzv_admission a = {
        .slot = 3, .n = 6, .base = 3, .epoch = 2, .states = states, .addrs = addrs};
    struct rdzv_admission d = {0};
    uint8_t m[2048], other[RDZV_NONCE], *body = NULL;
    elastic_error_t e = {{0}};
    size_t len = an_admit (&a, pnc, m), need = 0, size;
    int same = 1;

    ok (len > 0 && rdzv_admit_decode (pkr, pnc, m, len, 8, &d, &e) == 0,
        "proto: an ADMIT decodes (%s)",
        e.text);
    for (int i = 0; i < 6 && d.states; i++)
        same &= d.states[i] == states[i] &&
                (addrs[i] ? d.addrs[i] && !strcmp (d.addrs[i], addrs[i]) : !d.addrs[i]);
    ok (d.slot == 3 && d.n == 6 && d.base == 3 && d.epoch == 2 && same,
        "proto: to its slot, slot count, base, epoch, states and live addresses");
    rdzv_admission_free (&d);
    ok (rdzv_msg_need (m, 5, RDZV_ADMIT, 8, &need, &e) == 0 && need == RDZV_ADMIT_FIXED &&
            rdzv_msg_need (m, RDZV_ADMIT_FIXED, RDZV_ADMIT, 8, &need, &e) == 0 &&
            need == len,
        "proto: a reader of an ADMIT asks for 25, then %zu bytes",
        len);
    refused (rdzv_admit_decode (pkr, pnc, m, len, 5, &d, &e),
             &e,
             "the server's admission has 6 slots (1..5)",
             "an ADMIT of more slots than this member has");
    memset (other, 0x11, sizeof (other));
    refused (rdzv_admit_decode (pkr, other, m, len, 8, &d, &e),
             &e,
             "the admission's MAC does not verify",
             "an ADMIT for another connection");
    refused (rdzv_admit_decode (pkr, pnc, m, len - 1, 8, &d, &e),
             &e,
             "is cut short",
             "an ADMIT one byte short");
    m[RDZV_HDR + 3] = 2; /* slot 2: live, but a member from the start */
    rdzv_admit_mac (pkr, pnc, m, len - RDZV_MAC, m + len - RDZV_MAC);
    refused (rdzv_admit_decode (pkr, pnc, m, len, 8, &d, &e),
             &e,
             "gives slot 2 of 6 (members at the start: 3)",
             "an ADMIT to a slot below its base");
    m[RDZV_HDR + 3] = 4; /* slot 4: absent */
    rdzv_admit_mac (pkr, pnc, m, len - RDZV_MAC, m + len - RDZV_MAC);
    refused (rdzv_admit_decode (pkr, pnc, m, len, 8, &d, &e),
             &e,
             "this member's slot 4 is not live",
             "an ADMIT to a slot that is not live");
    addrs[2] = NULL;
    refused (rdzv_admit_encode (pkr, pnc, &a, m, &body, &size, m + 1500, &e),
             &e,
             "slot 2: state 0, address of 0 bytes",
             "encoding a live slot without an address");
    free (body);
}

static void case_proto (void)
{
    uint8_t key[RDZV_KEY];

    if (mesh_auth_init (NULL) < 0)
        bail_out ("mesh_auth_init");
    key_of ("the job's secret", key);
    rdzv_key (key, pkr);
    memset (pns, 0xa5, sizeof (pns));
    memset (pnc, 0xc3, sizeof (pnc));
    case_proto_roundtrip ();
    case_proto_refusals ();
    case_proto_admit ();
}

/* A server of another version, then one that accepts and says nothing:
 * the test holds the endpoint and answers the member itself. */
static void case_foreign_server (void)
{
    struct member mb = {.rank = 1, .nnodes = 2, .port = 25101, .timeout = 3};
    uint8_t hello[RDZV_HELLO_SIZE] = "ERZ\x02\x01";
    struct pollfd pfd;
    int lfd, fd = -1;

    new_endpoint ();
    lfd = hold_endpoint ();
    start (&mb);
    pfd = (struct pollfd){.fd = lfd, .events = POLLIN};
    if (poll (&pfd, 1, (int)(WAIT_S * 1000)) > 0 &&
        (fd = accept (lfd, NULL, NULL)) >= 0 && write (fd, hello, sizeof (hello)) < 0)
        perror ("write");
    finish (&mb, mono_now () + WAIT_S);
    ok (!mb.ok && strstr (mb.out, "not an elastic rendezvous server (version 1) there") &&
            strstr (mb.out, "rendezvous version 2 (this member speaks 1)") &&
            mb.elapsed < 2.0,
        "a server of version 2: refused at once, saying so (%s)",
        mb.out);
    if (fd >= 0)
        close (fd);
    close (lfd);

    mb = (struct member){.rank = 1, .nnodes = 2, .port = 25102, .timeout = 2};
    new_endpoint ();
    lfd = hold_endpoint ();
    start (&mb);
    fd = -1;
    pfd = (struct pollfd){.fd = lfd, .events = POLLIN};
    if (poll (&pfd, 1, (int)(WAIT_S * 1000)) > 0)
        fd = accept (lfd, NULL, NULL); /* and never a HELLO */
    finish (&mb, mono_now () + WAIT_S);
    ok (!mb.ok && strstr (mb.out, "could not join within 2 s") &&
            strstr (mb.out, "no HELLO from the server"),
        "a server that says nothing: the member fails at its timeout (%s)",
        mb.out);
    if (fd >= 0)
        close (fd);
    close (lfd);
}

/* One node, in this process: it serves itself; self_addr NULL finds
 * 127.0.0.1 toward a 127.0.0.1 endpoint. */
static void case_single (void)
{
    struct jobmap *m;
    elastic_error_t err = {{0}};
    uint8_t key[32];
    char **addrs = NULL, want[64];
    int rc;

    struct rdzv_tcp_opts o = {.key = key, .self_port = 26000, .timeout = 10};

    new_endpoint ();
    m = torchrun_map (1, 0, ep);
    key_of ("the job's secret", key);
    rc = rdzv_tcp_exchange (&m, &o, &addrs, NULL, &err);
    ok (rc == 0, "single: one member serves itself (%s)", rc ? err.text : "ok");
    if (rc == 0) {
        is_str (addrs[0], "127.0.0.1:26000", "single: self_addr NULL found 127.0.0.1");
        is_str (m->node[0].name, "127.0.0.1", "single: the map's host is set");
        rdzv_tcp_addrs_free (addrs, 1);
    }
    snprintf (want, sizeof (want), "mesh port 0 is not accepted");
    o = (struct rdzv_tcp_opts){.key = key, .self_addr = "127.0.0.1", .timeout = 10};
    rc = rdzv_tcp_exchange (&m, &o, &addrs, NULL, &err);
    ok (rc < 0 && strstr (err.text, want), "bad port: %s", err.text);
    o.self_port = 1;
    o.self_addr = "a b";
    rc = rdzv_tcp_exchange (&m, &o, &addrs, NULL, &err);
    ok (rc < 0 && strstr (err.text, "this member's mesh address"),
        "bad address: %s",
        err.text);
    o.self_addr = "127.0.0.1";
    o.timeout = -1;
    rc = rdzv_tcp_exchange (&m, &o, &addrs, NULL, &err);
    ok (rc < 0 && strstr (err.text, "timeout -1 is not accepted"),
        "bad timeout: %s",
        err.text);
    o.timeout = 10;
    o.min_nodes = 2;
    rc = rdzv_tcp_exchange (&m, &o, &addrs, NULL, &err);
    ok (rc < 0 && strstr (err.text, "at least 2 nodes of 1 is not accepted"),
        "MIN above MAX: %s",
        err.text);
    o.min_nodes = 0;
    o.last_call = -1;
    rc = rdzv_tcp_exchange (&m, &o, &addrs, NULL, &err);
    ok (rc < 0 && strstr (err.text, "last call -1 is not accepted"),
        "bad last call: %s",
        err.text);
    jobmap_destroy (m);
}

/* the admission function of case_joins: slot base + 1, 2, ...; refuses
 * when admit_refuse is set */
static int admit_refuse, admit_count;
static int
fake_admit (void *arg, const char *addr, struct rdzv_admission *a, char *why, size_t size)
{
    uint32_t n = 8, base = 2, k = base + (uint32_t)admit_count;

    (void)arg;
    if (admit_refuse) {
        snprintf (why, size, "the job is full (a test's refusal)");
        return -1;
    }
    a->slot = k;
    a->n = n;
    a->base = base;
    a->epoch = k - base + 1;
    a->states = calloc (n, 1);
    a->addrs = calloc (n, sizeof (char *));
    for (uint32_t i = 0; i < n && a->states && a->addrs; i++) {
        a->states[i] = i <= k ? RDZV_SLOT_LIVE : RDZV_SLOT_ABSENT;
        if (i < k)
            (void)asprintf (&a->addrs[i], "127.0.0.1:%u", 27300 + i);
    }
    if (a->addrs)
        a->addrs[k] = strdup (addr);
    admit_count++;
    return 0;
}

/* Joins: the test serves (--nnodes 2:3, 8 slots) with a member that came
 * at the start; late nodes are refused, then admitted; the server stops. */
static void case_joins (void)
{
    struct member mb = {
        .rank = 1, .nnodes = 3, .nmin = 2, .port = 27301, .timeout = 20, .slots = 8};
    struct member late = {
        .rank = -1, .nnodes = 3, .port = 27304, .timeout = 20, .slots = 8};
    struct jobmap *m;
    struct rdzv_tcp_opts o = {0};
    struct rdzv_tcp_joins joins = {0};
    elastic_error_t err = {{0}};
    uint8_t key[32], kr[RDZV_KEY], ns[RDZV_NONCE], nc[RDZV_NONCE], buf[4096],
        ack[RDZV_ACK_SIZE];
    struct rdzv_admission a = {0};
    char **addrs = NULL, text[RDZV_FAIL_TEXT + 1];
    size_t len = 0;
    int lfd, fd, rc;

    new_endpoint ();
    m = torchrun_map (3, 0, ep);
    key_of ("the job's secret", key);
    rdzv_key (key, kr);
    /* the member loses the election to the test's hold; the test serves */
    lfd = hold_endpoint ();
    start (&mb);
    release_endpoint (lfd, 1);
    o = (struct rdzv_tcp_opts){.key = key,
                               .self_addr = "127.0.0.1",
                               .self_port = 27300,
                               .timeout = 20,
                               .min_nodes = 2,
                               .last_call = 0.5,
                               .slots = 8};
    rc = rdzv_tcp_exchange (&m, &o, &addrs, &joins, &err);
    ok (rc == 0 && joins.server && joins.base == 2 && !joins.late && m &&
            m->nnodes == 8 && m->node_id == 0 && addrs[1] &&
            !strcmp (addrs[1], "127.0.0.1:27301") && !addrs[2] &&
            joins.slots[1] == RDZV_SLOT_LIVE && joins.slots[2] == RDZV_SLOT_ABSENT,
        "joins: the job starts with 2 nodes in 8 slots, this member serving (%s)",
        rc ? err.text : "ok");
    finish (&mb, mono_now () + WAIT_S);
    ok (mb.ok &&
            !strncmp (
                mb.out,
                "OK 127.0.0.1:27300 127.0.0.1:27301 - - - - - - B=2 L=0 T=",
                strlen ("OK 127.0.0.1:27300 127.0.0.1:27301 - - - - - - B=2 L=0 T=")),
        "joins: the other member has the same 8 slots, 2 live (%s)",
        mb.out);
    /* a late node while nobody admits: refused, saying why */
    fd = raw_join (
        RDZV_RANK_ANY, 3, "127.0.0.1:27302", kr, ns, nc, buf, sizeof (buf), &len);
    ok (len > RDZV_HDR && buf[4] == RDZV_FAIL &&
            rdzv_fail_decode (buf, len, text, NULL) == 0 &&
            strstr (text, "the job is starting (its mesh is not up yet)"),
        "joins: a late node before the mesh admits is refused (%s)",
        len > RDZV_HDR && buf[4] == RDZV_FAIL ? text : "no FAIL");
    close (fd);
    rdzv_tcp_server_set_admit (joins.server, fake_admit, NULL);
    fd = raw_join (
        RDZV_RANK_ANY, 3, "127.0.0.1:27302", kr, ns, nc, buf, sizeof (buf), &len);
    ok (len > RDZV_HDR && buf[4] == RDZV_ADMIT &&
            rdzv_admit_decode (kr, nc, buf, len, 8, &a, &err) == 0 && a.slot == 2 &&
            a.n == 8 && a.base == 2 && !strcmp (a.addrs[2], "127.0.0.1:27302"),
        "joins: a late node is admitted into slot 2 (%s)",
        err.text);
    rdzv_admission_free (&a);
    rdzv_ack_encode (kr, ns, nc, 2, ack);
    if (write (fd, ack, sizeof (ack)) < 0)
        perror ("write");
    close (fd);
    start (&late);
    finish (&late, mono_now () + WAIT_S);
    ok (late.ok && late.index == 3 &&
            strstr (late.out, " 127.0.0.1:27302 127.0.0.1:27304 - - - - B=2 L=1 T="),
        "joins: a member's exchange, late, is admitted into slot 3 (%s)",
        late.out);
    admit_refuse = 1;
    fd = raw_join (
        RDZV_RANK_ANY, 3, "127.0.0.1:27305", kr, ns, nc, buf, sizeof (buf), &len);
    ok (len > RDZV_HDR && buf[4] == RDZV_FAIL &&
            rdzv_fail_decode (buf, len, text, NULL) == 0 &&
            !strcmp (text, "the job is full (a test's refusal)"),
        "joins: a refusal's reason reaches the node (%s)",
        len > RDZV_HDR && buf[4] == RDZV_FAIL ? text : "no FAIL");
    close (fd);
    rdzv_tcp_addrs_free (addrs, m->nnodes);
    rdzv_tcp_joins_free (&joins); /* stops the server */
    ok (joins.server == NULL, "joins: the server stopped");
    jobmap_destroy (m);
}

int main (void)
{
    signal (SIGPIPE, SIG_IGN);
    case_proto ();
    case_single ();
    case_all_join (3, 0, 20000);
    case_all_join (5, 2, 20100);
    case_strangers ();
    case_wrong_key ();
    case_duplicate ();
    case_timeout ();
    case_no_server ();
    case_foreign_server ();
    case_range ();
    case_any ();
    case_min ();
    case_joins ();
    return done_testing ();
}
