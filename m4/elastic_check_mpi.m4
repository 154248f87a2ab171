# ELASTIC_CHECK_MPI: --with-mpi[=DIR|MPICC], and ULFM detection
#
# DIR is an MPI prefix (DIR/bin/mpicc) or the compiler wrapper itself.
# Unset: the ULFM Open MPI built by scripts/bootstrap.sh if present, else the
# mpicc on PATH.  "no" builds the tools only (no libelastic, no examples).
#
# Sets MPICC, MPIRUN, MPI_CFLAGS, MPI_LIBS, HAVE_MPI, HAVE_ULFM.
AC_DEFUN([ELASTIC_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi@<:@=DIR|MPICC@:>@],
      [MPI prefix or compiler wrapper (default: the bootstrap ULFM Open MPI, else mpicc on PATH)])],
    [], [with_mpi=check])
  elastic_have_mpi=no
  elastic_have_ulfm=no
  elastic_mpi_summary=no
  elastic_ulfm_summary="no (relaunch-only mode)"
  MPICC=
  MPIRUN=
  AS_CASE([$with_mpi],
    [no], [],
    [yes|check], [
      bootstrap_prefix="${ELASTIC_DEPS_DIR:-/opt/elastic-deps}/openmpi-5.0.7-ulfm"
      AS_IF([test -x "$bootstrap_prefix/bin/mpicc"],
            [MPICC="$bootstrap_prefix/bin/mpicc"],
            [AC_PATH_PROG([MPICC], [mpicc], [])])],
    [AS_IF([test -d "$with_mpi"], [MPICC="$with_mpi/bin/mpicc"], [MPICC="$with_mpi"])])

  AS_IF([test "x$with_mpi" != xno], [
    AS_IF([test -z "$MPICC" || test ! -x "$MPICC"], [
      AS_IF([test "x$with_mpi" = xcheck],
        [AC_MSG_WARN([no MPI compiler wrapper found: libelastic and the examples are not built (run scripts/bootstrap.sh, or apt-get install libopenmpi-dev)])
         MPICC=],
        [AC_MSG_ERROR([--with-mpi=$with_mpi: no executable MPI compiler wrapper at '$MPICC' (run scripts/bootstrap.sh for Open MPI 5 with ULFM, or apt-get install libopenmpi-dev)])])
    ])
  ])

  AS_IF([test -n "$MPICC"], [
    AC_MSG_CHECKING([MPI compile and link flags from $MPICC])
    AS_IF([MPI_CFLAGS=$($MPICC --showme:compile 2>/dev/null) && MPI_LIBS=$($MPICC --showme:link 2>/dev/null)], [],
      [mpi_show=$($MPICC -show 2>/dev/null) || AC_MSG_ERROR([$MPICC understands neither --showme nor -show])
       MPI_CFLAGS=
       MPI_LIBS=
       for w in $mpi_show; do
         AS_CASE([$w], [-I*|-D*|-pthread], [MPI_CFLAGS="$MPI_CFLAGS $w"],
                       [-L*|-l*|-Wl,*], [MPI_LIBS="$MPI_LIBS $w"])
       done])
    AC_MSG_RESULT([$MPI_CFLAGS | $MPI_LIBS])
    MPIRUN="$(dirname "$MPICC")/mpirun"
    AS_IF([test -x "$MPIRUN"], [], [AC_MSG_ERROR([no mpirun beside $MPICC])])
    save_CFLAGS=$CFLAGS
    save_LIBS=$LIBS
    CFLAGS="$CFLAGS $MPI_CFLAGS"
    LIBS="$MPI_LIBS $LIBS"
    AC_MSG_CHECKING([whether MPI programs link])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[MPI_Init (0, 0); MPI_Finalize ();]])],
      [AC_MSG_RESULT([yes])], [AC_MSG_RESULT([no])
       AC_MSG_ERROR([cannot link an MPI program with $MPICC (see config.log)])])
    elastic_have_mpi=yes
    mpi_version=$($MPIRUN --version 2>/dev/null | head -n 1)
    elastic_mpi_summary="$MPICC ($mpi_version)"
    AC_MSG_CHECKING([for ULFM (MPIX_Comm_shrink, agree, revoke, MPIX_ERR_PROC_FAILED)])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[
#include <mpi.h>
#include <mpi-ext.h>
]], [[
MPI_Comm c;
int flag = 1;
int e = MPIX_ERR_PROC_FAILED + MPIX_ERR_PROC_FAILED_PENDING + MPIX_ERR_REVOKED;
MPIX_Comm_revoke (MPI_COMM_WORLD);
MPIX_Comm_agree (MPI_COMM_WORLD, &flag);
MPIX_Comm_shrink (MPI_COMM_WORLD, &c);
return e;
]])], [elastic_have_ulfm=yes], [elastic_have_ulfm=no])
    AC_MSG_RESULT([$elastic_have_ulfm])
    CFLAGS=$save_CFLAGS
    LIBS=$save_LIBS
    AS_IF([test "x$elastic_have_ulfm" = xyes],
      [AC_DEFINE([HAVE_ULFM], [1], [Define if MPI has the ULFM extensions])
       elastic_ulfm_summary="yes (in-place recovery)"])
  ])
  AC_SUBST([MPICC])
  AC_SUBST([MPIRUN])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_SUBST([HAVE_ULFM], [$elastic_have_ulfm])
  AM_CONDITIONAL([HAVE_MPI], [test "x$elastic_have_mpi" = xyes])
  AM_CONDITIONAL([HAVE_ULFM], [test "x$elastic_have_ulfm" = xyes])
])
