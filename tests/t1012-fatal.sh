#!/bin/bash
# t1012-fatal.sh - the final errors: each ends the job with one clear message
# on every survivor and the distinct exit code ELASTIC_EXIT_RELAUNCH (76)
# that a launcher acts on; non-elastic MPI errors and invalid configuration
# are handed back instead.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
HEAT="$EXAMPLES/heat2d --nx 96 --ny 80 --steps 100"
RELAUNCH=76

app_run "$tmp/ref" 8 $HEAT
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)"

# final NAME MESSAGE SURVIVORS EVENTS [mpirun args --] ARGS...
final() {
    local name=$1 msg=$2 survivors=$3 want=$4 out="$tmp/$1"
    shift 4
    app_run "$out" 8 -x ELASTIC_EVENT_LOG="$out.events" "$@"
    is "$MPI_RC" "$RELAUNCH" "$name: the job exits with ELASTIC_EXIT_RELAUNCH" || show_failure "$out"
    is "$(grep -F "$msg" "$out" | grep -c 'elastic\[rank [0-9]*\]: error: ')" "$survivors" \
        "$name: every survivor reports: $msg" || show_failure "$out"
    is "$(checksum_of "$out")" "" "$name: no result is claimed"
    is "$(events "$out.events")" "$want" "$name: the event log ends with a fatal event"
}

final max-events "elastic down event 2 exceeds max_elastic_down_event_count 1; relaunch needed" 6 \
    "reshard_down 28 8->7 failed=2 spares= attempts=1
fatal 56 7->0 failed=6 spares= attempts=1" \
    -x ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT=1 -- $HEAT --fail 2:30 --fail 6:60
final min-world "6 working ranks left, below min_world_size 7; relaunch needed" 6 \
    "reshard_down 28 8->7 failed=2 spares= attempts=1
fatal 56 7->0 failed=6 spares= attempts=1" \
    -x ELASTIC_MIN_WORLD_SIZE=7 -- $HEAT --fail 2:30 --fail 6:60
final buddy "ranks 3 and 4 both failed: rank 4 held the only copy (L2 buddy) of rank 3's snapshot of step 35; relaunch needed" 6 \
    "fatal 35 8->0 failed=3,4 spares= attempts=1" -- $HEAT --fail 3:40 --fail 4:40
final no-snapshot "no snapshot to restore: a process failed before the first snapshot completed; relaunch needed" 7 \
    "fatal -1 8->0 failed=5 spares= attempts=1" -- $HEAT --fail 5:0:snapshot
# an idle spare hears the final error too and exits with the same code
final spare-hears "ranks 3 and 4 both failed" 6 "fatal 35 7->0 failed=3,4 spares= attempts=1" \
    -x ELASTIC_SPARE_RANKS=1 -- $HEAT --fail 3:40 --fail 4:40
grep -q '^\[[0-9]*,7\]<stderr>: .*ranks 3 and 4 both failed' "$tmp/spare-hears"
ok $? "spare-hears: the spare (rank 7) reported it"
final handler-retries "the handler failed 4 times (max_reshard_retry_count 3); relaunch needed" 7 \
    "fatal 21 8->0 failed=2 spares= attempts=5" -- ./libelastic/blob_app --handler-fails 4 --fail 2:25

# a non-elastic error: handed back, nothing changes, the job goes on
out="$tmp/mpi-error"
app_run "$out" 8 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --mpi-error 50
is "$MPI_RC" 0 "mpi-error: the job succeeded" || show_failure "$out"
grep -q 'non-elastic MPI error returned: MPI error: not a process failure, returned unchanged: MPI error [0-9]* (class [0-9]*): MPI_ERR_RANK: invalid rank' "$out"
ok $? "mpi-error: ELASTIC_ERR_MPI with MPI's own message" || show_failure "$out"
is "$(checksum_of "$out")" "$ref" "mpi-error: the failure-free checksum"
is "$(final_world_of "$out")" 8 "mpi-error: no rank was dropped"
is "$(events "$out.events")" "(no events)" "mpi-error: no event"

# invalid configuration: one line naming the field or variable, value, range
bad_config() {
    local name=$1 want=$2 out="$tmp/$1"
    shift 2
    app_run "$out" 8 "$@" -- $HEAT
    is "$MPI_RC" 1 "$name: the job exits 1 (ELASTIC_ERR_INVAL)"
    grep -q -F "$want" "$out"
    ok $? "$name: '$want'" || show_failure "$out"
}
bad_config period "heat2d: ELASTIC_SNAPSHOT_PERIOD: -3 is invalid (expected an integer >= 1)" \
    -x ELASTIC_SNAPSHOT_PERIOD=-3
bad_config spares "heat2d: spare_ranks: 8 is invalid (expected an integer from 0 to 7: at least one of the 8 ranks must work)" \
    -x ELASTIC_SPARE_RANKS=8
bad_config min-world "heat2d: ELASTIC_MIN_WORLD_SIZE: 'abc' is invalid (expected an integer >= 1)" \
    -x ELASTIC_MIN_WORLD_SIZE=abc
bad_config buffer "heat2d: ELASTIC_SNAPSHOT_BUFFER_SIZE: 1 is invalid (expected an integer from 2 to 1024)" \
    -x ELASTIC_SNAPSHOT_BUFFER_SIZE=1
bad_config takeover "heat2d: ELASTIC_SPARE_TAKEOVER: 'maybe' is invalid (expected 0 or 1)" \
    -x ELASTIC_SPARE_TAKEOVER=maybe
done_testing
