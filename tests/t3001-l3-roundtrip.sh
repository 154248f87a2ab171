#!/bin/bash
# t3001-l3-roundtrip.sh - L3 snapshots written by N ranks are restored by M
# ranks (M < N, = N, > N): every element of each new block, the values and
# every old rank's blob are checked (tests/l3/l3_test.c); retention, the
# `latest` link, run ids, abandoned timelines and refused layouts.
. "${srcdir:-.}/lib/mpitest.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
dir=$tmp/snap
t=./l3/l3_test

# the elements checked by a reader: field 1000 + bytes 503 + ints 1017
elements=2520

mpi_run "$tmp/w" 4 $t write "$dir" 10,20,30,40 --keep 3 --run r1
is "$MPI_RC" 0 "4 ranks wrote steps 10, 20, 30, 40" || diag "$(cat "$tmp/w")"
is "$(grep -ac 'wrote step' "$tmp/w")" 4 "four commits reported"
is "$(cd "$dir" && echo *)" "latest snap-000000000020.h5 snap-000000000030.h5 snap-000000000040.h5" \
    "retention kept the newest 3 (ls order is step order)"
is "$(readlink "$dir/latest")" snap-000000000040.h5 "latest -> the newest"
is "$(ls -A "$dir" | grep -c '\.tmp$')" 0 "no temporary left behind"

for m in 2 4 7; do
    mpi_run "$tmp/r$m" $m $t read "$dir" --step 40 --world 4 --run r1
    is "$MPI_RC" 0 "restore at world size $m" || diag "$(cat "$tmp/r$m")"
    grep -aq "read ok: .*snap-000000000040.h5 step 40, world 4 -> $m, $elements elements checked" "$tmp/r$m"
    ok $? "world 4 -> $m: every element of every new block, values and blobs verified"
done

mpi_run "$tmp/f" 3 $t readfile "$dir/snap-000000000020.h5" --step 20 --world 4
is "$MPI_RC" 0 "an explicit older file opens (l3_open) at world size 3" || diag "$(cat "$tmp/f")"

mpi_run "$tmp/o" 2 $t nosnap "$dir" --run other
is "$MPI_RC" 0 "no snapshot of another run id: ELASTIC_ERR_NO_SNAPSHOT" || diag "$(cat "$tmp/o")"
grep -aq "no L3 snapshot of run 'other'" "$tmp/o"
ok $? "... with a message naming the run" || diag "$(cat "$tmp/o")"
mpi_run "$tmp/e" 2 $t nosnap "$tmp/nonexistent"
is "$MPI_RC" 0 "missing directory: ELASTIC_ERR_NO_SNAPSHOT" || diag "$(cat "$tmp/e")"
grep -aq "cannot read directory '$tmp/nonexistent': No such file" "$tmp/e"
ok $? "... naming the directory and the reason" || diag "$(cat "$tmp/e")"

# one writer, five readers, another size; the write verified before commit
mpi_run "$tmp/w1" 1 $t write "$tmp/one" 7 --rows 77 --run solo --verify
is "$MPI_RC" 0 "1 rank wrote step 7" || diag "$(cat "$tmp/w1")"
mpi_run "$tmp/r1" 5 $t read "$tmp/one" --step 7 --world 1 --rows 77 --run solo
is "$MPI_RC" 0 "world 1 -> 5 restore" || diag "$(cat "$tmp/r1")"

# a restart from step 20 that commits step 25 abandons the later timeline:
# committing 25 removes this run's 30 and 40 (verified by 2 ranks first)
mpi_run "$tmp/w2" 2 $t write "$dir" 25 --keep 3 --run r1 --verify
is "$MPI_RC" 0 "2 ranks wrote step 25" || diag "$(cat "$tmp/w2")"
is "$(cd "$dir" && echo snap-*)" "snap-000000000020.h5 snap-000000000025.h5" \
    "the later steps of the abandoned timeline were removed"
mpi_run "$tmp/r2" 3 $t read "$dir" --step 25 --world 2 --run r1
is "$MPI_RC" 0 "world 2 -> 3 restore of step 25" || diag "$(cat "$tmp/r2")"

# snapshots of another run in the same directory are never removed
mpi_run "$tmp/w3" 2 $t write "$tmp/mixed" 100,200 --run other
mpi_run "$tmp/w4" 2 $t write "$tmp/mixed" 10,20,30 --keep 1 --run mine
is "$(cd "$tmp/mixed" && echo snap-*)" "snap-000000000030.h5 snap-000000000100.h5 snap-000000000200.h5" \
    "keep 1 kept run 'mine' at step 30 and left run 'other' alone"
mpi_run "$tmp/r4" 2 $t read "$tmp/mixed" --step 30 --world 2 --run mine
is "$MPI_RC" 0 "run 'mine' restores its own step 30, not the newer 200 of 'other'" || diag "$(cat "$tmp/r4")"

# layouts that must be refused, on every rank, with the same message
mpi_run "$tmp/inv" 3 $t invalid "$tmp/inv-dir"
is "$MPI_RC" 0 "bad layouts, names, types, steps and unreplicated values are refused" || diag "$(cat "$tmp/inv")"
is "$(grep -ac 'refused' "$tmp/inv")" 10 "10 cases refused"
grep -a 'refused' "$tmp/inv" | sed 's/^/# /'
ok "$(test ! -e "$tmp/inv-dir/snap-000000000001.h5"; echo $?)" "nothing was written for a refused layout"
done_testing
