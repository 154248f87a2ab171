/* mesh-member - one member of a test mesh on this machine (no MPI, no PMIx)
 *
 *   mesh-member --members N --self I --dir DIR [--timeout S] [--radix K]
 *               [--join-timeout S] [--munge SOCKET]
 *       Listen on 127.0.0.1 (a free port, written to DIR/I.port), wait for
 *       the N port files, join the mesh (key from ELASTIC_MESH_SECRET or
 *       ELASTIC_MESH_SECRET_FILE, job "mesh-test") and print one line per
 *       event on stdout; read commands on stdin, one per line:
 *         fence | bcast TEXT | failed RANK | dmodex MEMBER | live | stats |
 *         cut | uncut (a network cut, mesh_test_cut) | cutin (only what
 *         comes in is cut: mesh_test_cut 2) | quit
 *       Event lines (t= wall-clock milliseconds):
 *         ready I port P | joined t=T | lost M,.. epoch E live L t=T |
 *         fence SEQ ok epoch E members M,.. ms D | fence SEQ error S |
 *         bcast ORIGIN KIND TEXT | rankfailed ORIGIN RANK STATUS NSPACE |
 *         dmodex ok TEXT | dmodex error S | live M,.. epoch E |
 *         fenced t=T REASON
 *       Exits 0 after quit or end of input, 3 after fencing itself.
 *       --munge: authenticate with munge credentials through munged's
 *       SOCKET (MESH_AUTH_MUNGE, job "mesh-test") instead of a secret.
 *
 *       --start K: only members 0..K-1 start (slots K..N-1 absent, joins
 *       possible); --max-live L: admit no one while L are live.  Also:
 *         admit NAME  admit the newcomer whose port is in DIR/NAME.port
 *                     (mesh_admit), write its admission to
 *                     DIR/NAME.admission; says "admitted NAME slot K epoch
 *                     E" or "admit NAME error TEXT"
 *       and the event "join M,.. epoch E live L t=T" (members admitted).
 *
 *   mesh-member --members N --join NAME --dir DIR [as above]
 *       A newcomer: listen on a free port, write it to DIR/NAME.port, say
 *       "listening port P", wait for DIR/NAME.admission (another member's
 *       admit NAME), then join the running mesh in the slot it names
 *       (mesh_config.joining) and go on as a member; --first-fence F:
 *       number its first fence F (the mesh's fences done so far + 1).
 *
 *   mesh-member --members N --self I --ports P0,P1,... [as above, no --dir]
 *       The mesh's candidate ports instead of port files: every member is
 *       at 127.0.0.1 on the first of them it can bind (mesh_config.ports);
 *       "ready I port P" says which.
 *
 *   mesh-member --probe PORT --to I --as J --members N [--silent|--garbage|--version]
 *       A peer that is not a good member: say nothing, send garbage, speak
 *       another protocol version, or (default) try to authenticate to
 *       member I as member J with this environment's secret.  Prints what happened and
 *       exits 0 when the member closed the connection on it (within 30 s).
 *
 *   mesh-member --probe PORT --to I --as J --members N --munge SOCKET
 *               [--cred-replay|--cred-bind|--cred-garbage|--cred-uid|--cred TEXT]
 *               [--job JOB]
 *       A HELLO with a munge credential of this process's uid: (default)
 *       a right one, exit 0 when the member's proof verifies under the
 *       credential's key; --cred-replay: a right one, then the very same
 *       HELLO again on a second connection, exit 0 when that one is closed
 *       without a challenge; --cred-bind: a credential made for member
 *       I+1; --cred-garbage: not a credential; --cred-uid: a right one, to
 *       be run as another uid; --cred TEXT: TEXT as the credential (e.g.
 *       `munge -n` of another uid).  The last four exit 0 when the member
 *       closes the connection without a challenge.  --job: the job the
 *       credential names (default mesh-test, the members').
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "exec/mesh/auth.h"
#include "exec/mesh/mesh.h"
#include "exec/mesh/proto.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static int fence_pipe[2];
static uint32_t self, nmembers;
static struct mesh *mesh;
static const char *dir;

static long long wall_ms (void)
{
    struct timeval tv;
    gettimeofday (&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static double mono (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void say (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static void say (const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock (&out_lock);
    va_start (ap, fmt);
    vprintf (fmt, ap);
    va_end (ap);
    putchar ('\n');
    fflush (stdout);
    pthread_mutex_unlock (&out_lock);
}

/* say "WHAT M,.. epoch E live L t=T" */
static void say_members (
    const char *what, const uint32_t *m, size_t n, uint32_t epoch, uint32_t nlive)
{
    char buf[4096];
    size_t off = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && off < sizeof (buf) - 16; i++)
        off +=
            (size_t)snprintf (buf + off, sizeof (buf) - off, "%s%u", i ? "," : "", m[i]);
    say ("%s %s epoch %u live %u t=%lld", what, buf, epoch, nlive, wall_ms ());
}

static void
on_lost (void *arg, const uint32_t *m, size_t n, uint32_t epoch, uint32_t nlive)
{
    say_members ("lost", m, n, epoch, nlive);
}

static void on_admitted (void *arg,
                         const uint32_t *m,
                         const char *const *addrs,
                         size_t n,
                         uint32_t epoch,
                         uint32_t nlive)
{
    say_members ("join", m, n, epoch, nlive);
}

static void on_bcast (void *arg, uint32_t origin, int kind, const void *data, size_t len)
{
    if (kind == MESH_BCAST_RANK_FAILED) {
        uint32_t rank;
        int32_t status;
        char ns[256];
        elastic_error_t err = {{0}};
        if (mesh_rank_failed_decode (data, len, &rank, &status, ns, sizeof (ns), &err) <
            0)
            say ("rankfailed bad %s", err.text);
        else
            say ("rankfailed %u %u %d %s", origin, rank, status, ns);
        return;
    }
    say ("bcast %u %d %.*s", origin, kind, (int)len, (const char *)data);
}

static void on_dmodex_request (
    void *arg, struct mesh_request *req, uint32_t origin, const void *data, size_t len)
{
    char buf[256];
    int n = snprintf (buf,
                      sizeof (buf),
                      "data-of-%u-for-%u(%.*s)",
                      self,
                      origin,
                      (int)(len < 64 ? len : 64),
                      (const char *)data);
    mesh_dmodex_respond (req, 0, buf, (size_t)n);
}

static void on_fence_self (void *arg, const char *reason)
{
    char c = 'f';
    say ("fenced t=%lld %s", wall_ms (), reason);
    if (write (fence_pipe[1], &c, 1) < 0) {
        /* main sees it anyway at its next command */
    }
}

static void on_joined (void *arg)
{
    say ("joined t=%lld", wall_ms ());
}

struct fence_req {
    uint32_t seq;
    double t0;
};

static void on_fence (void *arg, int status, const struct mesh_fence_result *res)
{
    struct fence_req *fr = arg;
    char buf[8192];
    size_t off = 0;
    uint32_t seq = fr->seq;
    double t0 = fr->t0;

    free (fr);

    if (status != 0) {
        say ("fence %u error %d", seq, status);
        return;
    }
    buf[0] = '\0';
    for (uint32_t i = 0; i < res->count && off < sizeof (buf) - 16; i++) {
        char want[64];
        int wl = snprintf (want, sizeof (want), "blob-%u-%u", res->members[i], res->seq);
        int good =
            res->len[i] == (uint32_t)wl && memcmp (res->data[i], want, (size_t)wl) == 0;
        off += (size_t)snprintf (buf + off,
                                 sizeof (buf) - off,
                                 "%s%u%s",
                                 i ? "," : "",
                                 res->members[i],
                                 good ? "" : "(bad)");
    }
    say ("fence %u ok epoch %u members %s ms %.1f",
         res->seq,
         res->epoch,
         buf,
         (mono () - t0) * 1e3);
}

static void on_dmodex (void *arg, int status, const void *data, size_t len)
{
    if (status)
        say ("dmodex error %d", status);
    else
        say ("dmodex ok %.*s", (int)len, (const char *)data);
}

static int read_port (const char *dir, uint32_t i)
{
    char path[4096];
    FILE *f;
    int port = -1;

    snprintf (path, sizeof (path), "%s/%u.port", dir, i);
    if (!(f = fopen (path, "r")))
        return -1;
    if (fscanf (f, "%d", &port) != 1)
        port = -1;
    fclose (f);
    return port;
}

/* admit NAME: the newcomer's port from DIR/NAME.port, its admission to
 * DIR/NAME.admission ("slot K base B epoch E", then a line "STATE ADDR"
 * per slot, ADDR "-" where none) */
static void admit_cmd (const char *name)
{
    struct mesh_admission a;
    char path[4096], tmp[4096], addr[64];
    FILE *f;
    int port = -1;

    snprintf (path, sizeof (path), "%s/%s.port", dir, name);
    if ((f = fopen (path, "r"))) {
        if (fscanf (f, "%d", &port) != 1)
            port = -1;
        fclose (f);
    }
    if (port < 0) {
        say ("admit %s error no port file", name);
        return;
    }
    snprintf (addr, sizeof (addr), "127.0.0.1:%d", port);
    if (mesh_admit (mesh, addr, &a) < 0) {
        say ("admit %s error %s", name, strerror (errno));
        return;
    }
    snprintf (path, sizeof (path), "%s/%s.admission", dir, name);
    snprintf (tmp, sizeof (tmp), "%s/.%s.admission.tmp", dir, name);
    if ((f = fopen (tmp, "w"))) {
        fprintf (f, "slot %u base %u epoch %u\n", a.slot, a.base, a.epoch);
        for (uint32_t i = 0; i < a.n; i++)
            fprintf (f, "%u %s\n", a.slots[i], a.addrs[i] ? a.addrs[i] : "-");
        if (fclose (f) == 0 && rename (tmp, path) == 0)
            say ("admitted %s slot %u epoch %u", name, a.slot, a.epoch);
        else
            say ("admit %s error %s", name, strerror (errno));
    }
    mesh_admission_free (&a);
}

/* A newcomer's wait for its admission: fills cfg's slots (*slots), self
 * and addrs.  Returns 0, or -1 after join seconds. */
static int read_admission (
    const char *name, double join, uint8_t *slots, char **addrs, uint32_t *base)
{
    char path[4096], line[512];
    FILE *f = NULL;
    unsigned k, b, e, st;

    snprintf (path, sizeof (path), "%s/%s.admission", dir, name);
    for (double t0 = mono (); !(f = fopen (path, "r")); usleep (20000))
        if (mono () - t0 > join)
            return -1;
    if (!fgets (line, sizeof (line), f) ||
        sscanf (line, "slot %u base %u epoch %u", &k, &b, &e) != 3 || k >= nmembers) {
        fclose (f);
        return -1;
    }
    self = k;
    *base = b;
    for (uint32_t i = 0; i < nmembers; i++) {
        char a[256];
        if (!fgets (line, sizeof (line), f) || sscanf (line, "%u %255s", &st, a) != 2) {
            fclose (f);
            return -1;
        }
        slots[i] = (uint8_t)st;
        addrs[i] = strcmp (a, "-") ? strdup (a) : NULL;
    }
    fclose (f);
    return 0;
}

static void command (char *line, uint32_t *fences)
{
    uint8_t *live;
    char buf[64];

    line[strcspn (line, "\r\n")] = '\0';
    if (strcmp (line, "fence") == 0) {
        int n = snprintf (buf, sizeof (buf), "blob-%u-%u", self, *fences + 1);
        struct fence_req *fr = malloc (sizeof (*fr));
        if (!fr)
            return;
        fr->seq = *fences + 1;
        fr->t0 = mono ();
        if (mesh_fence (mesh, buf, (size_t)n, on_fence, fr) < 0) {
            say ("fence %u error %s", *fences + 1, strerror (errno));
            free (fr);
        } else {
            (*fences)++;
        }
    } else if (strncmp (line, "bcast ", 6) == 0) {
        mesh_broadcast (mesh, MESH_BCAST_NOTIFY, line + 6, strlen (line + 6));
    } else if (strncmp (line, "failed ", 7) == 0) {
        mesh_broadcast_failure (mesh, (uint32_t)atoi (line + 7), -190, "mesh-test-ns");
    } else if (strncmp (line, "dmodex ", 7) == 0) {
        const char *key = "key";
        if (mesh_dmodex (mesh, (uint32_t)atoi (line + 7), key, 3, on_dmodex, NULL) < 0)
            say ("dmodex error %s", strerror (errno));
    } else if (strcmp (line, "live") == 0) {
        struct mesh_stats st;
        char out[8192];
        size_t off = 0;
        int first = 1;
        live = calloc (nmembers, 1);
        mesh_get_live (mesh, live, nmembers);
        mesh_get_stats (mesh, &st);
        out[0] = '\0';
        for (uint32_t i = 0; i < nmembers && off < sizeof (out) - 16; i++) {
            if (live[i]) {
                off += (size_t)snprintf (
                    out + off, sizeof (out) - off, "%s%u", first ? "" : ",", i);
                first = 0;
            }
        }
        say ("live %s epoch %u", out, st.epoch);
        free (live);
    } else if (strcmp (line, "cut") == 0 || strcmp (line, "uncut") == 0) {
        mesh_test_cut (mesh, line[0] == 'c');
    } else if (strncmp (line, "admit ", 6) == 0) {
        admit_cmd (line + 6);
    } else if (strcmp (line, "cutin") == 0) {
        mesh_test_cut (mesh, 2);
    } else if (strcmp (line, "stats") == 0) {
        struct mesh_stats st;
        mesh_get_stats (mesh, &st);
        say ("stats epoch %u live %u parent %d children %u fences %u sent %llu recv %llu "
             "hb "
             "%llu",
             st.epoch,
             st.nlive,
             st.parent == UINT32_MAX ? -1 : (int)st.parent,
             st.nchildren,
             st.fences,
             (unsigned long long)st.sent_bytes,
             (unsigned long long)st.recv_bytes,
             (unsigned long long)st.heartbeats_sent);
    }
}

/* --- probe mode ------------------------------------------------------ */

static int wait_close (int fd, double timeout, size_t *got)
{
    double t0 = mono ();
    char buf[4096];

    *got = 0;
    while (mono () - t0 < timeout) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t n;
        if (poll (&p, 1, 200) <= 0)
            continue;
        n = recv (fd, buf, sizeof (buf), 0);
        if (n <= 0)
            return 0;
        *got += (size_t)n;
    }
    return -1;
}

static int probe (int port, uint32_t as, uint32_t to, uint32_t n, const char *mode)
{
    struct sockaddr_in sa = {0};
    struct mesh_wbuf b = {0};
    uint8_t key[MESH_KEY_SIZE], nonce[MESH_NONCE_SIZE];
    elastic_error_t err = {{0}};
    size_t got = 0;
    double t0;
    int fd = socket (AF_INET, SOCK_STREAM, 0);

    sa.sin_family = AF_INET;
    sa.sin_port = htons ((uint16_t)port);
    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (fd < 0 || connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        printf ("probe: connect: %s\n", strerror (errno));
        return 2;
    }
    t0 = mono ();
    if (strcmp (mode, "garbage") == 0) {
        const char junk[] = "GET / HTTP/1.0\r\n\r\n\xff\xfe garbage garbage";
        if (write (fd, junk, sizeof (junk)) < 0)
            return 2;
    } else if (strcmp (mode, "version") == 0 || strcmp (mode, "auth") == 0) {
        size_t off = mesh_msg_begin (&b, MESH_HELLO, 0, 0, as);
        mesh_put_u32 (&b, to);
        mesh_put_u32 (&b, n);
        mesh_auth_nonce (nonce, sizeof (nonce));
        mesh_put_bytes (&b, nonce, sizeof (nonce));
        mesh_msg_end (&b, off);
        if (strcmp (mode, "version") == 0)
            b.buf[4] = MESH_VERSION + 1;
        if (write (fd, b.buf, b.len) < 0)
            return 2;
    }
    if (strcmp (mode, "auth") == 0) {
        /* read the challenge, check it, answer with our (wrong) key */
        uint8_t in[MESH_HDR_SIZE + 64];
        size_t have = 0;
        struct mesh_msg msg;
        if (mesh_auth_key_from_env ("mesh-test", key, &err) < 0) {
            printf ("probe: %s\n", err.text);
            return 2;
        }
        while (have < sizeof (in)) {
            ssize_t r = recv (fd, in + have, sizeof (in) - have, 0);
            if (r <= 0)
                break;
            have += (size_t)r;
        }
        if (have == sizeof (in) && mesh_msg_decode (in, have, 256, &msg, &err) == 0 &&
            msg.hdr.type == MESH_CHALLENGE) {
            uint8_t mac[MESH_MAC_SIZE];
            int srv = mesh_auth_verify (key,
                                        MESH_ROLE_SERVER,
                                        nonce,
                                        msg.u.challenge.nonce,
                                        as,
                                        to,
                                        n,
                                        msg.u.challenge.mac);
            printf ("probe: the member's proof %s\n",
                    srv == 0 ? "verifies" : "does not verify");
            mesh_auth_mac (
                key, MESH_ROLE_CLIENT, nonce, msg.u.challenge.nonce, as, 0, n, mac);
            b.len = 0;
            size_t off = mesh_msg_begin (&b, MESH_AUTH, 0, 0, as);
            mesh_put_bytes (&b, mac, sizeof (mac));
            mesh_msg_end (&b, off);
            if (write (fd, b.buf, b.len) < 0)
                return 2;
        } else {
            printf ("probe: no challenge (%zu bytes)\n", have);
        }
    }
    mesh_wbuf_free (&b);
    if (wait_close (fd, 30, &got) == 0) {
        printf ("probe: %s: closed by the member after %.2f s (%zu bytes after)\n",
                mode,
                mono () - t0,
                got);
        close (fd);
        return 0;
    }
    printf ("probe: %s: still open after 30 s\n", mode);
    close (fd);
    return 1;
}

/* --- munge probes ---------------------------------------------------- */

static int probe_connect (int port)
{
    struct sockaddr_in sa = {0};
    int fd = socket (AF_INET, SOCK_STREAM, 0);

    sa.sin_family = AF_INET;
    sa.sin_port = htons ((uint16_t)port);
    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (fd < 0 || connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        printf ("probe: connect: %s\n", strerror (errno));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    return fd;
}

/* Read the member's answer: 1 a CHALLENGE (in msg, its bytes in in), 0
 * the connection closed without one, -1 nothing within 30 s. */
static int probe_answer (int fd, uint8_t *in, size_t cap, struct mesh_msg *msg)
{
    elastic_error_t err = {{0}};
    size_t have = 0, want = MESH_HDR_SIZE + 2 * MESH_NONCE_SIZE;
    double t0 = mono ();

    if (want > cap)
        return -1;
    while (have < want && mono () - t0 < 30) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t r;
        if (poll (&p, 1, 200) <= 0)
            continue;
        if ((r = recv (fd, in + have, want - have, 0)) <= 0)
            return 0;
        have += (size_t)r;
    }
    if (have < want)
        return -1;
    if (mesh_msg_decode (in, have, 256, msg, &err) < 0 ||
        msg->hdr.type != MESH_CHALLENGE) {
        printf ("probe: not a challenge: %s\n", err.text);
        return 0;
    }
    return 1;
}

static const char *probe_cred;              /* --cred TEXT */
static const char *probe_job = "mesh-test"; /* --job JOB */

static int probe_munge (
    int port, uint32_t as, uint32_t to, uint32_t n, const char *mode, const char *sock)
{
    struct mesh_wbuf b = {0};
    uint8_t nonce[MESH_NONCE_SIZE], key[MESH_KEY_SIZE], in[256];
    struct mesh_munge_claim cl = {as, to, n, nonce};
    elastic_error_t err = {{0}};
    struct mesh_msg msg;
    char *cred = NULL;
    size_t off, got;
    int fd, a, rc = 1;

    mesh_auth_nonce (nonce, sizeof (nonce));
    if (probe_cred) {
        cred = strdup (probe_cred);
        mode = "cred";
    } else if (strcmp (mode, "cred-garbage") == 0) {
        cred = strdup ("MUNGE:AwQFAACbogus+not+a+credential+at+all==:");
    } else {
        if (strcmp (mode, "cred-bind") == 0)
            cl.server = to + 1; /* stolen from a HELLO to another member */
        if (mesh_auth_munge_encode (sock, probe_job, &cl, &cred, key, &err) < 0) {
            printf ("probe: %s\n", err.text);
            return 2;
        }
    }
    off = mesh_msg_begin (&b, MESH_HELLO, MESH_F_CRED, 0, as);
    mesh_put_u32 (&b, to);
    mesh_put_u32 (&b, n);
    mesh_put_bytes (&b, nonce, sizeof (nonce));
    mesh_put_blob (&b, cred, strlen (cred));
    mesh_msg_end (&b, off);
    free (cred);
    if ((fd = probe_connect (port)) < 0 || write (fd, b.buf, b.len) != (ssize_t)b.len)
        goto out;
    a = probe_answer (fd, in, sizeof (in), &msg);
    if (strcmp (mode, "munge") == 0 || strcmp (mode, "cred-replay") == 0) {
        if (a != 1) {
            printf ("probe: %s: no challenge for a right credential\n", mode);
            goto out;
        }
        if (mesh_auth_verify (key,
                              MESH_ROLE_SERVER,
                              nonce,
                              msg.u.challenge.nonce,
                              as,
                              to,
                              n,
                              msg.u.challenge.mac) != 0) {
            printf ("probe: %s: the member's proof does not verify\n", mode);
            goto out;
        }
        printf ("probe: %s: the member's proof verifies under the credential's key\n",
                mode);
        close (fd);
        fd = -1;
        if (strcmp (mode, "munge") == 0) {
            rc = 0;
            goto out;
        }
        /* the same HELLO, credential and all, on a new connection */
        if ((fd = probe_connect (port)) < 0 || write (fd, b.buf, b.len) != (ssize_t)b.len)
            goto out;
        a = probe_answer (fd, in, sizeof (in), &msg);
    }
    if (a == 1) {
        printf ("probe: %s: the member answered with a challenge\n", mode);
    } else if (a == 0 || wait_close (fd, 30, &got) == 0) {
        printf ("probe: %s: closed by the member without a challenge\n", mode);
        rc = 0;
    } else {
        printf ("probe: %s: still open after 30 s\n", mode);
    }
out:
    if (fd >= 0)
        close (fd);
    mesh_wbuf_free (&b);
    return rc;
}

int main (int argc, char **argv)
{
    const char *mode = "auth", *munge = NULL, *ports = NULL, *join_name = NULL;
    uint32_t start = 0, max_live = 0, base = 0;
    uint8_t *slots = NULL;
    int cand[16];
    uint32_t ncand = 0;
    double timeout = 1.0, join = 60;
    uint32_t radix = 2, as = 0, to = 0, fences = 0;
    int probe_port = -1, port = 0, lfd;
    struct sockaddr_in sa = {0};
    socklen_t sl = sizeof (sa);
    struct mesh_config cfg = {0};
    uint8_t key[MESH_KEY_SIZE];
    elastic_error_t err = {{0}};
    char **addrs, path[4096], tmp[4096], line[1024];
    FILE *f;
    int rc = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp (a, "--members"))
            nmembers = (uint32_t)atoi (v), i++;
        else if (!strcmp (a, "--self"))
            self = (uint32_t)atoi (v), i++;
        else if (!strcmp (a, "--dir"))
            dir = v, i++;
        else if (!strcmp (a, "--ports"))
            ports = v, i++;
        else if (!strcmp (a, "--timeout"))
            timeout = atof (v), i++;
        else if (!strcmp (a, "--join-timeout"))
            join = atof (v), i++;
        else if (!strcmp (a, "--start"))
            start = (uint32_t)atoi (v), i++;
        else if (!strcmp (a, "--max-live"))
            max_live = (uint32_t)atoi (v), i++;
        else if (!strcmp (a, "--join"))
            join_name = v, i++;
        else if (!strcmp (a, "--first-fence"))
            fences = (uint32_t)atoi (v) - 1, i++;
        else if (!strcmp (a, "--radix"))
            radix = (uint32_t)atoi (v), i++;
        else if (!strcmp (a, "--probe"))
            probe_port = atoi (v), i++;
        else if (!strcmp (a, "--to"))
            to = (uint32_t)atoi (v), i++;
        else if (!strcmp (a, "--as"))
            as = (uint32_t)atoi (v), i++;
        else if (!strcmp (a, "--munge"))
            munge = v, i++;
        else if (!strcmp (a, "--cred"))
            probe_cred = v, i++;
        else if (!strcmp (a, "--job"))
            probe_job = v, i++;
        else if (!strcmp (a, "--silent") || !strcmp (a, "--garbage") ||
                 !strcmp (a, "--version") || !strcmp (a, "--cred-replay") ||
                 !strcmp (a, "--cred-bind") || !strcmp (a, "--cred-garbage") ||
                 !strcmp (a, "--cred-uid"))
            mode = a + 2;
        else {
            fprintf (stderr, "mesh-member: unknown argument %s\n", a);
            return 2;
        }
    }
    log_init_from_env ("mesh-member", "ELASTIC_LOG");
    if (probe_port > 0 && munge)
        return probe_munge (
            probe_port, as, to, nmembers, strcmp (mode, "auth") ? mode : "munge", munge);
    if (probe_port > 0)
        return probe (probe_port, as, to, nmembers, mode);
    if ((!dir && !ports) || nmembers == 0 || self >= nmembers || start > nmembers ||
        (join_name && !dir)) {
        fprintf (stderr,
                 "usage: mesh-member --members N --self I --dir DIR|--ports LIST\n");
        return 2;
    }
    for (const char *s = ports; s && *s && ncand < 16;) {
        char *end;
        cand[ncand++] = (int)strtol (s, &end, 10);
        s = *end == ',' ? end + 1 : end;
    }
    if (munge) {
        cfg.auth = MESH_AUTH_MUNGE;
        cfg.job = "mesh-test";
        cfg.munge_socket = munge;
    } else if (mesh_auth_key_from_env ("mesh-test", key, &err) < 0) {
        fprintf (stderr, "mesh-member: %s\n", err.text);
        return 2;
    }
    if (ports) {
        addrs = calloc (nmembers, sizeof (*addrs));
        for (uint32_t i = 0; i < nmembers; i++)
            if (asprintf (&addrs[i], "127.0.0.1:%d", cand[0]) < 0)
                return 2;
        lfd = -1;
        cfg.ports = cand;
        cfg.nports = ncand;
        goto join;
    }
    lfd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (lfd < 0 || bind (lfd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        listen (lfd, 128) < 0 || getsockname (lfd, (struct sockaddr *)&sa, &sl) < 0) {
        perror ("mesh-member: listen");
        return 2;
    }
    port = ntohs (sa.sin_port);
    if (join_name) {
        snprintf (path, sizeof (path), "%s/%s.port", dir, join_name);
        snprintf (tmp, sizeof (tmp), "%s/.%s.port.tmp", dir, join_name);
    } else {
        snprintf (path, sizeof (path), "%s/%u.port", dir, self);
        snprintf (tmp, sizeof (tmp), "%s/.%u.port.tmp", dir, self);
    }
    if (!(f = fopen (tmp, "w")) || fprintf (f, "%d\n", port) < 0 || fclose (f) != 0 ||
        rename (tmp, path) < 0) {
        perror ("mesh-member: port file");
        return 2;
    }
    addrs = calloc (nmembers, sizeof (*addrs));
    if (start > 0 || join_name) {
        slots = calloc (nmembers, 1);
        for (uint32_t i = start; start > 0 && i < nmembers; i++)
            slots[i] = MESH_SLOT_ABSENT;
        base = start;
    }
    if (join_name) {
        say ("listening port %d", port);
        if (read_admission (join_name, join, slots, addrs, &base) < 0) {
            fprintf (stderr,
                     "mesh-member: no admission for %s within %.0f s\n",
                     join_name,
                     join);
            return 2;
        }
        goto join;
    }
    for (double t0 = mono ();;) {
        uint32_t have = 0, want = start > 0 ? start : nmembers;
        for (uint32_t i = 0; i < want; i++) {
            if (!addrs[i]) {
                int p = read_port (dir, i);
                if (p > 0 && asprintf (&addrs[i], "127.0.0.1:%d", p) < 0)
                    return 2;
            }
            have += addrs[i] != NULL;
        }
        if (have == want)
            break;
        if (mono () - t0 > join) {
            fprintf (stderr,
                     "mesh-member: only %u of %u port files after %.0f s\n",
                     have,
                     want,
                     join);
            return 2;
        }
        usleep (20000);
    }
join:
    if (pipe (fence_pipe) < 0)
        return 2;
    cfg.nmembers = nmembers;
    cfg.self = self;
    cfg.addrs = (const char *const *)addrs;
    cfg.listen_fd = lfd;
    cfg.radix = radix;
    cfg.node_timeout = timeout;
    cfg.join_timeout = join;
    cfg.key = munge ? NULL : key;
    cfg.ops.lost = on_lost;
    cfg.ops.broadcast = on_bcast;
    cfg.ops.dmodex_request = on_dmodex_request;
    cfg.ops.self_fence = on_fence_self;
    cfg.ops.joined = on_joined;
    cfg.ops.admitted = on_admitted;
    cfg.slots = slots;
    cfg.base = base;
    cfg.max_live = max_live;
    cfg.joining = join_name != NULL;
    if (!(mesh = mesh_create (&cfg, &err)) || mesh_start (mesh, &err) < 0) {
        fprintf (stderr, "mesh-member: %s\n", err.text);
        return 2;
    }
    setvbuf (stdin, NULL, _IONBF, 0); /* poll(2) sees every line */
    if (ports)
        port = mesh_listen_port (mesh);
    say ("ready %u port %d", self, port);
    for (;;) {
        struct pollfd p[2] = {{0, POLLIN, 0}, {fence_pipe[0], POLLIN, 0}};
        if (poll (p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents) {
            rc = 3;
            break;
        }
        if (p[0].revents) {
            if (!fgets (line, sizeof (line), stdin) || strncmp (line, "quit", 4) == 0)
                break;
            command (line, &fences);
        }
    }
    mesh_destroy (mesh);
    for (uint32_t i = 0; i < nmembers; i++)
        free (addrs[i]);
    free (addrs);
    free (slots);
    say ("exit %d", rc);
    return rc;
}
