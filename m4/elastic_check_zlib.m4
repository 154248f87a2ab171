# ELASTIC_CHECK_ZLIB: --with-zlib[=DIR], crc32 checksums of L3 snapshots
#
# HDF5 already depends on zlib, so this adds no new library to libelastic.
# Must follow ELASTIC_CHECK_HDF5: L3 (parallel HDF5) needs it.
AC_DEFUN([ELASTIC_CHECK_ZLIB], [
  ELASTIC_CHECK_LIB([zlib], [zlib], [zlib.h], [crc32], [-lz],
                    [zlib1g-dev], [zlib (L3 snapshot checksums)])
  AS_IF([test "x$elastic_have_hdf5" = xyes && test "x$elastic_have_zlib" != xyes],
    [AC_MSG_ERROR([parallel HDF5 (L3 snapshots) needs zlib for its checksums: apt-get install zlib1g-dev, or configure --without-hdf5])])
])
