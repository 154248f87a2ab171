#!/bin/bash
# t1013-sgd.sh - the sgd example (data-parallel linear regression, weights
# replicated, data set block-distributed, fixed-point gradient sums) ends
# with bit-identical weights with and without failures, at any world size.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=9
SGD="$EXAMPLES/sgd --samples 3000 --features 12 --steps 150"

app_run "$tmp/ref" 8 $SGD
is "$MPI_RC" 0 "failure-free run, 8 ranks" || show_failure "$tmp/ref"
ref=$(checksum_of "$tmp/ref")
ok $([ -n "$ref" ]; echo $?) "reference weights checksum $ref"
grep -q 'loss [0-9.]*e-0[5-9]' "$tmp/ref"
ok $? "the regression converged: $(grep -o 'loss [0-9.e+-]*' "$tmp/ref")"
app_run "$tmp/ref5" 5 $SGD
is "$(checksum_of "$tmp/ref5")" "$ref" "5 ranks give bit-identical weights"

scenario() {
    local name=$1 world=$2 want=$3 out="$tmp/$1"
    shift 3
    app_run "$out" 8 -x ELASTIC_EVENT_LOG="$out.events" "$@"
    is "$MPI_RC" 0 "$name: the job succeeded" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "$name: bit-identical weights"
    is "$(final_world_of "$out")" "$world" "$name: final working size $world"
    is "$(events "$out.events")" "$want" "$name: the event log"
}
scenario one-rank 7 "reshard_down 72 8->7 failed=3 spares= attempts=1" -- $SGD --fail 3:77
scenario two-steps 6 "reshard_down 36 8->7 failed=5 spares= attempts=1
reshard_down 117 7->6 failed=1 spares= attempts=1" -- $SGD --fail 5:40 --fail 1:120
scenario in-snapshot 7 "reshard_down 45 8->7 failed=6 spares= attempts=1" -- $SGD --fail 6:54:snapshot
scenario spare 7 "reshard_down 45 7->7 failed=2 spares=7 attempts=1" -x ELASTIC_SPARE_RANKS=1 -- $SGD --fail 2:50
scenario regrow 7 "reshard_down 45 7->6 failed=2 spares= attempts=1
reshard_up 60 6->7 failed= spares=7 attempts=1" \
    -x ELASTIC_SPARE_RANKS=1 -x ELASTIC_SPARE_TAKEOVER=0 -x ELASTIC_RESHARD_CHECK_PERIOD=20 -- $SGD --fail 2:50
done_testing
