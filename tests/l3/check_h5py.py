#!/usr/bin/python3
"""check_h5py.py FILE STEP WORLD - read an L3 snapshot with h5py (no
elastic code) and check the documented layout and every value written by
tests/l3/l3_test.c, including each block's crc32 with zlib.  Prints TAP."""
import sys
import zlib

import h5py
import numpy as np

path, step, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = 0
failed = 0


def ok(cond, desc):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n, desc))


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


with h5py.File(path, "r") as f:
    a = f.attrs
    ok(text(a["elastic_format"]) == "elastic-l3", "attribute elastic_format")
    ok(int(a["format_version"]) == 1, "attribute format_version = 1")
    ok(int(a["step"]) == step, "attribute step = %d" % step)
    ok(int(a["world_size"]) == world, "attribute world_size = %d" % world)
    ok(text(a["run_id"]) == "py", "attribute run_id")
    ok(len(text(a["library_version"]).split(".")) == 3, "attribute library_version")
    ok(text(a["created"]).endswith("Z") and int(a["created_unix"]) > 0, "attributes created, created_unix")
    ok(sorted(f.keys()) == ["arrays", "blob_index", "blobs", "checksums", "values"], "top-level groups")

    rows = np.arange(1000, dtype=np.float64)[:, None]
    field = f["arrays/field"]
    ok(field.dtype == np.float64 and field.shape == (1000, 7), "field: float64 [1000][7]")
    want = step * 1e7 + rows * 16.0 + np.arange(7)[None, :]
    ok(np.array_equal(field[()], want), "field: every value")
    ok(int(field.attrs["elem_size"]) == 56, "field: elem_size 56")

    b = f["arrays/bytes"]
    ok(b.dtype == np.uint8 and b.shape == (503, 13), "bytes: uint8 [503][13] (untyped rows)")
    r = np.arange(503, dtype=np.int64)[:, None]
    j = np.arange(13, dtype=np.int64)[None, :]
    ok(np.array_equal(b[()], ((step * 31 + r * 7 + j * 3 + 1) % 256).astype(np.uint8)), "bytes: every value")

    i = f["arrays/ints"]
    ok(i.dtype == np.int64 and i.shape == (1017,), "ints: int64 [1017]")
    ok(np.array_equal(i[()], step * 1000003 - np.arange(1017, dtype=np.int64) * 3 - 5), "ints: every value")
    ok(f["arrays/none"].shape == (0,) and f["arrays/none"].dtype == np.float32, "none: float32 [0]")

    for name in ("field", "bytes", "ints", "none"):
        t = f["checksums/" + name][()]
        ds = f["arrays/" + name]
        ok(t.shape == (world, 3) and t.dtype == np.uint64, "checksums/%s: uint64 [%d][3]" % (name, world))
        good = True
        for off, cnt, crc in t:
            raw = np.ascontiguousarray(ds[int(off):int(off + cnt)]).tobytes() if cnt else b""
            good = good and zlib.crc32(raw) == int(crc)
        ok(good, "checksums/%s: each block's crc32 matches zlib.crc32 of its rows" % name)

    s = f["values/step"]
    ok(s.shape == () and s.dtype == np.int64 and int(s[()]) == step, "values/step: int64 scalar")
    ok(np.array_equal(f["values/seed"][()], np.array([(step + k * 5) % 256 for k in range(16)], np.uint8)),
       "values/seed: uint8 [16]")
    ok(np.array_equal(f["values/dt"][()], np.array([step * 0.5, 1.25, -3.0])), "values/dt: float64 [3]")
    for v in ("step", "seed", "dt"):
        ok(zlib.crc32(np.ascontiguousarray(f["values/" + v][()]).tobytes()) == int(f["values/" + v].attrs["crc32"]),
           "values/%s: crc32 attribute" % v)

    data = f["blobs/rng"][()]
    idx = f["blob_index/rng"][()]
    ok(data.dtype == np.uint8 and idx.shape == (world, 3), "blobs/rng uint8, blob_index/rng [%d][3]" % world)
    good = True
    for rank, (off, size, crc) in enumerate(idx):
        want = 0 if rank == 2 else (rank * 37 + step) % 200 + 1
        blob = data[int(off):int(off + size)].tobytes()
        good = good and size == want and zlib.crc32(blob) == int(crc)
        good = good and blob == bytes((step + rank * 13 + k) % 256 for k in range(int(size)))
    ok(good, "blobs/rng: each old rank's bytes, size and crc32")
    ok(f["blobs/empty"].shape == (0,), "blobs/empty: [0]")

print("1..%d" % n)
sys.exit(1 if failed else 0)
