#!/usr/bin/python3
"""flaky_handler.py - a handler that raises, under a real failure.

    flaky_handler.py FAILS     (under mpirun --with-ft ulfm, 4 ranks or more)

The last rank SIGKILLs itself at step 12; the survivors' handler raises
RuntimeError on its first FAILS calls on each rank (-1: always).  libelastic
retries the handler (max_reshard_retry_count 2): with FAILS 1 the job
recovers and prints the failure-free sum; with FAILS -1 the retries run out
and maybe_reshard_down raises elastic.RelaunchError, its __cause__ the
handler's RuntimeError, and the job exits 76 (elastic.exit_code).
"""

import os
import signal
import sys

import elastic
from mpi4py import MPI
import numpy as np


def main(fails):
    world = MPI.COMM_WORLD
    calls = [0]
    step = np.zeros(1, np.int64)
    x = np.arange(8 * world.Get_rank(), 8 * world.Get_rank() + 8, dtype=np.int64)

    def rebuild():
        calls[0] += 1
        if fails < 0 or calls[0] <= fails:
            raise RuntimeError("rebuild refuses, call %d" % calls[0])
        state["x"] = m.array_restore("x")
        state["comm"] = m.comm

    try:
        with elastic.Manager(snapshot_period=5, max_reshard_retry_count=2) as m:
            m.register_value("step", step)
            m.register_array("x", x)
            m.start(rebuild)
            state = {"x": x, "comm": m.comm}
            total = 0
            while step[0] < 20:
                m.maybe_snapshot(step[0])
                if step[0] == 12 and world.Get_rank() == world.Get_size() - 1:
                    os.kill(os.getpid(), signal.SIGKILL)
                try:
                    # the buffer (upper-case) call: mpi4py's object collectives
                    # run on a private duplicate that libelastic cannot revoke
                    mine = np.array([state["x"].sum() + step[0]], np.int64)
                    out = np.zeros(1, np.int64)
                    state["comm"].Allreduce(mine, out, MPI.SUM)
                    total = int(out[0])
                except MPI.Exception as e:
                    m.maybe_reshard_down(e, rebuild)
                    continue
                step[0] += 1
            if state["comm"].Get_rank() == 0:
                print("handler calls %d, final world %d, sum %d"
                      % (calls[0], state["comm"].Get_size(), total), flush=True)
    except elastic.Error as e:
        cause = e.__cause__
        print("final %s: %s; cause: %s: %s" % (type(e).__name__, e,
              type(cause).__name__ if cause else None, cause), flush=True)
        return elastic.exit_code(e)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
