# ELASTIC_CHECK_XXHASH: --with-xxhash[=DIR], block hashes for differential
# snapshots
#
# Optional.  XXH3 (128 bits) tells which blocks of an array changed since the
# last snapshot, at several times memcpy's speed.  Without it every snapshot
# is a full copy (differential snapshots are off, with a warning if an array
# asks for them).
AC_DEFUN([ELASTIC_CHECK_XXHASH], [
  ELASTIC_CHECK_LIB([xxhash], [libxxhash], [xxhash.h], [XXH3_128bits],
                    [-lxxhash], [libxxhash-dev], [xxhash (differential snapshots)])
])
