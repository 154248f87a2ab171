"""elastic._load - load the libmpi and libelastic this package was built with.

Debian's mpi4py links ``libmpi.so.40`` by name, which the dynamic loader
finds in /usr/lib (Open MPI 4.1, no ULFM) unless something else of that
name is loaded first.  Before mpi4py is imported, this module loads the
libmpi libelastic was linked with (recorded at build time in _build.py) by
its full path and with RTLD_GLOBAL, so that mpi4py, libelastic and Open
MPI's plugins all bind to it; then libelastic (RTLD_LOCAL: its HDF5 stays
out of the global scope, away from h5py's).  If another libmpi is already
in the process (mpi4py imported first, or an LD_LIBRARY_PATH pointing
elsewhere), it cannot be replaced: ImportError names both files.
"""

import ctypes
import os
import sys

from . import _build


def _mapped_libmpi():
    """The file of the libmpi mapped into this process, or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if os.path.basename(path).startswith("libmpi.so"):
                    return path
    except OSError:
        pass
    return None


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def load():
    """Make the right libmpi and libelastic the process's; raise ImportError
    naming both libraries if another libmpi is already loaded."""
    want = _build.LIBMPI
    have = _mapped_libmpi()
    if have is not None and not _same_file(have, want):
        who = "mpi4py" if "mpi4py.MPI" in sys.modules else "this process"
        raise ImportError(
            "elastic: %s already loaded %s, but libelastic was built with %s; "
            "import elastic before mpi4py.MPI (or run with that library's "
            "directory first in LD_LIBRARY_PATH)" % (who, have, want))
    if have is None:
        try:
            ctypes.CDLL(want, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            raise ImportError("elastic: cannot load the MPI library libelastic was "
                              "built with, %s: %s" % (want, e)) from None
    try:
        ctypes.CDLL(_build.LIBELASTIC)
    except OSError as e:
        raise ImportError("elastic: cannot load libelastic, %s: %s"
                          % (_build.LIBELASTIC, e)) from None
