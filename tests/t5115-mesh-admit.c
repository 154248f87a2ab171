/* t5115-mesh-admit - the admission handshake (elastic-exec --join's mesh
 * side): MESH_ADMIT and the newcomer's HELLO on the wire, then real meshes
 * on 127.0.0.1 (threads of this process) admitting a newcomer through
 * mesh_join_request, refusing one when full, one with another secret, one
 * asking a mesh that takes no newcomers, and garbage on the port.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "exec/mesh/auth.h"
#include "exec/mesh/mesh.h"
#include "exec/mesh/proto.h"
#include "lib/tap.h"

/* ---- the wire ----------------------------------------------------------- */

static size_t admit_msg (uint8_t *out, size_t size, uint32_t status)
{
    const uint8_t slots[4] = {
        MESH_SLOT_LIVE, MESH_SLOT_LOST, MESH_SLOT_LIVE, MESH_SLOT_ABSENT};
    const char *addrs[4] = {"10.0.0.1:17001", NULL, "10.0.0.3:17002", NULL};
    struct mesh_wbuf b = {0};
    size_t off = mesh_msg_begin (&b, MESH_ADMIT, 0, 5, 1), n;

    mesh_admit_payload (&b, status, 2, 4, 2, 5, slots, addrs, "job x", 5);
    if (mesh_msg_end (&b, off) < 0 || b.len > size) {
        mesh_wbuf_free (&b);
        return 0;
    }
    memcpy (out, b.buf, b.len);
    n = b.len;
    mesh_wbuf_free (&b);
    return n;
}

static int
decodes (const uint8_t *p, size_t n, struct mesh_msg *msg, elastic_error_t *err)
{
    return mesh_msg_decode (p, n, MESH_MAX_PAYLOAD, msg, err) == 0;
}

/* payload offsets of the admitted message: status 0, slot 4, n 8, base 12,
 * epoch 16, states' length 20, states 24..27, address count 28 */
static void test_admit_wire (void)
{
    uint8_t buf[512], bad[512];
    struct mesh_msg msg;
    elastic_error_t err = {{0}};
    size_t n = admit_msg (buf, sizeof (buf), MESH_ADMIT_OK), cut_ok = 0;
    struct mesh_list it;
    uint32_t member, len;
    const uint8_t *d;
    char seen[128] = "";

    ok (n > 0 && decodes (buf, n, &msg, &err), "an admission decodes (%s)", err.text);
    ok (msg.u.admit.status == MESH_ADMIT_OK && msg.u.admit.slot == 2 &&
            msg.u.admit.n == 4 && msg.u.admit.base == 2 && msg.u.admit.epoch == 5 &&
            msg.u.admit.slots[1] == MESH_SLOT_LOST && msg.u.admit.info_len == 5 &&
            !memcmp (msg.u.admit.info, "job x", 5),
        "its slot, size, base, epoch, states and blob round-trip");
    it = msg.u.admit.addrs;
    while (mesh_list_next (&it, 1, &member, NULL, &d, &len))
        snprintf (seen + strlen (seen),
                  sizeof (seen) - strlen (seen),
                  "%u=%.*s ",
                  member,
                  (int)len,
                  (const char *)d);
    ok (!strcmp (seen, "0=10.0.0.1:17001 2=10.0.0.3:17002 "), "its addresses: %s", seen);
    for (size_t k = MESH_HDR_SIZE; k < n; k++) {
        memcpy (bad, buf, n);
        bad[8] = (uint8_t)((k - MESH_HDR_SIZE) >> 24),
        bad[9] = (uint8_t)((k - MESH_HDR_SIZE) >> 16);
        bad[10] = (uint8_t)((k - MESH_HDR_SIZE) >> 8),
        bad[11] = (uint8_t)(k - MESH_HDR_SIZE);
        cut_ok += decodes (bad, k, &msg, &err);
    }
    ok (cut_ok == 0,
        "cut at every length (its header agreeing): refused (%zu decoded)",
        cut_ok);

    n = admit_msg (buf, sizeof (buf), MESH_ADMIT_FULL);
    ok (n == MESH_HDR_SIZE + 4 && decodes (buf, n, &msg, &err) &&
            msg.u.admit.status == MESH_ADMIT_FULL,
        "a refusal is its status alone");
    buf[MESH_HDR_SIZE + 3] = 9;
    ok (!decodes (buf, n, &msg, &err) && strstr (err.text, "unknown status 9"),
        "an unknown status is refused: %s",
        err.text);

    n = admit_msg (buf, sizeof (buf), MESH_ADMIT_OK);
    memcpy (bad, buf, n);
    bad[MESH_HDR_SIZE + 7] = 4; /* slot 4 of 4 */
    ok (!decodes (bad, n, &msg, &err) && strstr (err.text, "slot 4 of 4"),
        "a slot out of range: %s",
        err.text);
    memcpy (bad, buf, n);
    bad[MESH_HDR_SIZE + 24 + 1] = 3;
    ok (!decodes (bad, n, &msg, &err) && strstr (err.text, "unknown state 3"),
        "an unknown slot state: %s",
        err.text);
    memcpy (bad, buf, n);
    bad[MESH_HDR_SIZE + 24 + 2] = MESH_SLOT_ABSENT;
    ok (!decodes (bad, n, &msg, &err) && strstr (err.text, "not live"),
        "the newcomer's own slot not live: %s",
        err.text);
    memcpy (bad, buf, n);
    bad[MESH_HDR_SIZE + 32 + 3] = 7; /* the first address names member 7 */
    ok (!decodes (bad, n, &msg, &err) && strstr (err.text, "member 7 of 4"),
        "an address for a member out of range: %s",
        err.text);
    memcpy (bad, buf, n);
    bad[MESH_HDR_SIZE + 8 + 3] = 5; /* n 5, 4 states */
    ok (!decodes (bad, n, &msg, &err) && strstr (err.text, "4 states"),
        "a state count other than the size: %s",
        err.text);
}

static size_t join_hello (uint8_t *out, unsigned flags, uint32_t source, uint32_t size)
{
    struct mesh_wbuf b = {0};
    uint8_t nonce[MESH_NONCE_SIZE] = {1};
    size_t off = mesh_msg_begin (&b, MESH_HELLO, flags, 0, source), n;

    mesh_put_u32 (&b, 1);
    mesh_put_u32 (&b, size);
    mesh_put_bytes (&b, nonce, MESH_NONCE_SIZE);
    if (flags & MESH_F_PORT)
        mesh_put_u32 (&b, 17001);
    mesh_msg_end (&b, off);
    memcpy (out, b.buf, b.len);
    n = b.len;
    mesh_wbuf_free (&b);
    return n;
}

static void test_join_hello (void)
{
    uint8_t buf[256];
    struct mesh_msg msg;
    elastic_error_t err = {{0}};
    size_t n;

    n = join_hello (buf, MESH_F_JOIN | MESH_F_PORT, 0, 0);
    ok (decodes (buf, n, &msg, &err) && msg.u.hello.port == 17001 &&
            (msg.hdr.flags & MESH_F_JOIN),
        "a newcomer's hello decodes (%s)",
        err.text);
    n = join_hello (buf, MESH_F_JOIN, 0, 0);
    ok (!decodes (buf, n, &msg, &err) && strstr (err.text, "needs its port"),
        "without its port: refused (%s)",
        err.text);
    n = join_hello (buf, MESH_F_JOIN | MESH_F_PORT, 3, 0);
    ok (!decodes (buf, n, &msg, &err), "naming a source member: refused (%s)", err.text);
    n = join_hello (buf, MESH_F_JOIN | MESH_F_PORT, 0, 4);
    ok (!decodes (buf, n, &msg, &err), "naming a mesh size: refused (%s)", err.text);
    n = join_hello (buf, MESH_F_PORT, 0, 4);
    buf[7] |= MESH_F_JOIN << 0; /* flags' low byte */
    ok (!decodes (buf, n, &msg, &err),
        "JOIN on a member's hello: refused (%s)",
        err.text);
}

/* ---- real meshes ---------------------------------------------------------- */

#define NSLOTS 3

struct member {
    struct mesh *m;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int admitted_slot; /* last admitted, -1 none */
    int fence_done;
    uint32_t fence_count;
};

static void on_admitted (void *arg,
                         const uint32_t *members,
                         const char *const *addrs,
                         size_t count,
                         uint32_t epoch,
                         uint32_t nlive)
{
    struct member *mb = arg;

    pthread_mutex_lock (&mb->lock);
    mb->admitted_slot = (int)members[count - 1];
    pthread_cond_broadcast (&mb->cond);
    pthread_mutex_unlock (&mb->lock);
}

static void on_fence (void *arg, int status, const struct mesh_fence_result *res)
{
    struct member *mb = arg;

    pthread_mutex_lock (&mb->lock);
    mb->fence_done = status == MESH_OK ? 1 : -1;
    mb->fence_count = status == MESH_OK ? res->count : 0;
    pthread_cond_broadcast (&mb->cond);
    pthread_mutex_unlock (&mb->lock);
}

/* Wait (up to 30 s) until *what != 0 (under mb->lock). */
static int wait_for (struct member *mb, int *what)
{
    struct timespec ts;
    int v;

    clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_sec += 30;
    pthread_mutex_lock (&mb->lock);
    while (*what == 0 || *what == -2)
        if (pthread_cond_timedwait (&mb->cond, &mb->lock, &ts) == ETIMEDOUT)
            break;
    v = *what;
    pthread_mutex_unlock (&mb->lock);
    return v;
}

static int bind_any (int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK)};
    socklen_t sl = sizeof (sa);
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 ||
        listen (fd, 16) < 0 || getsockname (fd, (struct sockaddr *)&sa, &sl) < 0)
        return -1;
    *port = ntohs (sa.sin_port);
    return fd;
}

static struct mesh *make_member (struct member *mb,
                                 uint32_t self,
                                 const char *const *addrs,
                                 int fd,
                                 const uint8_t *slots,
                                 uint32_t base,
                                 int joining,
                                 const char *info,
                                 const uint8_t *key)
{
    struct mesh_config cfg = {
        .nmembers = NSLOTS,
        .self = self,
        .addrs = addrs,
        .listen_fd = fd,
        .node_timeout = 2.0,
        .join_timeout = 20,
        .key = key,
        .slots = slots,
        .base = base,
        .joining = joining,
        .admit_info = info,
        .admit_info_len = info ? strlen (info) : 0,
        .ops = {.admitted = on_admitted},
        .arg = mb,
    };
    elastic_error_t err = {{0}};

    memset (mb, 0, sizeof (*mb));
    pthread_mutex_init (&mb->lock, NULL);
    pthread_cond_init (&mb->cond, NULL);
    mb->admitted_slot = -2;
    if (!(mb->m = mesh_create (&cfg, &err)) || mesh_start (mb->m, &err) < 0) {
        diag ("member %u: %s", self, err.text);
        return NULL;
    }
    return mb->m;
}

static int fence_all (struct member *mb, int count)
{
    int ok_all = 1;

    for (int i = 0; i < count; i++) {
        mb[i].fence_done = 0;
        if (mesh_fence (mb[i].m, "x", 1, on_fence, &mb[i]) < 0)
            return 0;
    }
    for (int i = 0; i < count; i++)
        ok_all &= wait_for (&mb[i], &mb[i].fence_done) == 1 &&
                  mb[i].fence_count == (uint32_t)count;
    return ok_all;
}

static void test_live (void)
{
    uint8_t key[MESH_KEY_SIZE], other[MESH_KEY_SIZE];
    elastic_error_t err = {{0}};
    char a0[64], a1[64], *info = NULL;
    const char *addrs[NSLOTS] = {a0, a1, NULL};
    const uint8_t slots[NSLOTS] = {MESH_SLOT_LIVE, MESH_SLOT_LIVE, MESH_SLOT_ABSENT};
    struct member mb[NSLOTS];
    struct mesh_admission a;
    size_t info_len = 0;
    int p0, p1, p2, f0 = bind_any (&p0), f1 = bind_any (&p1), f2 = bind_any (&p2), status;
    int rc, garbage;
    struct mesh_join_opts jo = {.member = 1, .auth = MESH_AUTH_SECRET, .timeout = 10};

    mesh_auth_key_derive ("job", "s3cret", 6, key, &err);
    mesh_auth_key_derive ("job", "other", 5, other, &err);
    snprintf (a0, sizeof (a0), "127.0.0.1:%d", p0);
    snprintf (a1, sizeof (a1), "127.0.0.1:%d", p1);
    ok (make_member (&mb[0], 0, addrs, f0, slots, 2, 0, "the job's shape", key) &&
            make_member (&mb[1], 1, addrs, f1, slots, 2, 0, "the job's shape", key),
        "two members of three slots start");
    ok (fence_all (mb, 2), "they fence");

    /* garbage and a stranger that says nothing first: nobody is hurt */
    garbage = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons ((uint16_t)p1),
                                 .sin_addr.s_addr = htonl (INADDR_LOOPBACK)};
        const char junk[] = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
        ok (connect (garbage, (struct sockaddr *)&sa, sizeof (sa)) == 0 &&
                write (garbage, junk, sizeof (junk)) > 0,
            "garbage sent to member 1's port");
        close (garbage);
    }

    jo.addr = a1;
    jo.listen_port = p2;
    jo.key = other;
    rc = mesh_join_request (&jo, &a, &info, &info_len, &status, &err);
    ok (rc == -1 && strstr (err.text, "failed authentication"),
        "a newcomer with another secret: no answer it can trust (%d: %s)",
        rc,
        err.text);

    jo.key = key;
    jo.member = 0; /* member 1's port, member 0's id */
    rc = mesh_join_request (&jo, &a, &info, &info_len, &status, &err);
    ok (rc == -1, "a newcomer that names the wrong member is dropped (%s)", err.text);

    jo.member = 1;
    rc = mesh_join_request (&jo, &a, &info, &info_len, &status, &err);
    ok (rc == 1 && a.slot == 2 && a.n == NSLOTS && a.base == 2 &&
            a.slots[2] == MESH_SLOT_LIVE && a.addrs[0] && !strcmp (a.addrs[0], a0) &&
            info && !strcmp (info, "the job's shape"),
        "admitted into slot 2 with the view and the owner's blob (%d: %s)",
        rc,
        err.text);
    ok (rc == 1 && a.addrs[2] && atoi (strrchr (a.addrs[2], ':') + 1) == p2,
        "its address is where it listens: %s",
        rc == 1 && a.addrs[2] ? a.addrs[2] : "(none)");
    ok (wait_for (&mb[0], &mb[0].admitted_slot) == 2 &&
            wait_for (&mb[1], &mb[1].admitted_slot) == 2,
        "both members see member 2 joined");
    if (rc == 1) {
        ok (make_member (&mb[2],
                         2,
                         (const char *const *)a.addrs,
                         f2,
                         a.slots,
                         a.base,
                         1,
                         NULL,
                         key) != NULL,
            "the newcomer starts its mesh with that view");
        ok (fence_all (mb, 3), "the three fence, each with the three blobs");
    } else {
        ok (0, "the newcomer starts its mesh with that view");
        ok (0, "the three fence");
    }
    free (info);
    mesh_admission_free (&a);

    jo.addr = a0;
    jo.member = 0;
    rc = mesh_join_request (&jo, &a, &info, &info_len, &status, &err);
    ok (rc == 0 && status == MESH_ADMIT_FULL && strstr (err.text, "no room"),
        "a fourth is refused, authenticated: %s",
        err.text);
    free (info);
    mesh_admission_free (&a);

    for (int i = 2; i >= 0; i--)
        mesh_destroy (mb[i].m);
}

static void test_nojoin (void)
{
    uint8_t key[MESH_KEY_SIZE];
    elastic_error_t err = {{0}};
    char a0[64], a1[64], *info = NULL;
    const char *addrs[NSLOTS] = {a0, a1, NULL};
    const uint8_t slots[NSLOTS] = {MESH_SLOT_LIVE, MESH_SLOT_LIVE, MESH_SLOT_ABSENT};
    struct member mb[2];
    struct mesh_admission a;
    size_t info_len;
    int p0, p1, f0 = bind_any (&p0), f1 = bind_any (&p1), status, rc;
    struct mesh_join_opts jo = {
        .addr = a0, .member = 0, .listen_port = 1, .key = key, .timeout = 10};

    mesh_auth_key_derive ("job", "s3cret", 6, key, &err);
    snprintf (a0, sizeof (a0), "127.0.0.1:%d", p0);
    snprintf (a1, sizeof (a1), "127.0.0.1:%d", p1);
    make_member (&mb[0], 0, addrs, f0, slots, 2, 0, NULL, key);
    make_member (&mb[1], 1, addrs, f1, slots, 2, 0, NULL, key);
    rc = mesh_join_request (&jo, &a, &info, &info_len, &status, &err);
    ok (rc == 0 && status == MESH_ADMIT_NOJOIN,
        "a mesh without admit_info refuses newcomers: %s",
        err.text);
    ok (fence_all (mb, 2), "and goes on");
    free (info);
    mesh_destroy (mb[1].m);
    mesh_destroy (mb[0].m);
}

int main (void)
{
    elastic_error_t err = {{0}};

    mesh_auth_init (&err);
    test_admit_wire ();
    test_join_hello ();
    test_live ();
    test_nojoin ();
    return done_testing ();
}
