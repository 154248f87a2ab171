# ELASTIC_CHECK_XXHASH: --with-xxhash[=DIR], block hashes for differential
# snapshots
#
# Optional.  XXH3 (128 bits) tells which blocks of an array changed since the
# last snapshot, at several times memcpy's speed.  Where the library has
# its x86 dispatcher (XXH3_128bits_dispatch, in Debian's libxxhash0), that
# is used: AVX2/AVX-512 at run time instead of the SSE2 of a generic build.  Without it every snapshot
# is a full copy (differential snapshots are off, with a warning if an array
# asks for them).
AC_DEFUN([ELASTIC_CHECK_XXHASH], [
  ELASTIC_CHECK_LIB([xxhash], [libxxhash], [xxhash.h], [XXH3_128bits],
                    [-lxxhash], [libxxhash-dev], [xxhash (differential snapshots)])
  AS_IF([test "x$elastic_have_xxhash" = xyes], [
    save_CFLAGS=$CFLAGS
    save_LIBS=$LIBS
    CFLAGS="$CFLAGS $XXHASH_CFLAGS"
    LIBS="$XXHASH_LIBS $LIBS"
    AC_MSG_CHECKING([for XXH3_128bits_dispatch in xxh_x86dispatch.h])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <xxh_x86dispatch.h>]],
                                    [[return (int)XXH3_128bits_dispatch ("", 0).low64;]])],
      [AC_MSG_RESULT([yes])
       AC_DEFINE([HAVE_XXH3_DISPATCH], [1], [Define if xxhash has its x86 dispatcher])],
      [AC_MSG_RESULT([no])])
    CFLAGS=$save_CFLAGS
    LIBS=$save_LIBS])
])
