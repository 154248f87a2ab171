# ELASTIC_CHECK_FUZZ: the libFuzzer harnesses of tests/fuzz/
#
# They are built by $CC when it is clang, else by the first of clang,
# clang-14 that can link a -fsanitize=fuzzer,address,undefined program
# (Debian: clang-14 and libclang-rt-14-dev); FUZZ_CC=... chooses one,
# --disable-fuzz turns them off.  Without one the harnesses are not built
# and tests/t9003-fuzz-regress.sh skips with the reason.
AC_DEFUN([ELASTIC_CHECK_FUZZ], [
  AC_ARG_ENABLE([fuzz],
    [AS_HELP_STRING([--disable-fuzz], [do not build the libFuzzer harnesses (tests/fuzz/)])],
    [], [enable_fuzz=auto])
  AC_ARG_VAR([FUZZ_CC], [the clang that builds the libFuzzer harnesses])
  FUZZ_CFLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  elastic_fuzz_summary="no (--disable-fuzz)"
  AS_IF([test "x$enable_fuzz" != xno], [
    AS_IF([test -z "$FUZZ_CC"], [
      AS_IF([$CC --version 2>/dev/null | grep -q clang],
            [elastic_fuzz_try="$CC clang clang-14"],
            [elastic_fuzz_try="clang clang-14"])
    ], [elastic_fuzz_try=$FUZZ_CC])
    FUZZ_CC=
    for elastic_fuzz_cc in $elastic_fuzz_try; do
      AC_MSG_CHECKING([whether $elastic_fuzz_cc can build libFuzzer harnesses])
      cat > conftest_fuzz.c <<_ELASTIC_EOF
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    return size > 0 && data[[0]] == 0;
}
_ELASTIC_EOF
      AS_IF([$elastic_fuzz_cc $FUZZ_CFLAGS conftest_fuzz.c -o conftest_fuzz$EXEEXT >&AS_MESSAGE_LOG_FD 2>&1],
            [AC_MSG_RESULT([yes]); FUZZ_CC=$elastic_fuzz_cc],
            [AC_MSG_RESULT([no])])
      rm -f conftest_fuzz.c conftest_fuzz$EXEEXT
      test -n "$FUZZ_CC" && break
    done
    AS_IF([test -n "$FUZZ_CC"],
          [elastic_fuzz_summary="yes ($FUZZ_CC)"],
          [elastic_fuzz_summary="no (no clang with libFuzzer: apt-get install clang-14 libclang-rt-14-dev)"
           AS_IF([test "x$enable_fuzz" = xyes],
                 [AC_MSG_ERROR([--enable-fuzz: no clang can build -fsanitize=fuzzer,address,undefined (Debian: apt-get install clang-14 libclang-rt-14-dev)])])])
  ])
  AC_SUBST([FUZZ_CC])
  AC_SUBST([FUZZ_CFLAGS])
  AM_CONDITIONAL([HAVE_FUZZ], [test -n "$FUZZ_CC"])
])
