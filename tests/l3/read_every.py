#!/usr/bin/python3
"""read_every.py DIR [OTHER_DIR] - read every committed L3 file in DIR with
h5py alone (no elastic code): every dataset in full, and every block of
every /arrays and /blobs dataset checked against its crc32 in /checksums
and /blob_index (zlib's).  With OTHER_DIR, each file must also have the
same datasets, the same data and the same attributes (less the creation
time) as the file of the same name there.  Prints one line: "N files
read" or the first fault, and exits 1 on a fault."""
import glob
import os
import sys
import zlib

import h5py
import numpy as np


def fault(msg):
    print("FAULT: " + msg)
    sys.exit(1)


def blocks(f, group, table):
    for name, d in f[group].items():
        t = f[table][name][()]
        raw = np.ascontiguousarray(d[()]).view(np.uint8).reshape(-1)
        row = raw.size // d.shape[0] if d.shape and d.shape[0] else 0
        for r, (off, cnt, crc) in enumerate(t):
            if group == "arrays":
                piece = raw[int(off) * row:(int(off) + int(cnt)) * row]
            else:
                piece = raw[int(off):int(off) + int(cnt)]
            if zlib.crc32(piece.tobytes()) != int(crc):
                fault("%s: %s/%s: the block of rank %d fails its crc32" % (f.filename, group, name, r))


def walk(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


def attrs(f):
    out = {k: f.attrs[k] for k in f.attrs if k not in ("created", "created_unix")}
    f.visititems(lambda n, o: out.update({n + "@" + k: o.attrs[k] for k in o.attrs}))
    return out


files = sorted(glob.glob(os.path.join(sys.argv[1], "snap-*.h5")))
if not files:
    fault("no snapshot in " + sys.argv[1])
for p in files:
    with h5py.File(p, "r") as f:
        if f.attrs["elastic_format"] in (b"", ""):
            fault(p + ": no elastic_format")
        data = walk(f)
        blocks(f, "arrays", "checksums")
        if "blobs" in f:
            blocks(f, "blobs", "blob_index")
        if len(sys.argv) > 2:
            q = os.path.join(sys.argv[2], os.path.basename(p))
            with h5py.File(q, "r") as g:
                other = walk(g)
                if sorted(data) != sorted(other):
                    fault("%s and %s hold different datasets" % (p, q))
                for k in data:
                    if not np.array_equal(data[k], other[k]):
                        fault("%s and %s differ in %s" % (p, q, k))
                a, b = attrs(f), attrs(g)
                if sorted(a) != sorted(b) or any(np.any(a[k] != b[k]) for k in a):
                    fault("%s and %s have different attributes" % (p, q))
print("%d files read" % len(files))
