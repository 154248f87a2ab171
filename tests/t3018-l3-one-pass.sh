#!/bin/bash
# t3018-l3-one-pass.sh - a restore in one pass (l3_restore_latest, as a
# resume does): the file is opened with structural checks only, the blocks
# are verified as they are read, and the rest afterwards.  A flipped byte in
# the newest file's block is found during the read (the block split between
# two new ranks, and the block inside one rank), in an array the caller did
# not read, or in a blob: each time the restore falls back to the previous
# file, reads it afresh, and its data (step 10) is what the caller gets.
# An explicit damaged file fails with ELASTIC_ERR_CORRUPT naming the block.
. "${srcdir:-.}/lib/mpitest.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
dir=$tmp/snap
t=./l3/l3_test
s20=$dir/snap-000000000020.h5

# run OUT N ARGS...: mpi_run, with NUL bytes (which the tagged output of
# mpirun sometimes carries) removed from the output file OUT
run() {
    local out=$1
    shift
    mpi_run "$out" "$@"
    tr -d '\0' < "$out" > "$out.t" && mv "$out.t" "$out"
}

run "$tmp/w" 4 $t write "$dir" 10,20 --run d
is "$MPI_RC" 0 "4 ranks wrote steps 10 and 20" || diag "$(cat "$tmp/w")"
cp "$s20" "$tmp/orig"

# intact: one pass, step 20, every element checked
run "$tmp/r" 3 $t restore "$dir" --step 20 --world 4 --run d
is "$MPI_RC" 0 "intact: restore in one pass succeeds" || diag "$(cat "$tmp/r")"
is "$(grep -ac '<stdout>: pass ' "$tmp/r")" 1 "intact: the caller read once" || diag "$(cat "$tmp/r")"
grep -aq "read ok: .*snap-000000000020.h5 step 20, world 4 -> 3" "$tmp/r"
ok $? "intact: step 20 restored and checked" || diag "$(cat "$tmp/r")"

# falls_back N DESC PATTERN: restore at N ranks reads snap-20 (the fault,
# PATTERN, found on the way), then snap-10, whose data it returns
falls_back() {
    local out=$tmp/r-$1-${2// /_}
    run "$out" "$1" $t restore "$dir" --step 10 --world 4 --run d
    is "$MPI_RC" 0 "$2 ($1 ranks): restore succeeds" || diag "$(cat "$out")"
    grep -aq "<stdout>: pass 1: $s20: " "$out" && grep -aq "<stdout>: pass 2: $dir/snap-000000000010.h5: success" "$out"
    ok $? "$2 ($1 ranks): read snap-20, then snap-10 afresh" || diag "$(cat "$out")"
    grep -aq "read ok: .*snap-000000000010.h5 step 10, world 4 -> $1" "$out"
    ok $? "$2 ($1 ranks): the caller's data is step 10's, every element checked" || diag "$(cat "$out")"
    is "$(grep -ac 'is unusable' "$out")" 1 "$2 ($1 ranks): one warning line"
    grep -aq "warn: L3 snapshot $s20 is unusable ($3); falling back" "$out"
    ok $? "$2 ($1 ranks): the warning names the file and the fault" || diag "$(cat "$out")"
    grep -a 'is unusable' "$out" | sed 's/^/# /'
}

# field: 1000 rows over 4 ranks with weights 1,2,3,1; old rank 2 holds
# [428, 857).  At 3 ranks (even) it is split between new ranks 1 and 2; at
# 1 rank it lies inside the one range.
./l3/l3_poke flip "$s20" field 500 > /dev/null
ok $? "flipped a byte of field row 500 (old rank 2's block) in step 20"
bad="array 'field', block of old rank 2 (offset 428, count 429): checksum mismatch on read"
falls_back 3 "split block" "$bad (stored [0-9a-f]*, computed [0-9a-f]*)"
grep -aq "<stdout>: pass 1: $s20: .*: $s20: $bad" "$tmp/r-3-split_block"
ok $? "split block: found by the read itself (combined crc32 of two ranks' pieces)"
falls_back 1 "whole block" "$bad (stored [0-9a-f]*, computed [0-9a-f]*)"
grep -aq "<stdout>: pass 1: $s20: .*: $s20: $bad" "$tmp/r-1-whole_block"
ok $? "whole block: found by the read itself"

# an explicit damaged file: no fallback, CORRUPT
run "$tmp/rf" 2 $t restore "$s20" --step 20 --world 4
is "$MPI_RC" 1 "an explicit damaged file: the restore fails"
grep -aq "restore failed: .*corrupt.*: $s20: $bad" "$tmp/rf"
ok $? "... with ELASTIC_ERR_CORRUPT naming the block" || diag "$(cat "$tmp/rf")"

# ints (1017 rows, even over 4: old rank 1 holds [254, 508)) is not read
# by the caller: found after the read, by the verification of the rest
cp "$tmp/orig" "$s20"
./l3/l3_poke flip "$s20" ints 300 > /dev/null
falls_back 3 "unread array" "array 'ints', block of old rank 1 (offset 254, count 254): checksum mismatch (stored [0-9a-f]*, computed [0-9a-f]*)"
grep -aq "<stdout>: pass 1: $s20: success" "$tmp/r-3-unread_array"
ok $? "unread array: the read itself succeeded"

# a blob
cp "$tmp/orig" "$s20"
./l3/l3_poke flip "$s20" /blobs/rng 0 > /dev/null
ok $? "flipped the first byte of /blobs/rng (old rank 0's blob)"
falls_back 2 "blob" "blob 'rng' of old rank 0 .*checksum mismatch.*"

# both damaged: no valid snapshot, the caller's error
./l3/l3_poke flip "$dir/snap-000000000010.h5" field 0 > /dev/null
run "$tmp/none" 3 $t restore "$dir" --step 10 --world 4 --run d
is "$MPI_RC" 1 "both damaged: the restore fails"
grep -aq "restore failed: .*no valid L3 snapshot in '$dir': 2 rejected" "$tmp/none"
ok $? "... with ELASTIC_ERR_NO_SNAPSHOT, 2 rejected" || diag "$(cat "$tmp/none")"
done_testing
