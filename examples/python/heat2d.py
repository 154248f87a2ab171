#!/usr/bin/python3
"""heat2d.py - the elastic 2-D Jacobi heat stencil of examples/heat2d.c, in NumPy.

The same computation as the C program, point for point and operation for
operation, so the final field and its checksum are bit-identical to the C
program's for any number of ranks and any failures on the way.  The nx x ny
grid is distributed by rows (a ghost row above and below each block); the
top edge is held at 1, the other edges at 0.

The elastic parts are the Pathways manager loop: register the step and the
grid, maybe_snapshot and maybe_reshard_up at the top of every step,
maybe_reshard_down in ``except MPI.Exception``, and the rebuild() handler.
Configure with keyword arguments or ELASTIC_* variables.  With
--persist-period N the grid goes to an HDF5 file every N steps (/arrays/u,
float64 [ny][nx]); SIGTERM or SIGUSR1 suspends the job to such a file
(exit 75) and the same command with ELASTIC_RESUME=1 continues, at any size.

usage: heat2d.py [--nx N] [--ny N] [--steps N] [--persist-period N]
                 [--snapshot-dir DIR] [--sleep MS] [--progress N]
                 [--fail RANK:STEP[:WHERE]]... [--quiet]

--fail kills the process of MPI_COMM_WORLD rank RANK with a real SIGKILL:
during step STEP (WHERE step, the default), or inside libelastic's
snapshot, recovery, protect snapshot or L3 write (ELASTIC_TEST_KILL).
"""

import argparse
import os
import resource
import signal
import sys
import time

import elastic  # first: it loads the MPI library libelastic was built with
from mpi4py import MPI
import numpy as np

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x):
    """splitmix64 of a uint64 array (wrapping arithmetic, as in C)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def block_of(n, size, rank):
    """(first, count) of rank's block of n items over size ranks (heat2d.c's split)."""
    q, r = divmod(n, size)
    return rank * q + min(rank, r), q + (1 if rank < r else 0)


class Heat:
    def __init__(self, m, nx, ny, quiet):
        self.m, self.nx, self.ny, self.quiet = m, nx, ny, quiet
        self.step = np.zeros(1, np.int64)  # registered: restored on rollback
        self.comm = MPI.COMM_NULL
        self.rank = self.size = 0
        self.row0 = self.rows = 0
        self.u = self.v = None             # (rows + 2) x nx, ghost rows included

    def alloc(self, rows):
        """Room for rows rows; the buffers are kept when the size is unchanged."""
        if self.u is None or self.u.shape[0] != rows + 2:
            self.u = np.empty((rows + 2, self.nx))
            self.v = np.empty((rows + 2, self.nx))
        return self.u[1:rows + 1]

    def place(self, rows):
        """libelastic's placement hook for "u": a restored block goes straight
        into the grid (kept when its size is unchanged)."""
        return self.alloc(int(rows))

    def set_edges(self):
        if self.rank == 0:
            self.u[0, :] = 1.0
        if self.rank == self.size - 1:
            self.u[self.rows + 1, :] = 0.0

    def setup(self):
        """This rank's first block, initialized; False if there are fewer rows than ranks."""
        self.comm = self.m.comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        if self.ny < self.size:
            print("heat2d.py: --ny %d is invalid (expected at least one row per rank: >= %d)"
                  % (self.ny, self.size), file=sys.stderr)
            return False
        self.row0, self.rows = block_of(self.ny, self.size, self.rank)
        inner = self.alloc(self.rows)
        g = (np.uint64(self.row0) * np.uint64(self.nx)
             + np.arange(self.rows * self.nx, dtype=np.uint64))
        inner[:] = ((splitmix64(g) >> np.uint64(11)).astype(np.float64)
                    / 9007199254740992.0).reshape(self.rows, self.nx)
        self.set_edges()
        return True

    def rebuild(self):
        """The elastic handler: the world changed.  Take the new communicator
        and this rank's new block (restored in place by the placement hook,
        or copied in after a resume from L3)."""
        m = self.m
        self.comm = m.comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.row0, self.rows, _ = m.array_block("u")
        inner = m.array_restore("u")
        assert np.shares_memory(inner, self.u)
        self.set_edges()
        if self.rank == 0 and not self.quiet:
            print("resharded at step %d: world %d -> %d"
                  % (self.step[0], m.info().old_size, self.size), flush=True)

    def halo(self, sbuf, dest, stag, rbuf, source, rtag):
        # at an end of the chain a plain Send or Recv (heat2d.c: Open MPI
        # 5.0.7's Sendrecv with MPI_PROC_NULL mishandles a revoked send)
        if source == MPI.PROC_NULL and dest == MPI.PROC_NULL:
            return
        if source == MPI.PROC_NULL:
            self.comm.Send(sbuf, dest, stag)
        elif dest == MPI.PROC_NULL:
            self.comm.Recv(rbuf, source, rtag)
        else:
            self.comm.Sendrecv(sbuf, dest, stag, rbuf, source, rtag)

    def jacobi_step(self):
        """One step; raises MPI.Exception when a call fails."""
        u, v, rows, nx = self.u, self.v, self.rows, self.nx
        up = self.rank - 1 if self.rank > 0 else MPI.PROC_NULL
        down = self.rank + 1 if self.rank < self.size - 1 else MPI.PROC_NULL
        self.halo(u[1], up, 0, u[rows + 1], down, 0)
        self.halo(u[rows], down, 1, u[0], up, 1)
        c = u[1:rows + 1]
        lr = np.empty((rows, nx))
        if nx > 1:
            lr[:, 1:-1] = c[:, :-2] + c[:, 2:]
            lr[:, 0] = 0.0 + c[:, 1]
            lr[:, -1] = c[:, -2] + 0.0
        else:
            lr[:] = 0.0
        np.multiply(0.25, (u[0:rows] + u[2:rows + 2]) + lr, out=v[1:rows + 1])
        c[:] = v[1:rows + 1]

    def checksum(self):
        """A sum of per-point hashes, the same for any decomposition."""
        g = (np.uint64(self.row0) * np.uint64(self.nx)
             + np.arange(self.rows * self.nx, dtype=np.uint64))
        bits = np.ascontiguousarray(self.u[1:self.rows + 1]).view(np.uint64).ravel()
        with np.errstate(over="ignore"):
            mine = np.sum(splitmix64(bits ^ splitmix64(g + np.uint64(1))), dtype=np.uint64)
        total = np.zeros(1, np.uint64)
        self.comm.Allreduce(np.array([mine], np.uint64), total, MPI.SUM)
        return int(total[0])


def parse_args(argv):
    p = argparse.ArgumentParser(prog="heat2d.py", description=__doc__.split("\n")[0])
    nonneg = lambda s: _int(s, 0)
    pos = lambda s: _int(s, 1)
    p.add_argument("--nx", type=pos, default=256)
    p.add_argument("--ny", type=pos, default=256)
    p.add_argument("--steps", type=nonneg, default=100)
    p.add_argument("--persist-period", type=nonneg, default=0)
    p.add_argument("--snapshot-dir", default=".")
    p.add_argument("--sleep", type=nonneg, default=0, help="ms per step")
    p.add_argument("--progress", type=nonneg, default=0)
    p.add_argument("--fail", action="append", default=[], type=fail_spec,
                   metavar="RANK:STEP[:WHERE]")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    if not a.snapshot_dir:
        p.error("--snapshot-dir: '' is invalid (expected a path)")
    return a


def _int(s, lo):
    try:
        v = int(s)
    except ValueError:
        v = None
    if v is None or v < lo:
        raise argparse.ArgumentTypeError("'%s' is invalid (expected an integer >= %d)" % (s, lo))
    return v


WHERE = ("step", "snapshot", "recovery", "protect", "persist")


def fail_spec(s):
    parts = s.split(":")
    try:
        rank, step = int(parts[0]), int(parts[1])
        where = parts[2] if len(parts) == 3 else "step"
        if len(parts) > 3 or rank < 0 or step < 0 or where not in WHERE:
            raise ValueError
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(
            "'%s' is invalid (expected RANK:STEP[:WHERE], WHERE %s)" % (s, ", ".join(WHERE)))
    return rank, step, where


def main(argv):
    a = parse_args(argv)
    kills = {(r, s) for r, s, w in a.fail if w == "step"}
    hooks = ["%d:%d:%s" % f for f in a.fail if f[2] != "step"]
    if hooks:  # libelastic's test hook, read when the manager is created
        os.environ["ELASTIC_TEST_KILL"] = ",".join(hooks)
    world_rank, nranks = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    t_start = time.monotonic()
    what = "create"
    try:
        # options set fields; ELASTIC_* variables override them
        with elastic.Manager(MPI.COMM_WORLD, persist_period=a.persist_period,
                             snapshot_dir=a.snapshot_dir) as m:
            # named by the original rank: a process a growth started (the
            # job's rank 8, say) is rank 0 of its own MPI_COMM_WORLD
            world_rank = m.info().original_rank
            app = Heat(m, a.nx, a.ny, a.quiet)
            what = "setup"
            if m.comm != MPI.COMM_NULL and not app.setup():
                return 2
            empty = np.empty((0, a.nx))
            what = "register"
            m.register_value("step", app.step)
            m.register_array("u", app.u[1:app.rows + 1] if app.u is not None else empty,
                             place=app.place)
            what = "start"
            if not m.start(app.rebuild):
                # a spare that was not needed: show that it slept
                ru = resource.getrusage(resource.RUSAGE_SELF)
                print("spare rank %d released after %.2f s idle, %.3f s CPU"
                      % (world_rank, time.monotonic() - t_start, ru.ru_utime + ru.ru_stime),
                      flush=True)
                return 0
            info = m.info()
            if info.resumed_step >= 0 and info.rank == 0:
                print("resumed from step %d (file %s, world %d -> %d)"
                      % (info.resumed_step, info.resumed_from, info.resumed_size, info.size))
            if world_rank == 0 and not a.quiet:
                print("heat2d: %dx%d grid, %d steps, %d ranks (%d working, %d spares)"
                      % (a.nx, a.ny, a.steps, nranks, info.size, info.idle_spares), flush=True)
            step = app.step  # restored by libelastic whenever the world changes
            while True:
                while step[0] < a.steps:
                    what = "snapshot"
                    if m.maybe_snapshot(step[0]) == elastic.SUSPENDED:
                        if app.rank == 0:
                            print("suspended at step %d" % step[0], flush=True)
                        return elastic.exit_code(elastic.SUSPENDED)
                    what = "reshard up"
                    m.maybe_reshard_up(step[0], app.rebuild)
                    # the victims of one step die together (see examples/inject.h):
                    # after a barrier, whatever it returned
                    victim = (world_rank, int(step[0])) in kills
                    try:
                        if sum(1 for _, s in kills if s == step[0]) > 1:
                            app.comm.Barrier()
                    except MPI.Exception as e:
                        if not victim:
                            what = "reshard down"
                            m.maybe_reshard_down(e, app.rebuild)
                            continue
                    if victim:
                        print("rank %d: injected failure at step %d (SIGKILL)"
                              % (world_rank, step[0]), file=sys.stderr, flush=True)
                        os.kill(os.getpid(), signal.SIGKILL)
                    if a.progress and step[0] % a.progress == 0 and app.rank == 0:
                        print("step %d" % step[0], flush=True)
                    if a.sleep:  # stands for more computation
                        time.sleep(a.sleep / 1000.0)
                    try:
                        app.jacobi_step()
                    except MPI.Exception as e:
                        what = "reshard down"
                        m.maybe_reshard_down(e, app.rebuild)
                        continue  # rolled back to the snapshot step
                    step[0] += 1
                try:
                    total = app.checksum()
                    break
                except MPI.Exception as e:
                    what = "reshard down"
                    m.maybe_reshard_down(e, app.rebuild)
            info = m.info()
            if app.rank == 0:
                print("final world %d, events %d" % (info.size, info.events))
                print("checksum %016x" % total, flush=True)
    except elastic.Error as e:
        print("heat2d.py: rank %d: %s: %s (%s)" % (world_rank, what, e, elastic.strerror(e.code)),
              file=sys.stderr, flush=True)
        return elastic.exit_code(e)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
