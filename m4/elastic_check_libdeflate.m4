# ELASTIC_CHECK_LIBDEFLATE: --with-libdeflate[=DIR], a fast crc32 for L3
#
# Optional.  libdeflate_crc32 computes the same crc32 as zlib (the L3 file
# format is unchanged) with carry-less multiplication (PCLMUL/AVX) where
# the CPU has it: several times faster than zlib 1.2's tables, which bound
# the L3 write and restore bandwidth.  Without it L3 uses zlib's crc32.
AC_DEFUN([ELASTIC_CHECK_LIBDEFLATE], [
  ELASTIC_CHECK_LIB([libdeflate], [libdeflate], [libdeflate.h], [libdeflate_crc32],
                    [-ldeflate], [libdeflate-dev], [libdeflate (fast L3 checksums)])
])
