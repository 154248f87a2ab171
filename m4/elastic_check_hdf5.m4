# ELASTIC_CHECK_HDF5: --with-hdf5[=DIR], parallel HDF5 for L3 snapshots
#
# Debian's hdf5-openmpi.pc pulls in Open MPI 4.1's ompi.pc, so only HDF5's
# own include and library directories are taken; MPI comes from MPI_CFLAGS.
AC_DEFUN([ELASTIC_CHECK_HDF5], [
  AC_ARG_WITH([hdf5],
    [AS_HELP_STRING([--with-hdf5@<:@=DIR@:>@], [parallel HDF5 (default: auto, Debian's libhdf5-openmpi-dev)])],
    [], [with_hdf5=check])
  elastic_have_hdf5=no
  elastic_hdf5_summary=no
  HDF5_CFLAGS=
  HDF5_LIBS=
  AS_IF([test "x$with_hdf5" != xno && test "x$elastic_have_mpi" != xyes], [
    AS_IF([test "x$with_hdf5" != xcheck], [AC_MSG_ERROR([--with-hdf5 needs MPI (parallel HDF5)])])
    with_hdf5=no
  ])
  AS_IF([test "x$with_hdf5" != xno], [
    AS_CASE([$with_hdf5],
      [yes|check], [
        multiarch=$($CC -print-multiarch 2>/dev/null)
        AS_IF([test -d /usr/include/hdf5/openmpi],
          [HDF5_CFLAGS="-I/usr/include/hdf5/openmpi"
           HDF5_LIBS="-L/usr/lib/$multiarch/hdf5/openmpi -Wl,-rpath,/usr/lib/$multiarch/hdf5/openmpi -lhdf5"],
          [HDF5_LIBS="-lhdf5"])],
      [HDF5_CFLAGS="-I$with_hdf5/include"
       HDF5_LIBS="-L$with_hdf5/lib -Wl,-rpath,$with_hdf5/lib -lhdf5"])
    save_CFLAGS=$CFLAGS
    save_LIBS=$LIBS
    CFLAGS="$CFLAGS $MPI_CFLAGS $HDF5_CFLAGS"
    LIBS="$HDF5_LIBS $MPI_LIBS $LIBS"
    AC_MSG_CHECKING([for parallel HDF5 (H5Pset_fapl_mpio)])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>]],
      [[hid_t p = H5Pcreate (H5P_FILE_ACCESS); return H5Pset_fapl_mpio (p, MPI_COMM_WORLD, MPI_INFO_NULL);]])],
      [elastic_have_hdf5=yes], [elastic_have_hdf5=no])
    AC_MSG_RESULT([$elastic_have_hdf5])
    CFLAGS=$save_CFLAGS
    LIBS=$save_LIBS
    AS_IF([test "x$elastic_have_hdf5" = xyes],
      [AC_DEFINE([HAVE_HDF5], [1], [Define if parallel HDF5 is available])
       elastic_hdf5_summary="yes $HDF5_CFLAGS"],
      [HDF5_CFLAGS=; HDF5_LIBS=
       AS_IF([test "x$with_hdf5" != xcheck],
         [AC_MSG_ERROR([--with-hdf5=$with_hdf5: parallel HDF5 not found (H5Pset_fapl_mpio); on Debian: apt-get install libhdf5-openmpi-dev])])])
  ])
  AC_SUBST([HDF5_CFLAGS])
  AC_SUBST([HDF5_LIBS])
  AM_CONDITIONAL([HAVE_HDF5], [test "x$elastic_have_hdf5" = xyes])
])
