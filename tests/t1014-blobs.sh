#!/bin/bash
# t1014-blobs.sh - opaque per-rank blobs: an application with a cyclic
# layout libelastic does not know re-shards its own data by fetching old
# ranks' blobs (from their L1, or their buddy's L2 when they are dead);
# a failing handler is retried; a rank dying inside the handler restarts
# the repair.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
APP="./libelastic/blob_app --steps 60 --items 203"

app_run "$tmp/ref" 8 $APP
is "$MPI_RC" 0 "failure-free run" || show_failure "$tmp/ref"
ref=$(checksum_of "$tmp/ref")
app_run "$tmp/ref3" 3 $APP
is "$(checksum_of "$tmp/ref3")" "$ref" "3 ranks give the same checksum"

scenario() {
    local name=$1 world=$2 want=$3 out="$tmp/$1"
    shift 3
    app_run "$out" 8 -x ELASTIC_EVENT_LOG="$out.events" "$@"
    is "$MPI_RC" 0 "$name: the job succeeded" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "$name: the failure-free checksum"
    is "$(final_world_of "$out")" "$world" "$name: final working size $world"
    [ -z "$want" ] || is "$(events "$out.events")" "$want" "$name: the event log"
}
scenario one-rank 7 "reshard_down 21 8->7 failed=2 spares= attempts=1" -- $APP --fail 2:25
grep -q 'blobs fetched [1-9]' "$tmp/one-rank"
ok $? "one-rank: the handler fetched blobs by old rank"
# killed at the same step: they die together (examples/inject.h), one recovery
scenario two-ranks 6 "reshard_down 21 8->6 failed=3,6 spares= attempts=1" -- $APP --fail 3:25 --fail 6:25
scenario two-steps 6 "reshard_down 14 8->7 failed=0 spares= attempts=1
reshard_down 42 7->6 failed=7 spares= attempts=1" -- $APP --fail 0:20 --fail 7:45
scenario spare 7 "reshard_down 21 7->7 failed=4 spares=7 attempts=1" -x ELASTIC_SPARE_RANKS=1 -- $APP --fail 4:25
# the handler fails twice, succeeds at the third call (max_reshard_retry_count 3)
scenario retries 7 "reshard_down 21 8->7 failed=2 spares= attempts=3" -- $APP --fail 2:25 --handler-fails 2
grep -q 'handler calls 3' "$tmp/retries"
ok $? "retries: the handler was called three times"
# a rank dies inside its handler: the repair starts again without it
scenario handler-death 6 "reshard_down 21 8->6 failed=2,5 spares= attempts=2" -- $APP --fail 2:25 --die-in-handler 5
done_testing
