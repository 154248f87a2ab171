#!/usr/bin/python3
"""py_snapshot.py - B10: elastic_maybe_snapshot of one registered array
through the Python binding against the same C call, in the same process.

    py_snapshot.py [--mib N] [--trials T] [--warmup W]

A float64 ndarray of N MiB per rank (rows of 1024 items) is registered with
a manager of snapshot_period 1 (every call is a snapshot) and no signal
handlers.  The timed calls alternate between the binding,
``m.maybe_snapshot(step)`` (variant python), and libelastic's
elastic_maybe_snapshot called directly through ctypes on the same manager
and the same ndarray (variant c), so both see the same memory, cache and
machine load; each call is timed from a barrier and the trial's time is
the slowest rank's (MPI_MAX).  Rank 0 prints one row per call:
    py_snapshot,RANKS,MIB,python|c,TRIAL,call_s,SECONDS,s
bench/py_snapshot.c is the same measurement in a C program (variant
c-program), for the absolute numbers.
"""

import argparse
import ctypes
import sys

import elastic
from elastic import _build
from mpi4py import MPI
import numpy as np

ROW = 1024


def main(argv):
    p = argparse.ArgumentParser(prog="py_snapshot.py")
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args(argv)
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    rows = a.mib * (1 << 20) // (ROW * 8)
    arr = (rank * 1000003 + np.arange(rows * ROW, dtype=np.int64)).astype(np.float64)
    arr = arr.reshape(rows, ROW)
    step = np.zeros(1, np.int64)
    dt, worst = np.zeros(1), np.zeros(1)
    lib = ctypes.CDLL(_build.LIBELASTIC)
    lib.elastic_maybe_snapshot.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p]
    lib.elastic_maybe_snapshot.restype = ctypes.c_int
    err = ctypes.create_string_buffer(256)
    with elastic.Manager(world, snapshot_period=1, signals="none") as m:
        m.register_value("step", step)
        m.register_array("a", arr)
        m.start()
        handle = m._m._address()
        for t in range(-a.warmup, a.trials):
            for variant in (("python", "c") if t % 2 else ("c", "python")):
                world.Barrier()
                t0 = MPI.Wtime()
                if variant == "python":
                    m.maybe_snapshot(step[0])
                else:
                    rc = lib.elastic_maybe_snapshot(handle, int(step[0]), err)
                    if rc != 0:
                        raise elastic.errors.from_code(rc, err.value.decode())
                dt[0] = MPI.Wtime() - t0
                world.Allreduce(dt, worst, MPI.MAX)
                step[0] += 1
                if t >= 0 and rank == 0:
                    print("py_snapshot,%d,%d,%s,%d,call_s,%.6f,s"
                          % (size, a.mib, variant, t, worst[0]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
