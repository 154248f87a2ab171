#!/bin/bash
# t3011-persist.sh - heat2d persists to L3 through the manager every
# persist_period steps: the files, retention (ELASTIC_SNAPSHOT_KEEP), the
# run id, the event lines, and the file as h5py reads it (the grid a float64
# [ny][nx] dataset, the step an int64 scalar, the documented attributes).
# A completed run's newest file resumes at other world sizes.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
snap=$top_builddir/src/snapshot/elastic-snapshot
HEAT="$EXAMPLES/heat2d --nx 48 --ny 40 --steps 100"
d=$tmp/snap

app_run "$tmp/ref" 4 $HEAT
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run without L3 (checksum $ref)"

out=$tmp/run
app_run "$out" 4 -x ELASTIC_RUN_ID=t3011 -x ELASTIC_SNAPSHOT_KEEP=2 -x ELASTIC_EVENT_LOG="$out.events" \
    -- $HEAT --persist-period 20 --snapshot-dir "$d"
is "$MPI_RC" 0 "the run with --persist-period 20 succeeded" || show_failure "$out"
is "$(checksum_of "$out")" "$ref" "persisting does not change the result"
is "$(cd "$d" && ls)" "latest
snap-000000000060.h5
snap-000000000080.h5" "steps 0..80 were written, the newest 2 kept (ELASTIC_SNAPSHOT_KEEP=2)"
is "$(readlink "$d/latest")" snap-000000000080.h5 "latest points at step 80"
is "$(events "$out.events")" "persist 0 size=4
persist 20 size=4
persist 40 size=4
persist 60 size=4
persist 80 size=4" "one persist event per file, written by rank 0"
grep -q '"event":"persist","step":80,"world_size":4,"bytes":[1-9][0-9]*,"t_write_ms":[0-9.]*,"file":"'"$d"'/snap-000000000080.h5"' "$out.events"
ok $? "the persist event has the file, its size and the write time" || diag "$(cat "$out.events")"
run_ok "elastic-snapshot verify DIR: every kept file is valid" "$snap" verify "$d"

# h5py and h5dump read them as plain HDF5
if /usr/bin/python3 -c 'import h5py' 2> /dev/null; then
    /usr/bin/python3 "$srcdir/l3/check_heat2d.py" "$d/snap-000000000080.h5" 80 4 48 40 t3011 > "$tmp/py" 2>&1
    ok $? "h5py: step 80 has the documented layout (l3/check_heat2d.py)" || diag "$(cat "$tmp/py")"
    sed 's/^/# /' "$tmp/py"
    # step 0 holds heat2d's initial field, every value in its place
    app_run "$tmp/w0" 3 -x ELASTIC_RUN_ID=py0 -- $HEAT --steps 5 --persist-period 10 --snapshot-dir "$tmp/s0"
    /usr/bin/python3 "$srcdir/l3/check_heat2d.py" "$tmp/s0/snap-000000000000.h5" 0 3 48 40 py0 > "$tmp/py0" 2>&1
    ok $? "h5py: step 0 written by 3 ranks is the initial field, row by row" || diag "$(cat "$tmp/py0")"
else
    skip "Debian's h5py is not installed (apt-get install python3-h5py)" 2
fi
if command -v h5dump > /dev/null; then
    h5dump -H "$d/snap-000000000080.h5" > "$tmp/h" 2>&1
    grep -A2 'DATASET "u"' "$tmp/h" | grep -q 'H5T_IEEE_F64LE' &&
        grep -A2 'DATASET "u"' "$tmp/h" | grep -q 'SIMPLE { ( 40, 48 ) / ( 40, 48 ) }'
    ok $? "h5dump: /arrays/u is float64 [40][48]" || diag "$(head -60 "$tmp/h")"
    grep -A2 'DATASET "step"' "$tmp/h" | grep -q 'H5T_STD_I64LE'
    ok $? "h5dump: /values/step is int64" || diag "$(head -60 "$tmp/h")"
else
    skip "h5dump is not installed (apt-get install hdf5-tools)" 2
fi

# the newest file resumes at other sizes (the run recomputes 80..99)
for n in 2 5; do
    app_run "$tmp/res$n" $n -x ELASTIC_RESUME=1 -x ELASTIC_RUN_ID=t3011 -- $HEAT --persist-period 20 --snapshot-dir "$d"
    is "$MPI_RC" 0 "resume at $n ranks succeeded" || show_failure "$tmp/res$n"
    grep -q "resumed from step 80 (file $d/snap-000000000080.h5, world 4 -> $n)" "$tmp/res$n"
    ok $? "resume at $n ranks: from step 80, written by 4 ranks" || show_failure "$tmp/res$n"
    is "$(checksum_of "$tmp/res$n")" "$ref" "resume at $n ranks: the failure-free checksum"
done

# another run id in the same directory: it never replaces or removes run
# t3011's files (its step 60 is refused with a warning), keeps its newest
app_run "$tmp/other" 2 -x ELASTIC_RUN_ID=other -x ELASTIC_SNAPSHOT_KEEP=1 -- $HEAT --persist-period 30 --snapshot-dir "$d"
is "$MPI_RC" 0 "a run with another id in the same directory completes" || show_failure "$tmp/other"
is "$(checksum_of "$tmp/other")" "$ref" "... with the failure-free checksum"
is "$(cd "$d" && ls snap-*)" "snap-000000000060.h5
snap-000000000080.h5
snap-000000000090.h5" "it kept its newest file (90) and replaced or removed none of run t3011's"
is "$(grep -c 'warn: L3 snapshot of step 60 not written' "$tmp/other")" 1 "one warning line for the refused step 60"
grep -q "warn: L3 snapshot of step 60 not written: '$d/snap-000000000060.h5' is a snapshot of run 't3011', not of this run 'other' (a snapshot directory holds one run's snapshots); the older snapshots are intact (newest: step 30); continuing" "$tmp/other"
ok $? "the warning says whose file it is and that the job goes on" || show_failure "$tmp/other"
app_run "$tmp/res-id" 3 -x ELASTIC_RESUME=1 -x ELASTIC_RUN_ID=t3011 -- $HEAT --snapshot-dir "$d"
grep -q "resumed from step 80 " "$tmp/res-id"
ok $? "a resume of run t3011 takes its newest file (80), not the other run's 90" || show_failure "$tmp/res-id"

# a kept file replaced while the run goes on by another run's file of the
# same name and the same modification time (touch -r; a new inode):
# retention, which remembers what it read of each file by its identity,
# must read it again and keep it (run t3011's, not this run's)
s=$tmp/swap
mkdir -p "$s"
mpi_start "$tmp/swap.out" 2 -x ELASTIC_RUN_ID=swap -x ELASTIC_SNAPSHOT_KEEP=3 -- \
    $EXAMPLES/heat2d --nx 48 --ny 40 --steps 100 --sleep 60 --persist-period 10 --snapshot-dir "$s"
swapped=no
if wait_until 60 test -e "$s/snap-000000000020.h5"; then
    cp "$d/snap-000000000080.h5" "$s/.other" &&
        touch -r "$s/snap-000000000010.h5" "$s/.other" &&
        mv -f "$s/.other" "$s/snap-000000000010.h5" && swapped=yes
fi
mpi_wait 180
is "$MPI_RC" 0 "a run whose kept file was replaced by another run's completes" || show_failure "$tmp/swap.out"
is "$swapped" yes "step 10's file was replaced after step 20 was committed"
is "$(cd "$s" && ls snap-*)" "snap-000000000010.h5
snap-000000000070.h5
snap-000000000080.h5
snap-000000000090.h5" "retention kept the replaced file (run t3011's) and this run's newest 3"
"$snap" show "$s/snap-000000000010.h5" 2>&1 | grep -q "^run id  *t3011$"
ok $? "the file kept is run t3011's" || diag "$("$snap" show "$s/snap-000000000010.h5" 2>&1)"
done_testing
