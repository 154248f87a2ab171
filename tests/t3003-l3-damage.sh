#!/bin/bash
# t3003-l3-damage.sh - a flipped byte in one block, a truncated file, an
# incomplete file, garbage and a foreign HDF5 file as the newest snapshot:
# `elastic-snapshot verify` fails naming the bad block, and restore falls
# back to the previous snapshot with one warning line naming the file and
# the fault.  With nothing valid left: ELASTIC_ERR_NO_SNAPSHOT.
. "${srcdir:-.}/lib/mpitest.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
dir=$tmp/snap
t=./l3/l3_test
snap=$top_builddir/src/snapshot/elastic-snapshot
s20=$dir/snap-000000000020.h5

# restore_falls_back DESC PATTERN: restore at 3 ranks must give step 10,
# with exactly one warning (rank 0) naming snap-20 and PATTERN
restore_falls_back() {
    mpi_run "$tmp/r" 3 $t read "$dir" --step 10 --world 4 --run d
    is "$MPI_RC" 0 "$1: restore succeeds" || diag "$(cat "$tmp/r")"
    grep -aq "read ok: .*snap-000000000010.h5 step 10" "$tmp/r"
    ok $? "$1: the previous snapshot (step 10) was restored" || diag "$(cat "$tmp/r")"
    is "$(grep -ac 'is unusable' "$tmp/r")" 1 "$1: one warning line (from rank 0)"
    grep -aq "elastic[^:]*: warn: L3 snapshot $s20 is unusable (.*$2.*); falling back" "$tmp/r"
    ok $? "$1: the warning names the file and the fault" || diag "$(cat "$tmp/r")"
    grep -a 'is unusable' "$tmp/r" | sed 's/^/# /'
}

mpi_run "$tmp/w" 4 $t write "$dir" 10,20 --run d
is "$MPI_RC" 0 "4 ranks wrote steps 10 and 20" || diag "$(cat "$tmp/w")"
cp "$s20" "$tmp/orig"

# field has 1000 rows over 4 ranks with weights 1,2,3,1: old rank 2 holds
# rows [428, 857), so element 500 is in its block
./l3/l3_poke flip "$s20" field 500 > /dev/null
"$snap" verify "$s20" > "$tmp/v" 2>&1
is $? 1 "verify of the flipped file exits 1"
grep -aq "CORRUPT: array 'field', block of old rank 2 (offset 428, count 429): checksum mismatch" "$tmp/v"
ok $? "verify names the array, the old rank and the offset of the bad block" || diag "$(cat "$tmp/v")"
diag "$(cat "$tmp/v")"
"$snap" verify "$dir" > "$tmp/vd" 2>&1
is $? 1 "verify DIR exits 1"
grep -aq "1 of 2 snapshots valid" "$tmp/vd"
ok $? "verify DIR counts one valid of two" || diag "$(cat "$tmp/vd")"
"$snap" list --verify "$dir" > "$tmp/l" 2>&1
grep -aq "snap-000000000020.h5 *CORRUPT: array 'field', block of old rank 2" "$tmp/l" &&
    grep -aq "snap-000000000010.h5 *ok (verified)" "$tmp/l"
ok $? "list --verify shows the corrupt and the good one" || diag "$(cat "$tmp/l")"
restore_falls_back "flipped byte" "array 'field', block of old rank 2 (offset 428, count 429): checksum mismatch"

cp "$tmp/orig" "$s20"
truncate -s $(($(stat -c %s "$s20") / 2)) "$s20"
"$snap" verify "$s20" > "$tmp/v" 2>&1
is $? 1 "verify of the truncated file exits 1"
grep -aq "truncated" "$tmp/v"
ok $? "verify says it is truncated" || diag "$(cat "$tmp/v")"
diag "$(cat "$tmp/v")"
restore_falls_back "truncated" "truncated"

cp "$tmp/orig" "$s20"
./l3/l3_poke unlink "$s20" /checksums/ints > /dev/null
"$snap" verify "$s20" > "$tmp/v" 2>&1
is $? 1 "verify of a file missing a dataset exits 1"
grep -aq "incomplete" "$tmp/v"
ok $? "verify says it is incomplete" || diag "$(cat "$tmp/v")"
restore_falls_back "incomplete" "incomplete file"

rm -f "$s20"
echo "not a snapshot" > "$dir/snap-000000000030.h5"
./l3/l3_poke foreign "$dir/snap-000000000040.h5" > /dev/null
mpi_run "$tmp/r" 2 $t read "$dir" --step 10 --world 4 --run d
is "$MPI_RC" 0 "garbage and a foreign HDF5 file as the newest: restore succeeds" || diag "$(cat "$tmp/r")"
grep -aq "snap-000000000040.h5 is unusable (HDF5 file, but not an elastic snapshot" "$tmp/r" &&
    grep -aq "snap-000000000030.h5 is unusable (not an HDF5 file" "$tmp/r"
ok $? "... with a warning for each" || diag "$(cat "$tmp/r")"
"$snap" list "$dir" > "$tmp/l" 2>&1
is $? 0 "list copes with the garbage"
grep -aq "snap-000000000030.h5 *BAD: not an HDF5 file" "$tmp/l"
ok $? "... and says what is wrong" || diag "$(cat "$tmp/l")"

./l3/l3_poke flip "$dir/snap-000000000010.h5" ints 0 > /dev/null
mpi_run "$tmp/n" 2 $t nosnap "$dir" --run d
is "$MPI_RC" 0 "nothing valid left: ELASTIC_ERR_NO_SNAPSHOT" || diag "$(cat "$tmp/n")"
grep -aq "no valid L3 snapshot in '$dir': 3 rejected, the newest snap-000000000040.h5" "$tmp/n"
ok $? "... with a message saying how many were rejected and why" || diag "$(cat "$tmp/n")"
done_testing
