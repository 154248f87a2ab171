#!/usr/bin/python3
"""check_heat2d.py FILE STEP WORLD NX NY RUN_ID - read heat2d's L3 snapshot
with h5py (no elastic code): the documented root attributes, the grid as a
float64 [NY][NX] dataset (at step 0 every value is heat2d's initial field),
the step as an int64 scalar, each block's crc32 (zlib).  Prints TAP."""
import sys
import zlib

import h5py
import numpy as np

path, step, world, nx, ny, run_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
n = 0
failed = 0
M = (1 << 64) - 1


def ok(cond, desc):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n, desc))


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def splitmix64(x):
    x = (x + 0x9e3779b97f4a7c15) & M
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M
    return x ^ (x >> 31)


with h5py.File(path, "r") as f:
    a = f.attrs
    ok(text(a["elastic_format"]) == "elastic-l3", "attribute elastic_format = elastic-l3")
    ok(int(a["format_version"]) == 1, "attribute format_version = 1")
    ok(int(a["step"]) == step, "attribute step = %d" % step)
    ok(int(a["world_size"]) == world, "attribute world_size = %d" % world)
    ok(text(a["run_id"]) == run_id, "attribute run_id = %s" % run_id)
    ok(len(text(a["library_version"]).split(".")) == 3, "attribute library_version")
    ok(text(a["created"]).endswith("Z") and int(a["created_unix"]) > 0, "attributes created, created_unix")

    u = f["arrays/u"]
    ok(u.dtype == np.float64 and u.shape == (ny, nx), "arrays/u: float64 [%d][%d] (shape %s)" % (ny, nx, u.shape))
    ok(int(u.attrs["elem_size"]) == nx * 8, "arrays/u: elem_size %d" % (nx * 8))
    grid = u[()]
    if step == 0:
        want = np.array([[(splitmix64(r * nx + c) >> 11) / 9007199254740992.0 for c in range(nx)] for r in range(ny)])
        ok(np.array_equal(grid, want), "arrays/u at step 0: heat2d's initial field, row by row")
    else:
        ok(np.all(np.isfinite(grid)) and grid.min() >= 0 and grid.max() <= 1, "arrays/u: finite values in [0, 1]")

    s = f["values/step"]
    ok(s.shape == () and s.dtype == np.int64 and int(s[()]) == step, "values/step: int64 scalar = %d" % step)

    t = f["checksums/u"][()]
    ok(t.shape == (world, 3) and t.dtype == np.uint64, "checksums/u: uint64 [%d][3]" % world)
    good = sum(int(c) for _, c, _ in t) == ny
    for off, cnt, crc in t:
        raw = np.ascontiguousarray(grid[int(off):int(off + cnt)]).tobytes()
        good = good and zlib.crc32(raw) == int(crc)
    ok(good, "checksums/u: the blocks tile the rows and each crc32 matches zlib.crc32")

print("1..%d" % n)
sys.exit(1 if failed else 0)
