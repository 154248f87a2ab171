#!/bin/bash
# t3005-l3-h5py.sh - an L3 snapshot is ordinary HDF5: Debian's h5py reads
# every dataset in its documented global shape and type (and can check the
# checksums with zlib), and h5dump shows the layout.
. "${srcdir:-.}/lib/mpitest.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
file=$tmp/snap/snap-000000000005.h5

mpi_run "$tmp/w" 3 ./l3/l3_test write "$tmp/snap" 5 --run py
is "$MPI_RC" 0 "3 ranks wrote step 5" || diag "$(cat "$tmp/w")"

if /usr/bin/python3 -c 'import h5py' 2> /dev/null; then
    /usr/bin/python3 "$srcdir/l3/check_h5py.py" "$file" 5 3 > "$tmp/py" 2>&1
    rc=$?
    ok $rc "h5py reads the layout and every value (l3/check_h5py.py)"
    sed 's/^/# /' "$tmp/py" | { [ $rc -eq 0 ] && grep -c '^# ok' | sed 's/^/# checks passed: /' || cat; }
else
    skip "Debian's h5py is not installed (apt-get install python3-h5py)"
fi

if command -v h5dump > /dev/null; then
    h5dump -H "$file" > "$tmp/h" 2>&1
    is $? 0 "h5dump -H reads the file"
    grep -q 'DATASET "field"' "$tmp/h" && grep -A2 'DATASET "field"' "$tmp/h" | grep -q 'H5T_IEEE_F64LE' &&
        grep -A2 'DATASET "field"' "$tmp/h" | grep -q 'SIMPLE { ( 1000, 7 ) / ( 1000, 7 ) }'
    ok $? "h5dump: /arrays/field is float64 [1000][7]" || diag "$(head -80 "$tmp/h")"
    h5dump -d /values/step -d /checksums/field "$file" > "$tmp/d" 2>&1
    grep -q '(0): 5$' "$tmp/d"
    ok $? "h5dump: /values/step = 5" || diag "$(cat "$tmp/d")"
    grep -q '(2,0): ' "$tmp/d"
    ok $? "h5dump: /checksums/field has a row per old rank" || diag "$(cat "$tmp/d")"
else
    skip "h5dump is not installed (apt-get install hdf5-tools)"
fi
done_testing
