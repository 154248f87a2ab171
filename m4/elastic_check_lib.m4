# ELASTIC_CHECK_LIB(NAME, PKG-MODULE, HEADER, FUNCTION, LIBS, DEBIAN-PKG, WHAT)
#
# The shared logic of the optional dependencies: --with-NAME[=DIR]
# (unset = auto, no = off, yes = required, DIR = look in DIR/include, DIR/lib),
# pkg-config first, then a plain header + link test.  Sets NAME_CFLAGS,
# NAME_LIBS (upper case), HAVE_NAME (define and conditional) and
# elastic_NAME_summary.
AC_DEFUN([ELASTIC_CHECK_LIB], [
  m4_pushdef([UP], m4_toupper([$1]))
  AC_ARG_WITH([$1],
    [AS_HELP_STRING([--with-$1@<:@=DIR@:>@], [$7 (default: auto)])],
    [], [with_$1=check])
  elastic_have_$1=no
  elastic_$1_summary=no
  AS_IF([test "x$with_$1" != xno], [
    elastic_found=no
    AS_CASE([$with_$1],
      [yes|check], [
        m4_ifnblank([$2], [PKG_CHECK_MODULES(UP, [$2], [elastic_found=pkg], [elastic_found=no])])
        AS_IF([test "x$elastic_found" = xno], [UP[]_CFLAGS=; UP[]_LIBS="$5"])],
      [elastic_libdir=$with_$1/lib
       AS_IF([test -d "$with_$1/lib64"], [elastic_libdir=$with_$1/lib64])
       UP[]_CFLAGS="-I$with_$1/include"
       UP[]_LIBS="-L$elastic_libdir -Wl,-rpath,$elastic_libdir $5"])
    save_CFLAGS=$CFLAGS
    save_LIBS=$LIBS
    CFLAGS="$CFLAGS $UP[]_CFLAGS"
    LIBS="$UP[]_LIBS $LIBS"
    AC_MSG_CHECKING([for $4 in $3 ($7)])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <$3>]], [[void *p = (void *) $4; return p == 0;]])],
      [elastic_have_$1=yes], [elastic_have_$1=no])
    AC_MSG_RESULT([$elastic_have_$1])
    CFLAGS=$save_CFLAGS
    LIBS=$save_LIBS
    AS_IF([test "x$elastic_have_$1" = xyes],
      [AC_DEFINE([HAVE_]UP, [1], [Define if $7 is available])
       elastic_$1_summary="yes ${UP[]_CFLAGS}"],
      [UP[]_CFLAGS=; UP[]_LIBS=
       AS_IF([test "x$with_$1" != xcheck],
         [AC_MSG_ERROR([--with-$1=$with_$1: $7 not found ($3, $4); on Debian: apt-get install $6 (or run scripts/bootstrap.sh)])])])
  ])
  AC_SUBST(UP[_CFLAGS])
  AC_SUBST(UP[_LIBS])
  AM_CONDITIONAL([HAVE_]UP, [test "x$elastic_have_$1" = xyes])
  m4_popdef([UP])
])
