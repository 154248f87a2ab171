#!/usr/bin/python3
"""units.py - unit tests of the elastic binding (TAP on stdout).

    units.py DIR     (as an MPI singleton or under mpirun; DIR: scratch space)

Every misuse must be a clear Python exception (the class, and the message
naming the bad value), never a crash: wrong dtypes, non-contiguous and
read-only arrays, bad configuration, duplicate names, registration after
start, handler-only calls outside a handler, manager calls inside the
handler, use after destroy.  Also: errors that are not elastic events are
re-raised as they are; the library sees the registered ndarrays' own memory
(written after registration, snapshotted to L3, restored in place into the
same objects by a resume, whose handler, events and blobs are checked).
DIR/l3 keeps the L3 file for the caller to read with h5py.
"""

import os
import sys

import elastic  # before mpi4py
from mpi4py import MPI
import numpy as np

n_test = 0
failed = 0
rank = MPI.COMM_WORLD.Get_rank()
size = MPI.COMM_WORLD.Get_size()


def ok(cond, desc, *diag):
    global n_test, failed
    n_test += 1
    # every rank must agree
    allok = MPI.COMM_WORLD.allreduce(1 if cond else 0, MPI.MIN)
    if rank == 0:
        print("%s %d - %s" % ("ok" if allok else "not ok", n_test, desc))
        if not allok:
            for d in diag:
                print("# " + str(d))
    if not allok:
        failed += 1
    sys.stdout.flush()


def raises(cls, fn, *words, desc):
    """fn() raises cls (exactly that class or a subclass) with every word in its message."""
    try:
        fn()
    except cls as e:
        msg = str(e)
        miss = [w for w in words if w not in msg]
        ok(not miss, "%s: %s (%s)" % (desc, cls.__name__, msg), "missing %r in %r" % (miss, msg))
        return e
    except BaseException as e:  # noqa: B902 - the point is to report anything else
        ok(False, desc, "expected %s, got %s: %s" % (cls.__name__, type(e).__name__, e))
        return None
    ok(False, desc, "expected %s, nothing raised" % cls.__name__)
    return None


def fresh(**kw):
    kw.setdefault("signals", "none")
    return elastic.Manager(MPI.COMM_WORLD, **kw)


def main(tmp):
    # --- configuration
    raises(elastic.InvalidError, lambda: fresh(snapshot_period=0),
           "snapshot_period", "0", desc="snapshot_period=0: the C message")
    raises(TypeError, lambda: fresh(snapshot_perod=3), "snapshot_perod",
           desc="a misspelt keyword")
    raises(TypeError, lambda: fresh(snapshot_period="3"), "snapshot_period", "str",
           desc="a str for an int field")
    raises(elastic.InvalidError, lambda: fresh(resume="sometimes"), "sometimes",
           desc="resume='sometimes'")
    raises(elastic.InvalidError, lambda: elastic.Manager(MPI.COMM_NULL), "comm",
           desc="comm=MPI.COMM_NULL")
    os.environ["ELASTIC_SNAPSHOT_PERIOD"] = "often"
    raises(elastic.InvalidError, lambda: fresh(), "ELASTIC_SNAPSHOT_PERIOD", "often",
           desc="a bad ELASTIC_* variable still overrides, with its own message")
    del os.environ["ELASTIC_SNAPSHOT_PERIOD"]
    ok(issubclass(elastic.InvalidError, ValueError), "InvalidError is a ValueError")

    # --- registration
    m = fresh()
    a = np.zeros((4, 3))
    for dt in (np.float16, np.complex128, np.bool_, np.int8, object):
        raises(elastic.InvalidError, lambda: m.register_array("a", np.zeros((4, 3), dt)),
               "array 'a'", "dtype", np.dtype(dt).name if dt is not object else "object",
               desc="register_array with dtype %s" % np.dtype(dt).name)
    raises(elastic.InvalidError, lambda: m.register_array("a", np.zeros((4, 3), ">f8")),
           "dtype >f8", desc="a big-endian float64")
    raises(elastic.InvalidError, lambda: m.register_array("a", a[:, ::2]),
           "non-contiguous", desc="a non-contiguous view")
    raises(elastic.InvalidError, lambda: m.register_array("a", np.asfortranarray(a)),
           "non-contiguous", desc="a Fortran-order array")
    ro = np.zeros((4, 3))
    ro.flags.writeable = False
    raises(elastic.InvalidError, lambda: m.register_array("a", ro), "read-only",
           desc="a read-only array")
    raises(elastic.InvalidError, lambda: m.register_array("a", [1.0, 2.0]), "list",
           desc="a list instead of an ndarray")
    raises(elastic.InvalidError, lambda: m.register_array("a", np.zeros(())), "0-d",
           desc="a 0-d array as a distributed array")
    raises(elastic.InvalidError, lambda: m.register_value("s", 5), "int",
           desc="a Python int as a value (cannot be restored in place)")
    raises(TypeError, lambda: m.register_array(7, a), "name", desc="a non-str name")
    raises(TypeError, lambda: m.register_array("a", a, place=3), "place",
           desc="a non-callable placement hook")
    step = np.zeros(1, np.int64)
    m.register_value("step", step)
    raises(elastic.ExistsError, lambda: m.register_value("step", np.zeros(1, np.int64)),
           "step", desc="a name registered twice: the C message")
    m.register_array("a", a)
    raises(elastic.InvalidError, lambda: m.register_blob("b", lambda: 0), "pickled",
           desc="a blob that cannot be pickled")
    m.register_blob("raw", b"abc")
    raises(elastic.StateError, lambda: m.array_restore("a"), "handler",
           desc="array_restore outside a handler: the C message")
    raises(elastic.NotFoundError, lambda: m.array_block("nope"), "nope",
           desc="array_block of an unknown name")
    ok(m.start() is True, "start without a handler: a working rank")
    raises(elastic.StateError, lambda: m.register_value("late", np.zeros(1)), "late",
           "before", desc="registration after start: the C message")
    raises(elastic.StateError, lambda: m.start(), "already started",
           desc="start twice")
    raises(TypeError, lambda: m.maybe_reshard_down(MPI.Exception(MPI.ERR_OTHER), 5),
           "callable", desc="a non-callable handler")

    # --- errors that are not elastic events come back as they are
    e0 = ValueError("not an MPI error")
    try:
        m.maybe_reshard_down(e0, lambda: None)
        ok(False, "a ValueError is re-raised")
    except ValueError as e:
        ok(e is e0, "maybe_reshard_down re-raises a non-MPI exception itself")
    try:
        m.comm.Send(np.zeros(1), size + 7, 0)
        ok(False, "a send to a bad rank fails")
    except MPI.Exception as e1:
        if os.environ.get("HAVE_ULFM") == "yes":
            try:
                m.maybe_reshard_down(e1, lambda: None)
                ok(False, "a non-elastic MPI error is re-raised")
            except MPI.Exception as e2:
                ok(e2 is e1, "maybe_reshard_down re-raises a non-elastic MPI.Exception "
                   "(error class %d) itself" % e1.Get_error_class())
        else:  # relaunch-only mode: every MPI error needs a relaunch
            raises(elastic.NoULFMError, lambda: m.maybe_reshard_down(e1, lambda: None),
                   "relaunch", desc="without ULFM an MPI error is NoULFMError")
    ok(m.maybe_snapshot(0) == elastic.OK, "maybe_snapshot returns elastic.OK")
    m.destroy()
    m.destroy()
    ok(m.destroyed, "destroy twice is fine")
    for what, fn in (("maybe_snapshot", lambda: m.maybe_snapshot(1)),
                     ("register_value", lambda: m.register_value("x", np.zeros(1))),
                     ("comm", lambda: m.comm), ("info", lambda: m.info()),
                     ("array_block", lambda: m.array_block("a")),
                     ("maybe_reshard_up", lambda: m.maybe_reshard_up(1, None))):
        raises(elastic.StateError, fn, "destroyed", desc="%s after destroy" % what)

    # --- L3: the library writes the ndarrays' own memory ...
    l3 = os.path.join(tmp, "l3")
    u = np.zeros((5, 4))
    step = np.zeros(1, np.int64)
    obj = {"rank": rank, "list": [1, 2, 3]}
    with fresh(persist_period=5, snapshot_period=5, snapshot_dir=l3, run_id="units",
               resume="never") as m:
        m.register_value("step", step)
        m.register_array("u", u)
        m.register_blob("obj", obj)
        m.start()
        for s in range(6):
            step[0] = s
            u[:] = rank * 1000 + s + np.arange(20).reshape(5, 4)  # after registration
            obj["step"] = s
            m.maybe_snapshot(s)
        info = m.info()
    # the persist steps' files are written in the background (the default):
    # step 0's starts at step 1 and commits at a later snapshot step once
    # written, step 5's starts at the next call (here the end of the with
    # block, which waits for both); before the end persist_step is the newest
    # committed one, which the loop may not have seen yet (-1)
    ok(info.persist_step in (-1, 0) and os.path.exists(os.path.join(l3, "snap-000000000005.h5")),
       "persisted at step 5 (info.persist_step %d before the end; the file after it)"
       % info.persist_step)

    # ... and a resume restores into the same objects, in place
    events = []
    seen = {}
    u2 = np.full((5, 4), -1.0)
    step2 = np.zeros(1, np.int64)
    obj2 = {}
    registered = u2

    def handler(tag, scale=1):
        seen["tag"], seen["scale"] = tag, scale
        try:
            m2.maybe_snapshot(0)
        except elastic.StateError as e:
            seen["nested"] = str(e)
        seen["block"] = m2.array_block("u")
        seen["restored"] = m2.array_restore("u")
        try:
            m2.array_restore("u", out=np.zeros((3, 4)))
        except elastic.InvalidError as e:
            seen["badout"] = str(e)
        seen["blobs"] = m2.blob_fetch("obj", [rank])
        seen["in_handler_comm"] = m2.comm.Get_size()
        return "handled"

    with fresh(persist_period=5, snapshot_period=5, snapshot_dir=l3, run_id="units",
               resume="always", on_event=events.append) as m2:
        m2.register_value("step", step2)
        m2.register_array("u", u2)
        m2.register_blob("obj", obj2)
        ok(m2.start(handler, "resume", scale=3) is True, "start with resume='always'")
        info = m2.info()
    ok(info.resumed_step == 5 and info.resumed_from and info.resumed_from.endswith(".h5"),
       "resumed from step 5 (%s)" % info.resumed_from)
    ok(step2[0] == 5, "the registered value was restored in place (step %d)" % step2[0])
    ok(seen.get("tag") == "resume" and seen.get("scale") == 3,
       "the handler got its arguments (%r, scale=%r)" % (seen.get("tag"), seen.get("scale")))
    ok("inside the elastic handler" in seen.get("nested", ""),
       "maybe_snapshot inside the handler: StateError (%s)" % seen.get("nested"))
    ok(seen.get("restored") is registered,
       "array_restore() gives the registered ndarray itself (same block size)")
    want = rank * 1000 + 5 + np.arange(20).reshape(5, 4)
    ok(np.array_equal(u2, want), "the array holds what was written after registration")
    ok("expected float64 (5, 4)" in seen.get("badout", ""),
       "array_restore(out=) of the wrong shape: InvalidError (%s)" % seen.get("badout"))
    ok(seen.get("blobs") == [{"rank": rank, "list": [1, 2, 3], "step": 5}],
       "blob_fetch unpickles the object as it was at the snapshot (%r)" % seen.get("blobs"))
    ok(tuple(seen.get("block", ())) == (rank * 5, 5, 5 * size), "array_block in the handler")
    ok([e["event"] for e in events] == ["resume"] and events[0]["step"] == 5,
       "the event callback got the resume event as a dict (%r)" % events)
    # --- resume errors: no snapshot; a damaged file named by resume_from
    def resume(**kw):
        with fresh(run_id="units", resume="always", **kw) as m3:
            m3.register_value("step", np.zeros(1, np.int64))
            m3.register_array("u", np.zeros((5, 4)))
            m3.register_blob("obj", {})
            m3.start(lambda: None)
    raises(elastic.NoSnapshotError, lambda: resume(snapshot_dir=os.path.join(tmp, "empty")),
           "snapshot", desc="resume='always' with no snapshot: NoSnapshotError")
    bad = os.path.join(tmp, "damaged.h5")
    if rank == 0:
        data = bytearray(open(info.resumed_from, "rb").read())
        at = data.find(np.arange(5.0, 25.0)[:4].tobytes())  # rank 0's first row of u
        data[at + 3] ^= 0xFF
        open(bad, "wb").write(data)
    MPI.COMM_WORLD.Barrier()
    raises(elastic.CorruptError, lambda: resume(resume_from=bad), "damaged.h5",
           desc="resume_from a file with a flipped byte: CorruptError naming it")
    errfile = os.path.join(tmp, "error-%d.json" % rank)
    os.environ["ELASTIC_ERROR_FILE"] = errfile
    elastic.record_error("units: a recorded error")
    del os.environ["ELASTIC_ERROR_FILE"]
    ok("units: a recorded error" in open(errfile).read(), "record_error writes the error file")
    ok(elastic.exit_code(elastic.RelaunchError(elastic.ERR_RELAUNCH, "x")) in (0, 76),
       "exit_code takes an elastic.Error")
    elastic.progress(3)
    ok(True, "progress() outside a supervisor is a no-op")
    if rank == 0:
        print("1..%d" % n_test)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
