/* auth.h - only members of this job join its mesh
 *
 * Every member holds the same 32-byte key, derived from the job's secret
 * and the job's id.  A connection is authenticated both ways by a
 * challenge-response: the client sends a nonce (HELLO), the server answers
 * with its own nonce and a MAC over both nonces and both member ids
 * (CHALLENGE), the client checks it and answers with its MAC (AUTH).  The
 * MAC is libsodium's crypto_auth (HMAC-SHA-512-256), checked in constant
 * time; nonces come from randombytes_buf.  A replayed or reflected
 * exchange fails: each side's MAC covers the other side's fresh nonce and
 * a role byte.
 *
 * The secret comes from ELASTIC_MESH_SECRET (its bytes), or from the file
 * named by ELASTIC_MESH_SECRET_FILE, which must be a regular file owned by
 * this user and readable by nobody else (mode 0600 or stricter).
 *
 * Under Slurm (where munged runs) a mesh can instead authenticate each
 * connection with munge (mesh_config.auth = MESH_AUTH_MUNGE): the client's
 * HELLO carries a munge credential, restricted to this uid, whose payload
 * binds the job id, both member ids, the mesh size and the client's HELLO
 * nonce, and carries a fresh random connection secret.  The server
 * decodes it through its munged (which refuses a replayed or expired
 * credential), checks that it was made by this uid and that the payload
 * names this job, this member and this nonce, and both sides key the same
 * challenge-response and sealed messages as above with the connection's
 * key, derived from that secret.  doc/mesh.md says why this is sound.
 */
#ifndef ELASTIC_EXEC_MESH_AUTH_H
#define ELASTIC_EXEC_MESH_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define MESH_KEY_SIZE 32

enum { MESH_ROLE_SERVER = 'S', MESH_ROLE_CLIENT = 'C' };

/* Initialise libsodium (idempotent, thread-safe).  Returns 0 or -1 with err. */
int mesh_auth_init (elastic_error_t *err);

/* Derive the job's key from (secret, len) and job (a NUL-terminated id, may
 * be "").  Returns 0, or -1 with err (empty secret). */
int mesh_auth_key_derive (const char *job,
                          const void *secret,
                          size_t len,
                          uint8_t key[MESH_KEY_SIZE],
                          elastic_error_t *err);

/* Derive the key from ELASTIC_MESH_SECRET or ELASTIC_MESH_SECRET_FILE (see
 * above).  Returns 0, or -1 with err saying which is missing or unsafe. */
int mesh_auth_key_from_env (const char *job,
                            uint8_t key[MESH_KEY_SIZE],
                            elastic_error_t *err);

/* Read a secret file (regular, owned by us, no group/other access) and
 * derive the key.  Returns 0 or -1 with err. */
int mesh_auth_key_from_file (const char *job,
                             const char *path,
                             uint8_t key[MESH_KEY_SIZE],
                             elastic_error_t *err);

/* Fill nonce with random bytes. */
void mesh_auth_nonce (uint8_t *nonce, size_t len);

/* The MAC one side sends: role is MESH_ROLE_SERVER or MESH_ROLE_CLIENT;
 * client and server are member ids, nmembers the mesh size. */
void mesh_auth_mac (const uint8_t key[MESH_KEY_SIZE],
                    int role,
                    const uint8_t *nonce_client,
                    const uint8_t *nonce_server,
                    uint32_t client,
                    uint32_t server,
                    uint32_t nmembers,
                    uint8_t *mac);

/* Check a MAC received from the peer that plays role.  Returns 0 when it
 * matches, -1 otherwise (constant time). */
int mesh_auth_verify (const uint8_t key[MESH_KEY_SIZE],
                      int role,
                      const uint8_t *nonce_client,
                      const uint8_t *nonce_server,
                      uint32_t client,
                      uint32_t server,
                      uint32_t nmembers,
                      const uint8_t *mac);

/* After the handshake every message carries a MAC trailer under a
 * per-connection, per-direction session key, over a per-direction message
 * counter and the whole message: a message injected, altered, replayed or
 * reordered in the TCP stream is refused.  Derive the two session keys from
 * the job key and the handshake's nonces: c2s for what the client sends,
 * s2c for what the server sends. */
void mesh_auth_session_keys (const uint8_t key[MESH_KEY_SIZE],
                             const uint8_t *nonce_client,
                             const uint8_t *nonce_server,
                             uint8_t c2s[MESH_KEY_SIZE],
                             uint8_t s2c[MESH_KEY_SIZE]);

/* The MAC of message number seq (p, len) under a session key. */
void mesh_auth_msg_mac (const uint8_t skey[MESH_KEY_SIZE],
                        uint64_t seq,
                        const uint8_t *p,
                        size_t len,
                        uint8_t *mac);

/* Check it.  Returns 0 when it matches, -1 otherwise (constant time). */
int mesh_auth_msg_verify (const uint8_t skey[MESH_KEY_SIZE],
                          uint64_t seq,
                          const uint8_t *p,
                          size_t len,
                          const uint8_t *mac);

/* --- munge (built with libmunge: HAVE_MUNGE) ------------------------- */

#define MESH_MUNGE_CRED_MAX 1024 /* longest credential a HELLO may carry */

/* What a HELLO's credential binds: the client's and the server's member
 * ids, the mesh size and the client's HELLO nonce (MESH_NONCE_SIZE). */
struct mesh_munge_claim {
    uint32_t client, server, nmembers;
    const uint8_t *nonce;
};

/* Check that munged answers on socket (NULL: libmunge's default socket) by
 * encoding and decoding one credential.  Returns 0, or -1 with err (built
 * without libmunge, munged not running, a credential that does not
 * decode). */
int mesh_auth_munge_probe (const char *socket, elastic_error_t *err);

/* The client's credential for (job, claim): restricted to this uid, with a
 * fresh connection secret; *cred (malloc'ed, NUL-terminated) and key (the
 * connection's key).  Returns 0, or -1 with err (munged's error). */
int mesh_auth_munge_encode (const char *socket,
                            const char *job,
                            const struct mesh_munge_claim *claim,
                            char **cred,
                            uint8_t key[MESH_KEY_SIZE],
                            elastic_error_t *err);

/* The server's check of a credential (cred, len: not NUL-terminated):
 * munged decodes it (not replayed, not expired), made by this uid, a
 * payload of this format naming job and exactly claim; key gets the
 * connection's key.  Returns 0, or -1 with err saying which check failed. */
int mesh_auth_munge_decode (const char *socket,
                            const char *job,
                            const char *cred,
                            size_t len,
                            const struct mesh_munge_claim *expect,
                            uint8_t key[MESH_KEY_SIZE],
                            elastic_error_t *err);

#endif /* ELASTIC_EXEC_MESH_AUTH_H */
