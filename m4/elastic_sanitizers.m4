# ELASTIC_ENABLE_SANITIZERS: --enable-sanitizers builds with ASan and UBSan
AC_DEFUN([ELASTIC_ENABLE_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
    [], [enable_sanitizers=no])
  SANITIZER_CFLAGS=
  AS_IF([test "x$enable_sanitizers" = xyes], [
    SANITIZER_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    save_CFLAGS=$CFLAGS
    save_LDFLAGS=$LDFLAGS
    CFLAGS="$CFLAGS $SANITIZER_CFLAGS"
    LDFLAGS="$LDFLAGS $SANITIZER_CFLAGS"
    AC_MSG_CHECKING([whether $CC supports -fsanitize=address,undefined])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([--enable-sanitizers: $CC cannot build with ASan/UBSan (Debian: apt-get install gcc libasan8 libubsan1)])])
    CFLAGS=$save_CFLAGS
    LDFLAGS=$save_LDFLAGS
  ])
  AC_SUBST([SANITIZER_CFLAGS])
  AM_CONDITIONAL([ENABLE_SANITIZERS], [test "x$enable_sanitizers" = xyes])
])
