/* auth.c - the mesh's challenge-response authentication (see auth.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>
#if HAVE_MUNGE
#include <munge.h>
#endif

#include "common/bytes.h"
#include "auth.h"
#include "proto.h"

#define SECRET_MAX 4096

_Static_assert(crypto_auth_BYTES == MESH_MAC_SIZE, "MAC size");
_Static_assert(crypto_auth_KEYBYTES == MESH_KEY_SIZE, "key size");
_Static_assert(crypto_auth_hmacsha512256_BYTES == MESH_MAC_SIZE, "MAC size");

int mesh_auth_init (elastic_error_t *err)
{
    if (sodium_init () < 0)
        return errprintf (err, "libsodium: sodium_init failed");
    return 0;
}

int mesh_auth_key_derive (const char *job,
                          const void *secret,
                          size_t len,
                          uint8_t key[MESH_KEY_SIZE],
                          elastic_error_t *err)
{
    static const char label[] = "elastic-mesh-v1";
    crypto_generichash_state st;

    if (len == 0)
        return errprintf (err, "the mesh secret is empty");
    if (mesh_auth_init (err) < 0)
        return -1;
    if (!job)
        job = "";
    crypto_generichash_init (&st, NULL, 0, MESH_KEY_SIZE);
    crypto_generichash_update (&st, (const uint8_t *)label, sizeof (label));
    crypto_generichash_update (&st, (const uint8_t *)job, strlen (job) + 1);
    crypto_generichash_update (&st, secret, len);
    crypto_generichash_final (&st, key, MESH_KEY_SIZE);
    return 0;
}

int mesh_auth_key_from_file (const char *job,
                             const char *path,
                             uint8_t key[MESH_KEY_SIZE],
                             elastic_error_t *err)
{
    char buf[SECRET_MAX];
    struct stat st;
    ssize_t n;
    size_t len = 0;
    int fd, rc;

    if ((fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        return errprintf (err, "mesh secret file %s: %s", path, strerror (errno));
    if (fstat (fd, &st) < 0) {
        rc = errprintf (err, "mesh secret file %s: %s", path, strerror (errno));
        goto out;
    }
    if (!S_ISREG (st.st_mode)) {
        rc = errprintf (err, "mesh secret file %s: not a regular file", path);
        goto out;
    }
    if (st.st_uid != geteuid () || (st.st_mode & 077)) {
        rc = errprintf (err,
                        "mesh secret file %s: mode %04o owner %u (expected mode 0600 or "
                        "stricter, owned by uid %u)",
                        path,
                        (unsigned)(st.st_mode & 07777),
                        (unsigned)st.st_uid,
                        (unsigned)geteuid ());
        goto out;
    }
    while (len < sizeof (buf) && (n = read (fd, buf + len, sizeof (buf) - len)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = errprintf (err, "mesh secret file %s: %s", path, strerror (errno));
            goto out;
        }
        len += (size_t)n;
    }
    if (len == sizeof (buf)) {
        rc = errprintf (err, "mesh secret file %s: over %d bytes", path, SECRET_MAX - 1);
        goto out;
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    rc = mesh_auth_key_derive (job, buf, len, key, err);
    if (rc < 0)
        errprefix (err, "%s", path);
out:
    sodium_memzero (buf, sizeof (buf));
    close (fd);
    return rc;
}

int mesh_auth_key_from_env (const char *job,
                            uint8_t key[MESH_KEY_SIZE],
                            elastic_error_t *err)
{
    const char *s = getenv ("ELASTIC_MESH_SECRET");
    const char *f = getenv ("ELASTIC_MESH_SECRET_FILE");

    if (s && *s)
        return mesh_auth_key_derive (job, s, strlen (s), key, err);
    if (f && *f)
        return mesh_auth_key_from_file (job, f, key, err);
    return errprintf (
        err,
        "no mesh secret: set ELASTIC_MESH_SECRET or ELASTIC_MESH_SECRET_FILE "
        "(a 0600 file)");
}

void mesh_auth_nonce (uint8_t *nonce, size_t len)
{
    randombytes_buf (nonce, len);
}

/* role | nonce_client | nonce_server | client | server | nmembers */
static size_t transcript (uint8_t *t,
                          int role,
                          const uint8_t *nc,
                          const uint8_t *ns,
                          uint32_t client,
                          uint32_t server,
                          uint32_t n)
{
    size_t off = 0;

    t[off++] = (uint8_t)role;
    memcpy (t + off, nc, MESH_NONCE_SIZE);
    off += MESH_NONCE_SIZE;
    memcpy (t + off, ns, MESH_NONCE_SIZE);
    off += MESH_NONCE_SIZE;
    be_put32 (t + off, client);
    be_put32 (t + off + 4, server);
    be_put32 (t + off + 8, n);
    return off + 12;
}

void mesh_auth_mac (const uint8_t key[MESH_KEY_SIZE],
                    int role,
                    const uint8_t *nonce_client,
                    const uint8_t *nonce_server,
                    uint32_t client,
                    uint32_t server,
                    uint32_t nmembers,
                    uint8_t *mac)
{
    uint8_t t[1 + 2 * MESH_NONCE_SIZE + 12];
    size_t n = transcript (t, role, nonce_client, nonce_server, client, server, nmembers);

    crypto_auth (mac, t, n, key);
}

int mesh_auth_verify (const uint8_t key[MESH_KEY_SIZE],
                      int role,
                      const uint8_t *nonce_client,
                      const uint8_t *nonce_server,
                      uint32_t client,
                      uint32_t server,
                      uint32_t nmembers,
                      const uint8_t *mac)
{
    uint8_t t[1 + 2 * MESH_NONCE_SIZE + 12];
    size_t n = transcript (t, role, nonce_client, nonce_server, client, server, nmembers);

    return crypto_auth_verify (mac, t, n, key) == 0 ? 0 : -1;
}

static void session_key (const uint8_t key[MESH_KEY_SIZE],
                         const char *dir,
                         const uint8_t *nc,
                         const uint8_t *ns,
                         uint8_t out[MESH_KEY_SIZE])
{
    crypto_generichash_state st;

    crypto_generichash_init (&st, key, MESH_KEY_SIZE, MESH_KEY_SIZE);
    crypto_generichash_update (&st, (const uint8_t *)dir, strlen (dir) + 1);
    crypto_generichash_update (&st, nc, MESH_NONCE_SIZE);
    crypto_generichash_update (&st, ns, MESH_NONCE_SIZE);
    crypto_generichash_final (&st, out, MESH_KEY_SIZE);
}

void mesh_auth_session_keys (const uint8_t key[MESH_KEY_SIZE],
                             const uint8_t *nonce_client,
                             const uint8_t *nonce_server,
                             uint8_t c2s[MESH_KEY_SIZE],
                             uint8_t s2c[MESH_KEY_SIZE])
{
    session_key (key, "elastic-mesh-c2s", nonce_client, nonce_server, c2s);
    session_key (key, "elastic-mesh-s2c", nonce_client, nonce_server, s2c);
}

void mesh_auth_msg_mac (const uint8_t skey[MESH_KEY_SIZE],
                        uint64_t seq,
                        const uint8_t *p,
                        size_t len,
                        uint8_t *mac)
{
    crypto_auth_hmacsha512256_state st;
    uint8_t s[8];

    for (int i = 0; i < 8; i++)
        s[i] = (uint8_t)(seq >> (56 - 8 * i));
    crypto_auth_hmacsha512256_init (&st, skey, MESH_KEY_SIZE);
    crypto_auth_hmacsha512256_update (&st, s, sizeof (s));
    crypto_auth_hmacsha512256_update (&st, p, len);
    crypto_auth_hmacsha512256_final (&st, mac);
}

int mesh_auth_msg_verify (const uint8_t skey[MESH_KEY_SIZE],
                          uint64_t seq,
                          const uint8_t *p,
                          size_t len,
                          const uint8_t *mac)
{
    uint8_t want[MESH_MAC_SIZE];
    int rc;

    mesh_auth_msg_mac (skey, seq, p, len, want);
    rc = sodium_memcmp (want, mac, MESH_MAC_SIZE) == 0 ? 0 : -1;
    sodium_memzero (want, sizeof (want));
    return rc;
}

/* --- munge ----------------------------------------------------------- */

#if HAVE_MUNGE
/* payload: "EMM1" | client | server | nmembers | nonce | secret | job */
#define MUNGE_MAGIC  "EMM1"
#define MUNGE_SECRET 32
#define MUNGE_FIXED  (4 + 12 + MESH_NONCE_SIZE + MUNGE_SECRET)

static munge_ctx_t munge_ctx (const char *socket, elastic_error_t *err)
{
    munge_ctx_t ctx = munge_ctx_create ();
    munge_err_t e;

    if (!ctx) {
        errprintf (err, "munge: out of memory");
        return NULL;
    }
    if (socket && *socket &&
        (e = munge_ctx_set (ctx, MUNGE_OPT_SOCKET, socket)) != EMUNGE_SUCCESS) {
        errprintf (err, "munge: socket %s: %s", socket, munge_strerror (e));
        munge_ctx_destroy (ctx);
        return NULL;
    }
    return ctx;
}

static void
munge_conn_key (const char *job, const uint8_t *secret, uint8_t key[MESH_KEY_SIZE])
{
    uint8_t s[6 + MUNGE_SECRET];
    elastic_error_t e = {{0}};

    memcpy (s, "munge", 6);
    memcpy (s + 6, secret, MUNGE_SECRET);
    (void)mesh_auth_key_derive (job, s, sizeof (s), key, &e);
    sodium_memzero (s, sizeof (s));
}

int mesh_auth_munge_encode (const char *socket,
                            const char *job,
                            const struct mesh_munge_claim *claim,
                            char **cred,
                            uint8_t key[MESH_KEY_SIZE],
                            elastic_error_t *err)
{
    size_t jl = job ? strlen (job) : 0, len = MUNGE_FIXED + jl;
    uint8_t *p, *secret;
    munge_ctx_t ctx;
    munge_err_t e;
    int rc = -1;

    *cred = NULL;
    if (mesh_auth_init (err) < 0 || !(ctx = munge_ctx (socket, err)))
        return -1;
    if (!(p = malloc (len))) {
        munge_ctx_destroy (ctx);
        return errprintf (err, "munge: out of memory");
    }
    memcpy (p, MUNGE_MAGIC, 4);
    be_put32 (p + 4, claim->client);
    be_put32 (p + 8, claim->server);
    be_put32 (p + 12, claim->nmembers);
    memcpy (p + 16, claim->nonce, MESH_NONCE_SIZE);
    secret = p + 16 + MESH_NONCE_SIZE;
    randombytes_buf (secret, MUNGE_SECRET);
    if (jl)
        memcpy (p + MUNGE_FIXED, job, jl);
    /* only this uid (or root) can decode it: the secret stays ours */
    if ((e = munge_ctx_set (ctx, MUNGE_OPT_UID_RESTRICTION, (uid_t)geteuid ())) !=
        EMUNGE_SUCCESS) {
        errprintf (err, "munge: uid restriction: %s", munge_strerror (e));
        goto out;
    }
    if ((e = munge_encode (cred, ctx, p, (int)len)) != EMUNGE_SUCCESS) {
        errprintf (err,
                   "munge: cannot make a credential: %s",
                   munge_ctx_strerror (ctx) ? munge_ctx_strerror (ctx)
                                            : munge_strerror (e));
        free (*cred);
        *cred = NULL;
        goto out;
    }
    if (strlen (*cred) > MESH_MUNGE_CRED_MAX) {
        errprintf (err,
                   "munge: a credential of %zu bytes (at most %d)",
                   strlen (*cred),
                   MESH_MUNGE_CRED_MAX);
        free (*cred);
        *cred = NULL;
        goto out;
    }
    munge_conn_key (job ? job : "", secret, key);
    rc = 0;
out:
    sodium_memzero (p, len);
    free (p);
    munge_ctx_destroy (ctx);
    return rc;
}

/* Check a decoded payload against (job, expect); the key from its secret. */
static int munge_check_payload (const uint8_t *p,
                                size_t len,
                                const char *job,
                                const struct mesh_munge_claim *expect,
                                uint8_t key[MESH_KEY_SIZE],
                                elastic_error_t *err)
{
    size_t jl = job ? strlen (job) : 0;

    if (len < MUNGE_FIXED || memcmp (p, MUNGE_MAGIC, 4) != 0)
        return errprintf (
            err, "munge credential: not a mesh credential (%zu bytes)", len);
    if (len - MUNGE_FIXED != jl || (jl && memcmp (p + MUNGE_FIXED, job, jl) != 0))
        return errprintf (err,
                          "munge credential: for job '%.*s' (this is job '%s')",
                          (int)(len - MUNGE_FIXED < 64 ? len - MUNGE_FIXED : 64),
                          (const char *)p + MUNGE_FIXED,
                          job ? job : "");
    if (be_get32 (p + 4) != expect->client || be_get32 (p + 8) != expect->server ||
        be_get32 (p + 12) != expect->nmembers)
        return errprintf (err,
                          "munge credential: made by member %u for member %u of %u "
                          "(expected %u for %u of %u)",
                          be_get32 (p + 4),
                          be_get32 (p + 8),
                          be_get32 (p + 12),
                          expect->client,
                          expect->server,
                          expect->nmembers);
    if (sodium_memcmp (p + 16, expect->nonce, MESH_NONCE_SIZE) != 0)
        return errprintf (
            err, "munge credential: made for another connection (nonce differs)");
    munge_conn_key (job ? job : "", p + 16 + MESH_NONCE_SIZE, key);
    return 0;
}

int mesh_auth_munge_decode (const char *socket,
                            const char *job,
                            const char *cred,
                            size_t len,
                            const struct mesh_munge_claim *expect,
                            uint8_t key[MESH_KEY_SIZE],
                            elastic_error_t *err)
{
    char *c;
    void *p = NULL;
    int plen = 0, rc = -1;
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    munge_ctx_t ctx;
    munge_err_t e;

    if (len == 0 || len > MESH_MUNGE_CRED_MAX || memchr (cred, '\0', len))
        return errprintf (err,
                          "munge credential: %zu bytes (expected 1 to %d, no NUL)",
                          len,
                          MESH_MUNGE_CRED_MAX);
    if (mesh_auth_init (err) < 0 || !(ctx = munge_ctx (socket, err)))
        return -1;
    if (!(c = malloc (len + 1))) {
        munge_ctx_destroy (ctx);
        return errprintf (err, "munge: out of memory");
    }
    memcpy (c, cred, len);
    c[len] = '\0';
    e = munge_decode (c, ctx, &p, &plen, &uid, &gid);
    if (e == EMUNGE_CRED_REPLAYED)
        errprintf (err, "munge credential: replayed (munged decoded it before)");
    else if (e == EMUNGE_CRED_EXPIRED)
        errprintf (err, "munge credential: expired (older than its TTL)");
    else if (e != EMUNGE_SUCCESS)
        errprintf (err,
                   "munge credential: %s",
                   munge_ctx_strerror (ctx) ? munge_ctx_strerror (ctx)
                                            : munge_strerror (e));
    else if (uid != geteuid ())
        errprintf (err,
                   "munge credential: made by uid %u (this job runs as uid %u)",
                   (unsigned)uid,
                   (unsigned)geteuid ());
    else
        rc = munge_check_payload (p, (size_t)plen, job, expect, key, err);
    if (p) {
        sodium_memzero (p, (size_t)plen);
        free (p);
    }
    free (c);
    munge_ctx_destroy (ctx);
    return rc;
}

int mesh_auth_munge_probe (const char *socket, elastic_error_t *err)
{
    uint8_t nonce[MESH_NONCE_SIZE], k1[MESH_KEY_SIZE], k2[MESH_KEY_SIZE];
    struct mesh_munge_claim cl = {0, 0, 1, nonce};
    char *cred = NULL;
    int rc;

    mesh_auth_nonce (nonce, sizeof (nonce));
    if (mesh_auth_munge_encode (socket, "probe", &cl, &cred, k1, err) < 0)
        return -1;
    rc = mesh_auth_munge_decode (socket, "probe", cred, strlen (cred), &cl, k2, err);
    if (rc == 0 && sodium_memcmp (k1, k2, MESH_KEY_SIZE) != 0)
        rc = errprintf (err, "munge: the probe's keys differ");
    free (cred);
    sodium_memzero (k1, sizeof (k1));
    sodium_memzero (k2, sizeof (k2));
    return rc;
}
#else
int mesh_auth_munge_probe (const char *socket, elastic_error_t *err)
{
    return errprintf (err,
                      "munge: this build has no libmunge (apt-get install libmunge-dev)");
}

int mesh_auth_munge_encode (const char *socket,
                            const char *job,
                            const struct mesh_munge_claim *claim,
                            char **cred,
                            uint8_t key[MESH_KEY_SIZE],
                            elastic_error_t *err)
{
    *cred = NULL;
    return mesh_auth_munge_probe (socket, err);
}

int mesh_auth_munge_decode (const char *socket,
                            const char *job,
                            const char *cred,
                            size_t len,
                            const struct mesh_munge_claim *expect,
                            uint8_t key[MESH_KEY_SIZE],
                            elastic_error_t *err)
{
    return mesh_auth_munge_probe (socket, err);
}
#endif
