"""elastic.manager - the elastic manager (Pathways' Manager) over libelastic.

See doc/python.md for the loop and include/elastic.h for the semantics:
every method here is one libelastic call on the objects' own memory.
"""

import atexit
import collections
import dataclasses
import json
import pickle
import weakref

import numpy as np
from mpi4py import MPI

from . import _elastic
from .errors import InvalidError, MPIError

# NumPy dtypes and the libelastic element types (the L3 dataset types)
_TYPES = {
    np.dtype(np.uint8): _elastic.TYPE_BYTES,
    np.dtype(np.int32): _elastic.TYPE_INT32,
    np.dtype(np.int64): _elastic.TYPE_INT64,
    np.dtype(np.uint32): _elastic.TYPE_UINT32,
    np.dtype(np.uint64): _elastic.TYPE_UINT64,
    np.dtype(np.float32): _elastic.TYPE_FLOAT32,
    np.dtype(np.float64): _elastic.TYPE_FLOAT64,
}
_TYPE_NAMES = "uint8, int32, int64, uint32, uint64, float32, float64"

_RESUME = {"auto": _elastic.RESUME_AUTO, "always": _elastic.RESUME_ALWAYS,
           "never": _elastic.RESUME_NEVER}

Block = collections.namedtuple("Block", "offset count global_count")
Block.__doc__ = "This rank's block of an array: first element, count, global count."


@dataclasses.dataclass(frozen=True)
class Info:
    """What elastic_manager_info reports (see elastic_info_t)."""
    rank: int            # rank in the working communicator (-1 on an idle spare)
    size: int            # working size
    is_spare: bool       # True on an idle spare
    original_rank: int   # rank in the communicator given to Manager
    original_size: int   # working size at creation
    idle_spares: int     # spare ranks waiting
    events: int          # elastic down events so far
    generation: int      # world changes so far
    snapshot_step: int   # newest committed snapshot (-1: none)
    old_size: int        # working size of that snapshot (in a handler: the one restored)
    persist_step: int    # newest L3 snapshot written or resumed from (-1: none)
    resumed_step: int    # the L3 step this run resumed from (-1: started fresh)
    resumed_size: int    # the world size that wrote it (0: fresh)
    resumed_from: str    # its file (None: fresh)


def _int(where, v, bool_ok=False):
    if isinstance(v, bool) and not bool_ok:
        raise TypeError("%s: expected an int (got bool %r)" % (where, v))
    if isinstance(v, (int, np.integer)):
        return int(v)
    raise TypeError("%s: expected an int (got %s %r)" % (where, type(v).__name__, v))


def _check_buffer(what, name, a, min_ndim):
    """The dtype's element type for a registrable ndarray, else InvalidError."""
    if not isinstance(name, str) or not name:
        raise TypeError("elastic: %s name: expected a non-empty str (got %r)" % (what, name))
    if not isinstance(a, np.ndarray):
        raise InvalidError(_elastic.ERR_INVAL,
                           "%s '%s': a %s is invalid (expected a numpy.ndarray)"
                           % (what, name, type(a).__name__))
    t = _TYPES.get(a.dtype)
    if t is None or not a.dtype.isnative:
        raise InvalidError(_elastic.ERR_INVAL,
                           "%s '%s': dtype %s is invalid (expected one of %s, native "
                           "byte order)" % (what, name, a.dtype.str if t else a.dtype,
                                            _TYPE_NAMES))
    if a.ndim < min_ndim:
        raise InvalidError(_elastic.ERR_INVAL,
                           "%s '%s': a %d-d array is invalid (expected at least %d "
                           "dimension: axis 0 is distributed)" % (what, name, a.ndim, min_ndim))
    if not a.flags.c_contiguous:
        raise InvalidError(_elastic.ERR_INVAL,
                           "%s '%s': a non-contiguous array is invalid (expected a "
                           "C-contiguous one: numpy.ascontiguousarray makes one, but "
                           "register the array you compute with)" % (what, name))
    if not a.flags.writeable:
        raise InvalidError(_elastic.ERR_INVAL,
                           "%s '%s': a read-only array is invalid (expected a writeable "
                           "one: libelastic restores into it)" % (what, name))
    if not a.flags.aligned:
        raise InvalidError(_elastic.ERR_INVAL,
                           "%s '%s': an unaligned array is invalid" % (what, name))
    return t


class Manager:
    """An elastic manager over ``comm`` (collective over it, spares included).

    Keyword arguments are elastic_config_t's fields (include/elastic.h);
    the ``ELASTIC_*`` environment variables override them.  ``on_event``
    receives every event as a dict.  Use it as a context manager, or call
    :meth:`destroy` (collective) before MPI is finalized.
    """

    def __init__(self, comm=None, *, snapshot_period=10, snapshot_buffer_size=2,
                 persist_period=0, reshard_check_period=10,
                 max_elastic_down_event_count=16, max_reshard_retry_count=3,
                 min_world_size=1, spare_ranks=0, spare_takeover=True,
                 snapshot_dir=".", event_log=None, run_id=None, snapshot_keep=3,
                 resume="auto", resume_fresh_ok=False, resume_from=None, signals=None,
                 signal_check_period=0, deadline=0, deadline_margin=30, on_event=None):
        if comm is None:
            comm = MPI.COMM_WORLD
        if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
            raise InvalidError(_elastic.ERR_INVAL,
                               "comm: %r is invalid (expected an mpi4py Intracomm)" % (comm,))
        if isinstance(resume, str):
            if resume not in _RESUME:
                raise InvalidError(_elastic.ERR_INVAL,
                                   "resume: '%s' is invalid (expected auto, always or "
                                   "never)" % resume)
            resume = _RESUME[resume]
        if signals is not None and not isinstance(signals, str):
            signals = ",".join(s if isinstance(s, str) else getattr(s, "name", str(s))
                               for s in signals)
            signals = signals.replace("SIG", "") or "none"
        cfg = {}
        ints = dict(snapshot_period=snapshot_period,
                    snapshot_buffer_size=snapshot_buffer_size, persist_period=persist_period,
                    reshard_check_period=reshard_check_period,
                    max_elastic_down_event_count=max_elastic_down_event_count,
                    max_reshard_retry_count=max_reshard_retry_count,
                    min_world_size=min_world_size, spare_ranks=spare_ranks,
                    snapshot_keep=snapshot_keep, resume=resume,
                    signal_check_period=signal_check_period,
                    deadline_margin=deadline_margin)
        for k, v in ints.items():
            cfg[k] = _int("elastic.Manager: " + k, v)
        for k, v in dict(spare_takeover=spare_takeover, resume_fresh_ok=resume_fresh_ok).items():
            cfg[k] = _int("elastic.Manager: " + k, v, bool_ok=True)
        if isinstance(deadline, float):
            deadline = int(deadline)
        cfg["deadline"] = _int("elastic.Manager: deadline", deadline)
        for k, v in dict(snapshot_dir=snapshot_dir, event_log=event_log, run_id=run_id,
                         resume_from=resume_from, signals=signals).items():
            if v is not None and not isinstance(v, str):
                v = str(v) if hasattr(v, "__fspath__") else v
                if not isinstance(v, str):
                    raise TypeError("elastic.Manager: %s: expected a str (got %s)"
                                    % (k, type(v).__name__))
            cfg[k] = v
        self._objects = {}   # blobs registered as Python objects (pickled)
        self._placers = {}   # array name -> place(count) -> its new storage
        self._comm = None    # (key, mpi4py Intracomm) of the working communicator
        self._m = _elastic.Manager(comm.py2f(), cfg)
        self._m.set_after_handler(self._refresh_blobs)
        _live.add(self)
        if on_event is not None:
            self.set_event_callback(on_event)

    # ---- the end ----

    def destroy(self):
        """End the manager (collective, see elastic_manager_destroy); twice is fine."""
        self._m.destroy()
        self._objects.clear()
        self._placers.clear()
        self._comm = None

    @property
    def destroyed(self):
        return self._m.destroyed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False

    # ---- registration (before start) ----

    def register_value(self, name, value):
        """Register a replicated value (same on every rank): an ndarray
        (e.g. ``np.zeros(1, np.int64)`` for the step) restored in place."""
        t = _check_buffer("value", name, value, 0)
        self._m.register_value(name, value, t)

    def register_array(self, name, array, place=None):
        """Register an ndarray distributed in blocks along axis 0 (a row of
        the trailing axes is one element; its dtype is the L3 dataset's).
        On a spare pass an empty block, e.g. ``np.empty((0, nx))``.

        ``place(count)``, if given, returns the ndarray (shape ``(count,) +
        array.shape[1:]``, same dtype) a restored block of ``count`` rows is
        written into; the default keeps the array when its row count is
        unchanged and makes a new one otherwise."""
        t = _check_buffer("array", name, array, 1)
        row, dtype = array.shape[1:], array.dtype
        elem = dtype.itemsize * int(np.prod(row, dtype=np.int64))
        if elem == 0:
            raise InvalidError(_elastic.ERR_INVAL,
                               "array '%s': shape %s is invalid (expected non-empty rows)"
                               % (name, array.shape))
        if place is not None and not callable(place):
            raise TypeError("array '%s': place must be callable (got %s)"
                            % (name, type(place).__name__))

        def placed(count):
            return self._place(name, row, dtype, place, count)

        self._m.register_array(name, array, elem, t, placed)
        self._placers[name] = placed

    def _place(self, name, row, dtype, place, count):
        count = int(count)
        if place is None:
            cur = self._m.array_storage(name)
            if isinstance(cur, np.ndarray) and cur.shape[0] == count:
                return cur
            return np.empty((count,) + row, dtype)
        out = place(count)
        try:
            _check_buffer("array", name, out, 1)
        except InvalidError as e:
            raise InvalidError(e.code, "the placement hook's result: " + e.message) from None
        if out.shape != (count,) + row or out.dtype != dtype:
            raise InvalidError(_elastic.ERR_INVAL,
                               "array '%s': the placement hook gave %s %s (expected %s %s)"
                               % (name, out.dtype, out.shape, dtype, (count,) + row))
        return out

    def register_blob(self, name, data):
        """Register (or update) a per-rank blob: bytes-like data is saved as
        it is at each snapshot; any other object is pickled at each
        maybe_snapshot call and after each handler, and blob_fetch unpickles
        it.  New names only before start."""
        if not isinstance(name, str) or not name:
            raise TypeError("elastic: blob name: expected a non-empty str (got %r)" % (name,))
        try:
            memoryview(data)
            raw = True
        except TypeError:
            raw = False
        if raw:
            if name in self._objects:
                raise InvalidError(_elastic.ERR_INVAL,
                                   "blob '%s': bytes are invalid for a blob registered "
                                   "as an object (expected a picklable object)" % name)
            if isinstance(data, np.ndarray) and not data.flags.c_contiguous:
                raise InvalidError(_elastic.ERR_INVAL,
                                   "blob '%s': a non-contiguous array is invalid "
                                   "(expected a C-contiguous one)" % name)
            self._m.register_blob(name, data)
            return
        try:
            pickled = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:
            raise InvalidError(_elastic.ERR_INVAL,
                               "blob '%s': a %s that cannot be pickled is invalid (%s)"
                               % (name, type(data).__name__, e)) from e
        self._m.register_blob(name, pickled)
        self._objects[name] = data

    def _refresh_blobs(self):
        for name, obj in self._objects.items():
            self._m.register_blob(name, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def set_event_callback(self, callback):
        """Call ``callback(event_dict)`` for every event line (None: stop)."""
        if callback is None:
            self._m.set_event_callback(None)
            return
        if not callable(callback):
            raise TypeError("elastic: the event callback must be callable (got %s)"
                            % type(callback).__name__)
        self._m.set_event_callback(lambda text: callback(json.loads(text)))

    # ---- the loop ----

    def start(self, handler=None, *args, **kwargs):
        """Start (collective): resume from L3 if the launch asks for it (the
        handler has then run).  Returns True on a working rank; on a spare,
        waits until it joins (True) or the job ends (False: leave)."""
        self._refresh_blobs()
        return self._m.start(handler, args, kwargs)

    def maybe_snapshot(self, step):
        """Call at the top of every step: snapshot every snapshot_period
        steps (recovering in place if a process dies meanwhile).  Returns
        elastic.OK (0), or elastic.SUSPENDED once the job has suspended."""
        if self._objects:
            self._refresh_blobs()
        return self._m.maybe_snapshot(step)

    def maybe_reshard_down(self, error, handler, *args, **kwargs):
        """Pass the MPI.Exception of a failed MPI call (inside ``except``):
        if it is a process failure, repair, call ``handler(*args,
        **kwargs)`` on the new world and return its result; re-raise it if
        it is anything else.  Final errors raise elastic.RelaunchError."""
        if isinstance(error, MPI.Exception):
            code = error.Get_error_code()
        elif isinstance(error, BaseException):
            raise error
        else:
            code = _int("maybe_reshard_down: error", error)
            error = None
        rc, result = self._m.maybe_reshard_down(code, handler, args, kwargs)
        if rc == _elastic.ERR_MPI:
            if error is not None:
                raise error
            raise MPIError(rc, "MPI error %d is not an elastic event" % code)
        return result

    def maybe_reshard_up(self, step, handler, *args, **kwargs):
        """Call every step: every reshard_check_period steps grow back from
        idle spares; returns the handler's result if it resharded, else None."""
        if self._objects:
            self._refresh_blobs()
        rc, resharded, result = self._m.maybe_reshard_up(step, handler, args, kwargs)
        return result if resharded else None

    # ---- in the handler ----

    @property
    def comm(self):
        """The working communicator, an mpi4py Intracomm owned by the
        library (never Free it; read it again after a world change);
        MPI.COMM_NULL on an idle spare."""
        h = self._m.comm()
        if h is None:
            return MPI.COMM_NULL
        key = h + (self._m.info()[7],)
        if self._comm is None or self._comm[0] != key:
            self._comm = (key, MPI.Intracomm.f2py(h[0]))
        return self._comm[1]

    def info(self):
        """The manager's state (an elastic.Info)."""
        i = self._m.info()
        return Info(i[0], i[1], bool(i[2]), *i[3:])

    def array_block(self, name):
        """This rank's block of array ``name`` (in a handler: the new one)."""
        return Block(*self._m.array_block(name))

    def array_restore(self, name, out=None):
        """In a handler: this rank's restored block of ``name`` as an
        ndarray, which becomes the array's storage.  Without ``out`` it is
        the block libelastic already restored in place (the array itself
        when its row count is unchanged, else what the placement hook
        gave); with ``out`` (the right shape and dtype) it is copied there."""
        cur = self._m.array_storage(name)
        if not self._m.in_handler:
            self._m.array_restore(name, cur)  # libelastic says why not
        _, count, _ = self._m.array_block(name)
        if out is None:
            if isinstance(cur, np.ndarray) and cur.shape[0] == count:
                out = cur
            else:
                # a resume from L3 (libelastic calls no placement hook then)
                out = self._placers[name](count)
        else:
            _check_buffer("array", name, out, 1)
            want = (count,) + cur.shape[1:]
            if out.shape != want or out.dtype != cur.dtype:
                raise InvalidError(_elastic.ERR_INVAL,
                                   "array '%s': out %s %s is invalid (expected %s %s)"
                                   % (name, out.dtype, out.shape, cur.dtype, want))
        self._m.array_restore(name, out)
        return out

    def blob_fetch(self, name, old_ranks):
        """In a handler (collective over the new world): the blob ``name``
        of each old rank in ``old_ranks``, as bytes (or the unpickled object
        for a blob registered as an object)."""
        if isinstance(old_ranks, (int, np.integer)):
            raise TypeError("blob_fetch: old_ranks: expected a sequence of int (got an int)")
        got = self._m.blob_fetch(name, [int(r) for r in old_ranks])
        if name in self._objects:
            return [pickle.loads(b) for b in got]
        return got


_live = weakref.WeakSet()


@atexit.register
def _destroy_live():
    # before mpi4py finalizes MPI: libelastic's destroy is collective and
    # must come first (as in a C program)
    for m in list(_live):
        if not m.destroyed:
            m.destroy()
