# ELASTIC_CHECK_SODIUM: --with-sodium[=DIR], libsodium for the mesh's authentication
#
# The elastic-exec mesh (src/exec/mesh/) authenticates every connection
# between the members of a job with a challenge-response MAC
# (crypto_auth, HMAC-SHA-512-256) over a per-job key.  Without libsodium
# the mesh library and its tests are not built.
AC_DEFUN([ELASTIC_CHECK_SODIUM], [
  ELASTIC_CHECK_LIB([sodium], [libsodium >= 1.0.12], [sodium.h], [crypto_auth_verify], [-lsodium],
                    [libsodium-dev], [libsodium (mesh authentication)])
])
