"""elastic.errors - libelastic's error codes as Python exceptions.

Every error a libelastic call returns is raised as an :class:`Error` (or a
subclass) whose message is the C library's own text and whose ``code`` is
the ``ELASTIC_ERR_*`` value (``elastic.ERR_*``).  Arguments the binding
rejects before calling C (a wrong dtype, a non-contiguous array) raise
:class:`InvalidError`, which is also a ``ValueError``.
"""

from . import _elastic


class Error(Exception):
    """A libelastic error: ``code`` (an ``elastic.ERR_*``) and the C message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self):
        return self.message

    def __repr__(self):
        return "%s(%s, %r)" % (type(self).__name__, _elastic.strerror(self.code), self.message)


class InvalidError(Error, ValueError):
    """ELASTIC_ERR_INVAL: an invalid argument or configuration value."""


class NoMemoryError(Error, MemoryError):
    """ELASTIC_ERR_NOMEM."""


class MPIError(Error):
    """ELASTIC_ERR_MPI: an MPI call failed with a non-elastic error."""


class RelaunchError(Error):
    """ELASTIC_ERR_RELAUNCH: in-place recovery is impossible; exit with
    ``elastic.exit_code(e)`` (76) so that the launcher relaunches."""


class NoULFMError(RelaunchError):
    """ELASTIC_ERR_NO_ULFM: the MPI library has no ULFM (relaunch-only mode)."""


class FileError(Error, OSError):
    """ELASTIC_ERR_IO: a file system error."""


class CorruptError(Error):
    """ELASTIC_ERR_CORRUPT: snapshot data failed verification."""


class NoSnapshotError(Error):
    """ELASTIC_ERR_NO_SNAPSHOT: a resume found no usable snapshot."""


class ExistsError(Error):
    """ELASTIC_ERR_EXISTS: the name is already registered."""


class NotFoundError(Error, LookupError):
    """ELASTIC_ERR_NOT_FOUND: no such name, rank or item."""


class StateError(Error):
    """ELASTIC_ERR_STATE: the call is not valid now (after start, outside a
    handler, after destroy)."""


class UnsupportedError(Error):
    """ELASTIC_ERR_UNSUPPORTED: the feature is not built in (e.g. no HDF5)."""


class ProcFailedError(Error):
    """ELASTIC_ERR_PROC_FAILED: a process failed during the call (inside a
    handler: let it raise, the library retries the handler)."""


_BY_CODE = {
    _elastic.ERR_INVAL: InvalidError,
    _elastic.ERR_NOMEM: NoMemoryError,
    _elastic.ERR_MPI: MPIError,
    _elastic.ERR_RELAUNCH: RelaunchError,
    _elastic.ERR_NO_ULFM: NoULFMError,
    _elastic.ERR_IO: FileError,
    _elastic.ERR_CORRUPT: CorruptError,
    _elastic.ERR_NO_SNAPSHOT: NoSnapshotError,
    _elastic.ERR_EXISTS: ExistsError,
    _elastic.ERR_NOT_FOUND: NotFoundError,
    _elastic.ERR_STATE: StateError,
    _elastic.ERR_UNSUPPORTED: UnsupportedError,
    _elastic.ERR_PROC_FAILED: ProcFailedError,
}


def from_code(code, message):
    """The exception for a libelastic code and message."""
    return _BY_CODE.get(code, Error)(code, message)


_elastic._set_error_factory(from_code)
