# ELASTIC_CHECK_SLURM: --with-slurm[=DIR], slurm/spank.h for the SPANK plugin
AC_DEFUN([ELASTIC_CHECK_SLURM], [
  AC_ARG_WITH([slurm],
    [AS_HELP_STRING([--with-slurm@<:@=DIR@:>@], [Slurm SPANK headers for spank_elastic.so (default: auto)])],
    [], [with_slurm=check])
  elastic_have_slurm=no
  elastic_slurm_summary=no
  SLURM_CFLAGS=
  AS_CASE([$with_slurm], [no], [],
    [yes|check], [],
    [SLURM_CFLAGS="-I$with_slurm/include"])
  AS_IF([test "x$with_slurm" != xno], [
    save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $SLURM_CFLAGS"
    AC_CHECK_HEADER([slurm/spank.h], [elastic_have_slurm=yes], [elastic_have_slurm=no])
    CPPFLAGS=$save_CPPFLAGS
    AS_IF([test "x$elastic_have_slurm" = xyes],
      [elastic_slurm_summary="yes ${SLURM_CFLAGS}"],
      [AS_IF([test "x$with_slurm" != xcheck],
        [AC_MSG_ERROR([--with-slurm=$with_slurm: slurm/spank.h not found; on Debian: apt-get install libslurm-dev])])])
  ])
  AC_SUBST([SLURM_CFLAGS])
  AM_CONDITIONAL([HAVE_SLURM], [test "x$elastic_have_slurm" = xyes])
])
