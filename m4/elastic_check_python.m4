# ELASTIC_CHECK_PYTHON: --with-python[=PYTHON], the Python binding (python/)
#
# PYTHON is the interpreter the binding is built for.  Unset: /usr/bin/python3
# (Debian's NumPy, mpi4py and h5py are that interpreter's, not a pyenv one
# first on PATH), built if it has its C headers, NumPy and mpi4py and MPI
# was found; "no": not built; "yes": required; a path: that interpreter,
# required.  `make install` puts the package in PREFIX/lib/pythonX.Y/ and the
# interpreter's site directory name (dist-packages on Debian, where
# /usr/local/lib/python3.11/dist-packages is on sys.path).
#
# Sets PYTHON, PYTHON_CPPFLAGS, pythonsitedir, ELASTIC_LIBMPI (the libmpi
# file MPI_LIBS links, which the package loads before mpi4py does), and
# HAVE_PYTHON.
AC_DEFUN([ELASTIC_CHECK_PYTHON], [
  AC_REQUIRE([ELASTIC_CHECK_MPI])
  AC_ARG_WITH([python],
    [AS_HELP_STRING([--with-python@<:@=PYTHON@:>@],
      [the Python binding, for this interpreter (default: /usr/bin/python3 if it has headers, NumPy and mpi4py)])],
    [], [with_python=check])
  elastic_have_python=no
  elastic_python_summary=no
  elastic_python_why=
  PYTHON_CPPFLAGS=
  pythonsitedir=
  ELASTIC_LIBMPI=
  AS_CASE([$with_python],
    [no], [],
    [yes|check], [PYTHON=/usr/bin/python3],
    [PYTHON=$with_python])
  AS_IF([test "x$with_python" != xno], [
    AC_MSG_CHECKING([for the Python binding's needs in $PYTHON])
    AS_IF([test "x$elastic_have_mpi" != xyes], [elastic_python_why="no MPI"],
          [! test -x "$PYTHON"], [elastic_python_why="no executable $PYTHON"],
          [! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 7))' 2>/dev/null],
            [elastic_python_why="$PYTHON is older than 3.7"],
          [! "$PYTHON" -c 'import numpy' 2>/dev/null],
            [elastic_python_why="$PYTHON has no numpy (apt-get install python3-numpy)"],
          [! "$PYTHON" -c 'import mpi4py' 2>/dev/null],
            [elastic_python_why="$PYTHON has no mpi4py (apt-get install python3-mpi4py)"])
    AS_IF([test -z "$elastic_python_why"], [
      python_inc=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()[["include"]])')
      AS_IF([test -f "$python_inc/Python.h"], [PYTHON_CPPFLAGS="-I$python_inc"],
            [elastic_python_why="no $python_inc/Python.h (apt-get install python3-dev)"])])
    AS_IF([test -z "$elastic_python_why"], [
      dnl the libmpi file of MPI_LIBS's -L directories, else the loader's
      for w in $MPI_LIBS; do
        AS_CASE([$w], [-L*], [
          AS_IF([test -z "$ELASTIC_LIBMPI" && test -e "${w#-L}/libmpi.so"],
                [ELASTIC_LIBMPI=$(readlink -f "${w#-L}/libmpi.so")])])
      done
      AS_IF([test -z "$ELASTIC_LIBMPI"],
            [ELASTIC_LIBMPI=$("$PYTHON" -c 'import ctypes.util; print(ctypes.util.find_library("mpi") or "")')])
      AS_IF([test -z "$ELASTIC_LIBMPI"], [elastic_python_why="cannot find the libmpi of $MPICC"])])
    AS_IF([test -z "$elastic_python_why"], [
      python_ver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[[:2]])')
      python_leaf=$("$PYTHON" -c 'import os, sysconfig; print(os.path.basename(sysconfig.get_path("platlib")))')
      pythonsitedir='${prefix}'"/lib/python$python_ver/$python_leaf"
      elastic_have_python=yes
      elastic_python_summary="yes ($PYTHON $python_ver, mpi4py $("$PYTHON" -c 'import mpi4py; print(mpi4py.__version__)'), installs to $pythonsitedir)"
      AC_MSG_RESULT([yes (Python $python_ver, $ELASTIC_LIBMPI)])],
      [AC_MSG_RESULT([no: $elastic_python_why])
       AS_IF([test "x$with_python" != xcheck],
         [AC_MSG_ERROR([--with-python=$with_python: $elastic_python_why])])
       elastic_python_summary="no ($elastic_python_why)"])
  ])
  AC_SUBST([PYTHON])
  AC_SUBST([PYTHON_CPPFLAGS])
  AC_SUBST([pythonsitedir])
  AC_SUBST([ELASTIC_LIBMPI])
  AM_CONDITIONAL([HAVE_PYTHON], [test "x$elastic_have_python" = xyes])
])
