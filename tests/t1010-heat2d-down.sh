#!/bin/bash
# t1010-heat2d-down.sh - heat2d survives real SIGKILLs in place (ULFM shrink,
# L1/L2 restore, re-shard) and ends with the failure-free checksum:
#   one rank killed; two at the same step; two at different steps; a rank
#   killed inside a snapshot; a rank killed inside a recovery (after the
#   shrink, or in the snapshot that ends it).
# 8 ranks oversubscribed on the machine's cores.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
HEAT="$EXAMPLES/heat2d --nx 96 --ny 80 --steps 100"

# The reference, and bit-identity across rank counts.
app_run "$tmp/ref8" 8 $HEAT
is "$MPI_RC" 0 "failure-free run, 8 ranks" || show_failure "$tmp/ref8"
ref=$(checksum_of "$tmp/ref8")
ok $([ -n "$ref" ]; echo $?) "the reference checksum is $ref"
app_run "$tmp/ref3" 3 $HEAT
is "$(checksum_of "$tmp/ref3")" "$ref" "3 ranks give the bit-identical field"
app_run "$tmp/ref1" 1 $HEAT
is "$(checksum_of "$tmp/ref1")" "$ref" "1 rank gives the bit-identical field"

# scenario NAME FINAL-WORLD EVENTS ARGS...: run with failures, compare
scenario() {
    local name=$1 world=$2 want=$3 out="$tmp/$1"
    shift 3
    app_run "$out" 8 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT "$@"
    is "$MPI_RC" 0 "$name: the job succeeded" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "$name: the failure-free checksum"
    is "$(final_world_of "$out")" "$world" "$name: final working size $world"
    [ -z "$want" ] || is "$(events "$out.events")" "$want" "$name: the event log"
}

scenario one-rank 7 "reshard_down 35 8->7 failed=3 spares= attempts=1" --fail-rank 3 --fail-step 40
grep -q 'injected failure at step 40' "$tmp/one-rank"
ok $? "one-rank: rank 3 really killed itself at step 40"
# killed at the same step: they die together (examples/inject.h), one recovery
scenario same-step 6 "reshard_down 35 8->6 failed=2,5 spares= attempts=1" --fail 2:40 --fail 5:40
scenario two-steps 6 "reshard_down 28 8->7 failed=2 spares= attempts=1
reshard_down 56 7->6 failed=6 spares= attempts=1" --fail 2:30 --fail 6:60
# killed while the snapshot of step 42 is exchanged: 42 never commits, 35 is used
scenario in-snapshot 7 "reshard_down 35 8->7 failed=3 spares= attempts=1" --fail 3:42:snapshot
# rank 5 dies inside the recovery from rank 3's death: the repair starts again.
# The halo exchange only couples neighbours, so when rank 3 dies at step 40
# rank 5 may still be at step 38 (two neighbours away): its hook is armed
# from step 36, below any step it can be at, and no recovery comes earlier.
scenario in-recovery 6 "reshard_down 35 8->6 failed=3,5 spares= attempts=2" --fail 3:40 --fail 5:36:recovery
# both: killed in a snapshot, then another inside that recovery
scenario snapshot-then-recovery 6 "reshard_down 35 8->6 failed=1,6 spares= attempts=2" \
    --fail 1:42:snapshot --fail 6:42:recovery
# rank 6 dies in the snapshot that protects the restored state: again
scenario in-protect 6 "reshard_down 35 8->6 failed=3,6 spares= attempts=2" --fail 3:40 --fail 6:35:protect
# the rank that is 0 in the working communicator
scenario rank-zero 7 "reshard_down 35 8->7 failed=0 spares= attempts=1" --fail 0:40

# the phases of an event are all timed
line=$(head -n 1 "$tmp/one-rank.events")
for k in t_detect_ms t_revoke_agree_ms t_shrink_ms t_restore_ms t_handler_ms t_protect_ms; do
    echo "$line" | grep -q "\"$k\":[0-9]"
    ok $? "the event line has $k"
done
done_testing
