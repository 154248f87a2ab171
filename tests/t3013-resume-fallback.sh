#!/bin/bash
# t3013-resume-fallback.sh - a damaged newest L3 snapshot (truncated, or one
# byte flipped in one rank's block): elastic-snapshot verify fails naming
# the fault (the block: array, old rank, offset, count), and a resume falls
# back to the previous snapshot with one warning naming the file and the
# fault, and heat2d still reaches the failure-free checksum.  Nothing valid
# left: ELASTIC_ERR_NO_SNAPSHOT, one error line, exit 1.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
snap=$top_builddir/src/snapshot/elastic-snapshot
HEAT="$EXAMPLES/heat2d --nx 48 --ny 80 --steps 100 --persist-period 20"
d=$tmp/snap
s80=$d/snap-000000000080.h5

app_run "$tmp/ref" 4 $EXAMPLES/heat2d --nx 48 --ny 80 --steps 100
ref=$(checksum_of "$tmp/ref")
app_run "$tmp/w" 4 -- $HEAT --snapshot-dir "$d"
is "$MPI_RC" 0 "4 ranks wrote steps 40, 60, 80 (checksum $ref)" || show_failure "$tmp/w"
cp -a "$d" "$tmp/orig"

# falls_back NAME FAULT: resume at 3 ranks uses step 60
falls_back() {
    local out=$tmp/$1
    app_run "$out" 3 -x ELASTIC_RESUME=1 -- $HEAT --snapshot-dir "$d"
    is "$MPI_RC" 0 "$1: the resumed job completed" || show_failure "$out"
    is "$(grep -c 'is unusable' "$out")" 1 "$1: one warning line (working rank 0)"
    grep -q "elastic\[rank 0\]: warn: L3 snapshot $s80 is unusable (.*$2.*); falling back to an older snapshot" "$out"
    ok $? "$1: the warning names the file and the fault" || show_failure "$out"
    grep -a 'is unusable' "$out" | sed 's/^/# /'
    grep -q "<stdout>: resumed from step 60 (file $d/snap-000000000060.h5, world 4 -> 3)" "$out"
    ok $? "$1: resumed from the previous snapshot, step 60" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "$1: the failure-free checksum"
    rm -rf "$d"
    cp -a "$tmp/orig" "$d"
}

# a byte flipped in row 50: old rank 2's block (rows 40..59)
./l3/l3_poke flip "$s80" u 50 > /dev/null
ok $? "flipped the first byte of row 50 of /arrays/u in step 80"
"$snap" verify "$s80" > "$tmp/v" 2>&1
is $? 1 "elastic-snapshot verify fails on it"
grep -q "CORRUPT: array 'u', block of old rank 2 (offset 40, count 20): checksum mismatch" "$tmp/v"
ok $? "verify names the array, the old rank and the block" || diag "$(cat "$tmp/v")"
falls_back flipped "array 'u', block of old rank 2 (offset 40, count 20): checksum mismatch"

# truncated to half its size
truncate -s $(($(stat -c %s "$s80") / 2)) "$s80"
"$snap" verify "$s80" > "$tmp/v" 2>&1
is $? 1 "elastic-snapshot verify fails on the truncated file"
grep -q "truncated" "$tmp/v"
ok $? "verify says it is truncated" || diag "$(cat "$tmp/v")"
falls_back truncated truncated

# the two newest damaged: two warnings, step 40
truncate -s 1000 "$s80"
./l3/l3_poke flip "$d/snap-000000000060.h5" u 0 > /dev/null
out=$tmp/two
app_run "$out" 2 -x ELASTIC_RESUME=1 -- $HEAT --snapshot-dir "$d"
is "$(grep -c 'is unusable' "$out")" 2 "two damaged: a warning for each"
grep -q "<stdout>: resumed from step 40 " "$out" && [ "$(checksum_of "$out")" = "$ref" ]
ok $? "two damaged: resumed from step 40, the failure-free checksum" || show_failure "$out"

# nothing valid: a clear error and exit 1, not a fresh start
rm -rf "$d"
cp -a "$tmp/orig" "$d"
for f in "$d"/snap-*.h5; do truncate -s 100 "$f"; done
out=$tmp/none
app_run "$out" 3 -x ELASTIC_RESUME=1 -- $HEAT --snapshot-dir "$d"
is "$MPI_RC" 1 "all damaged: the job exits 1"
is "$(grep -c 'elastic\[rank [0-9]*\]: error: resume (ELASTIC_RESUME=1): no valid L3 snapshot in' "$out")" 1 \
    "all damaged: one error line naming the cause" || show_failure "$out"
grep -a 'error: resume' "$out" | sed 's/^/# /'
is "$(checksum_of "$out")" "" "all damaged: no result is claimed"
done_testing
