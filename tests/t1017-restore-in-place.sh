#!/bin/bash
# t1017-restore-in-place.sh - in-place restore (elastic_array_set_realloc):
# after a spare takes a killed rank's place the survivors keep their
# registered buffers and the restored state is adopted as the snapshot of
# the rollback step (only the L2 copies whose buddy changed move); after a
# shrink the blocks are restored into the resized buffers.  Real SIGKILLs;
# every run must end with the failure-free checksum and intact ballast, also
# when a rank dies during the adoption or right after it (the adopted L1 and
# the L2 copies it moved must hold the right data).
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
HEAT="$EXAMPLES/heat2d --nx 96 --ny 80 --steps 100 --ballast 1 --report-buffers"

app_run "$tmp/ref" 7 $HEAT
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)" || show_failure "$tmp/ref"

# scenario NAME EVENTS [mpirun args --] ARGS...: 7 working ranks + 1 spare
scenario() {
    local name=$1 want=$2 out="$tmp/$1"
    shift 2
    app_run "$out" 8 -x ELASTIC_SPARE_RANKS=1 -x ELASTIC_LOG=debug \
        -x ELASTIC_EVENT_LOG="$out.events" "$@"
    is "$MPI_RC" 0 "$name: the job succeeded" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "$name: the failure-free checksum"
    grep -q 'ballast ok' "$out"
    ok $? "$name: the ballast is intact, every word"
    is "$(events "$out.events")" "$want" "$name: the event log"
}
# adopted OUT: how many ranks adopted the restored state as the snapshot
adopted() { grep -c 'adopted as its snapshot' "$1"; }

# the spare takes rank 3's place
scenario takeover "reshard_down 35 7->7 failed=3 spares=7 attempts=1" -- $HEAT --fail 3:40
is "$(grep -c 'buffers u kept ballast kept' "$tmp/takeover")" 6 \
    "takeover: the 6 survivors kept their registered buffers (no new allocation)"
is "$(grep -c 'rank 7: buffers u moved ballast moved' "$tmp/takeover")" 1 \
    "takeover: the spare got buffers for its block"
is "$(adopted "$tmp/takeover")" 7 "takeover: every rank adopted the restored state (no re-snapshot)"
is "$(grep -c 'L2 of rank .* received' "$tmp/takeover")" 1 \
    "takeover: one L2 copy moved (the dead rank's ward's, to the spare)"

# the same with the blocks copied into new buffers: a full snapshot instead
scenario copy "reshard_down 35 7->7 failed=3 spares=7 attempts=1" -- $HEAT --fail 3:40 --copy-restore
is "$(adopted "$tmp/copy")" 0 "copy: no adoption when the handler copied the blocks"
grep -q 'snapshot of step 35 committed' "$tmp/copy"
ok $? "copy: the restored state was protected by a snapshot instead"

# after the adoption, before the next snapshot: the spare (its adopted L1),
# rank 2 (its L2 copy now on the spare), rank 4 (holds rank 3's L2, kept)
scenario spare-dies-after "reshard_down 35 7->7 failed=3 spares=7 attempts=1
reshard_down 35 7->6 failed=7 spares= attempts=1" -- $HEAT --fail 3:40 --fail 7:41
scenario ward-dies-after "reshard_down 35 7->7 failed=3 spares=7 attempts=1
reshard_down 35 7->6 failed=2 spares= attempts=1" -- $HEAT --fail 3:40 --fail 2:41
scenario buddy-dies-after "reshard_down 35 7->7 failed=3 spares=7 attempts=1
reshard_down 35 7->6 failed=4 spares= attempts=1" -- $HEAT --fail 3:40 --fail 4:41

# rank 5 dies while the adoption's L2 copy is in flight: the repair starts
# again from the snapshot that was committed before (a shrink this time)
scenario in-adopt "reshard_down 35 7->6 failed=3,5 spares=7 attempts=2" \
    -- $HEAT --fail 3:40 --fail 5:35:protect
is "$(grep -c 'buffers u moved' "$tmp/in-adopt")" 7 \
    "in-adopt: after the shrink the blocks grew: every grid was resized for them"

# a shrink without spares: blocks restored into the resized buffers
app_run "$tmp/shrink" 7 -x ELASTIC_LOG=debug -- $HEAT --fail 3:40
is "$MPI_RC" 0 "shrink: the job succeeded" || show_failure "$tmp/shrink"
is "$(checksum_of "$tmp/shrink")" "$ref" "shrink: the failure-free checksum"
grep -q 'ballast ok' "$tmp/shrink"
ok $? "shrink: the ballast is intact"
is "$(adopted "$tmp/shrink")" 0 "shrink: a new layout is snapshotted, not adopted"
done_testing
