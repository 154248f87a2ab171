#!/usr/bin/python3
"""sgd.py - elastic data-parallel linear regression in NumPy, the Pathways way.

The data set (samples of d features and a target, made from a fixed seed)
is distributed in blocks of samples and visited in the same order whatever
the decomposition; the weights are replicated.  Each step every rank sums
its samples' gradient terms rounded to 32.32 fixed point (int64) and
MPI_Allreduce adds the integers, so the final weights are bit-identical for
any number of ranks and any failures on the way.

The loop is the Pathways manager's: ``maybe_snapshot(step)`` at the top of
the step, the step's MPI calls in ``try``, ``maybe_reshard_down(e,
handler)`` in ``except MPI.Exception`` (anything else is re-raised), and
``maybe_reshard_up(step, handler)``.  Besides the step, the weights (values)
and the data (an array), each rank keeps a picklable blob, its count of
samples visited: the handler gives the old ranks' counts to the new rank 0,
so the total always equals steps x samples, which the end checks.

usage: sgd.py [--samples N] [--features D] [--steps N] [--lr X]
              [--persist-period N] [--snapshot-dir DIR] [--sleep MS]
              [--progress N] [--fail RANK:STEP]... [--quiet]
"""

import argparse
import hashlib
import os
import signal
import sys
import time

import elastic  # first: it loads the MPI library libelastic was built with
from mpi4py import MPI
import numpy as np

FIXED_ONE = 4294967296.0  # 2^32


def make_data(first, count, d):
    """Samples first..first+count-1: d features in [-1, 1), then the target."""
    rng_keys = np.arange(first, first + count, dtype=np.uint64)[:, None]
    cols = np.arange(d + 1, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        x = rng_keys * np.uint64(d + 1) + cols + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    u = 2.0 * ((x >> np.uint64(11)).astype(np.float64) / 9007199254740992.0) - 1.0
    w_true = np.array([(k + 1) / d * (-1.0 if k % 2 else 1.0) for k in range(d)])
    data = np.empty((count, d + 1))
    data[:, :d] = u[:, :d]
    data[:, d] = u[:, :d] @ w_true + 0.01 * u[:, d]
    return data


class SGD:
    def __init__(self, m, n, d, lr, quiet):
        self.m, self.n, self.d, self.lr, self.quiet = m, n, d, lr, quiet
        self.step = np.zeros(1, np.int64)  # registered values: restored on rollback
        self.w = np.zeros(d)
        self.stats = {"seen": 0}           # a per-rank blob (pickled)
        self.comm = MPI.COMM_NULL
        self.data = np.empty((0, d + 1))

    def rebuild(self):
        """The handler: the new communicator, this rank's new block of samples,
        and the old ranks' counts of samples visited (on the new rank 0)."""
        m = self.m
        self.comm = m.comm
        self.data = m.array_restore("data")
        old = m.info().old_size
        mine = list(range(old)) if self.comm.Get_rank() == 0 else []
        self.stats["seen"] = sum(s["seen"] for s in m.blob_fetch("stats", mine))
        if self.comm.Get_rank() == 0 and not self.quiet:
            print("resharded at step %d: %d ranks, %d samples on rank 0"
                  % (self.step[0], self.comm.Get_size(), self.data.shape[0]), flush=True)

    def sgd_step(self):
        """One gradient step; raises MPI.Exception when the Allreduce fails."""
        s, d = self.data, self.d
        r = s[:, :d] @ self.w - s[:, d] if s.shape[0] else np.empty(0)
        local = np.zeros(d + 1, np.int64)
        if s.shape[0]:
            local[:d] = np.rint(r[:, None] * s[:, :d] * FIXED_ONE).astype(np.int64).sum(0)
            local[d] = np.rint(r * r * FIXED_ONE).astype(np.int64).sum()
        total = np.empty_like(local)
        self.comm.Allreduce(local, total, MPI.SUM)
        self.w -= self.lr * (total[:d] / FIXED_ONE) / self.n
        self.stats["seen"] += s.shape[0]
        return (total[d] / FIXED_ONE) / self.n


def main(argv):
    p = argparse.ArgumentParser(prog="sgd.py")
    p.add_argument("--samples", type=int, default=2000)
    p.add_argument("--features", type=int, default=8)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--persist-period", type=int, default=0)
    p.add_argument("--snapshot-dir", default=".")
    p.add_argument("--sleep", type=int, default=0)
    p.add_argument("--progress", type=int, default=0)
    p.add_argument("--fail", action="append", default=[], metavar="RANK:STEP")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    for name in ("samples", "features", "steps", "persist_period", "sleep", "progress"):
        if getattr(a, name) < (1 if name in ("samples", "features") else 0):
            p.error("--%s: %d is invalid (expected a larger integer)"
                    % (name.replace("_", "-"), getattr(a, name)))
    try:
        kills = {tuple(int(x) for x in f.split(":")) for f in a.fail}
        if any(len(k) != 2 or min(k) < 0 for k in kills):
            raise ValueError
    except ValueError:
        p.error("--fail: %s is invalid (expected RANK:STEP)" % " ".join(a.fail))
    world_rank = MPI.COMM_WORLD.Get_rank()
    try:
        with elastic.Manager(persist_period=a.persist_period, snapshot_dir=a.snapshot_dir) as m:
            # named by the original rank (a process a growth started is
            # rank 0 of its own MPI_COMM_WORLD)
            world_rank = m.info().original_rank
            app = SGD(m, a.samples, a.features, a.lr, a.quiet)
            if m.comm != MPI.COMM_NULL:
                size, rank = m.comm.Get_size(), m.comm.Get_rank()
                q, rem = divmod(a.samples, size)
                first = rank * q + min(rank, rem)
                app.data = make_data(first, q + (rank < rem), a.features)
                app.comm = m.comm
            m.register_value("step", app.step)
            m.register_value("w", app.w)
            m.register_array("data", app.data)
            m.register_blob("stats", app.stats)
            if not m.start(app.rebuild):
                return 0  # a spare that was not needed
            step = app.step  # restored by libelastic whenever the world changes
            while True:
                while step[0] < a.steps:
                    if m.maybe_snapshot(step[0]) == elastic.SUSPENDED:
                        if app.comm.Get_rank() == 0:
                            print("suspended at step %d" % step[0], flush=True)
                        return elastic.exit_code(elastic.SUSPENDED)
                    m.maybe_reshard_up(step[0], app.rebuild)
                    # the victims of one step die together (see examples/inject.h):
                    # after a barrier, whatever it returned
                    victim = (world_rank, int(step[0])) in kills
                    try:
                        if sum(1 for _, s in kills if s == step[0]) > 1:
                            app.comm.Barrier()
                    except MPI.Exception as e:
                        if not victim:
                            m.maybe_reshard_down(e, app.rebuild)
                            continue
                    if victim:
                        print("rank %d: injected failure at step %d (SIGKILL)"
                              % (world_rank, step[0]), file=sys.stderr, flush=True)
                        os.kill(os.getpid(), signal.SIGKILL)
                    if a.sleep:
                        time.sleep(a.sleep / 1000.0)
                    try:
                        loss = app.sgd_step()
                    except MPI.Exception as e:
                        m.maybe_reshard_down(e, app.rebuild)  # re-raises a non-elastic error
                        continue                              # rolled back to the snapshot step
                    if a.progress and step[0] % a.progress == 0 and app.comm.Get_rank() == 0:
                        print("step %d loss %.6g" % (step[0], loss), flush=True)
                    step[0] += 1
                try:
                    # buffer calls only: mpi4py's object collectives (allreduce)
                    # run on a private duplicate that libelastic cannot revoke
                    seen = np.zeros(1, np.int64)
                    app.comm.Allreduce(np.array([app.stats["seen"]], np.int64), seen, MPI.SUM)
                    seen = int(seen[0])
                    break
                except MPI.Exception as e:
                    m.maybe_reshard_down(e, app.rebuild)
            info = m.info()
            if app.comm.Get_rank() == 0:
                print("samples visited %d (expected %d)" % (seen, a.steps * a.samples))
                print("final world %d, events %d" % (info.size, info.events))
                digest = hashlib.blake2b(app.w.tobytes(), digest_size=8).hexdigest()
                print("checksum %s" % digest, flush=True)
    except elastic.Error as e:
        print("sgd.py: rank %d: %s (%s)" % (world_rank, e, elastic.strerror(e.code)),
              file=sys.stderr, flush=True)
        return elastic.exit_code(e)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
