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

static void put32 (uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
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
    put32 (t + off, client);
    put32 (t + off + 4, server);
    put32 (t + off + 8, n);
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
