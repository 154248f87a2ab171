"""elastic - keep an mpi4py/NumPy program running through process failures,
job loss and preemption (the Python binding of libelastic).

The Pathways elastic manager's loop, over MPI::

    import elastic                      # before mpi4py: it loads the right libmpi
    from mpi4py import MPI
    import numpy as np

    step = np.zeros(1, np.int64)
    with elastic.Manager(snapshot_period=10) as m:
        m.register_value("step", step)
        m.register_array("u", u)        # block-distributed along axis 0
        m.start(rebuild)
        while step[0] < steps:
            if m.maybe_snapshot(int(step[0])) == elastic.SUSPENDED:
                break
            m.maybe_reshard_up(int(step[0]), rebuild)
            try:
                compute(m.comm)
            except MPI.Exception as e:
                m.maybe_reshard_down(e, rebuild)   # re-raises anything else
                continue                            # step[0] was rolled back
            step[0] += 1

doc/python.md tells the whole story; include/elastic.h the semantics.
"""

from . import _load

_load.load()  # the libmpi and libelastic of this build, before mpi4py

from . import _elastic  # noqa: E402
from .errors import (  # noqa: E402,F401
    Error, InvalidError, NoMemoryError, MPIError, RelaunchError, NoULFMError,
    FileError, CorruptError, NoSnapshotError, ExistsError, NotFoundError, StateError,
    UnsupportedError, ProcFailedError)
from .manager import Manager, Info, Block  # noqa: E402,F401

from mpi4py import MPI  # noqa: E402,F401  (the same module object the user imports)

OK = _elastic.OK
SUSPENDED = _elastic.SUSPENDED
EXIT_SUSPENDED = _elastic.EXIT_SUSPENDED
EXIT_RELAUNCH = _elastic.EXIT_RELAUNCH
RESUME_AUTO = _elastic.RESUME_AUTO
RESUME_ALWAYS = _elastic.RESUME_ALWAYS
RESUME_NEVER = _elastic.RESUME_NEVER
for _n in dir(_elastic):
    if _n.startswith("ERR_"):
        globals()[_n] = getattr(_elastic, _n)
del _n

__version__ = _elastic.version()[0]


def version():
    """libelastic's version: (text, major, minor, patch)."""
    return _elastic.version()


def strerror(code):
    """The name of an ELASTIC_* code."""
    return _elastic.strerror(int(code))


def exit_code(rc=OK):
    """The process exit code for a result: ``rc`` is elastic.OK, SUSPENDED,
    an ``ERR_*`` code or an :class:`Error` (see elastic_exit_code: after a
    result every rank agreed on, only the lowest surviving rank gets the
    non-zero code)."""
    if isinstance(rc, Error):
        rc = rc.code
    elif rc is None:
        rc = OK
    return _elastic.exit_code(int(rc))


def progress(step):
    """Tell the supervisor (elastic-exec) that this process reached ``step``."""
    _elastic.progress(int(step))


def progress_snapshot(step):
    """Tell the supervisor that the snapshot of ``step`` completed."""
    _elastic.progress(int(step), True)


def record_error(message):
    """Record ``message`` in torchelastic's error file (ELASTIC_ERROR_FILE)."""
    _elastic.record_error(str(message))
