#!/bin/bash
# t1015-node-buddy.sh - L2 buddies live on another node: losing a whole
# node loses no data.  ELASTIC_TEST_RANKS_PER_NODE=4 makes libelastic treat
# ranks 0-3 and 4-7 as two nodes (this machine has one).
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
HEAT="$EXAMPLES/heat2d --nx 96 --ny 80 --steps 100"

app_run "$tmp/ref" 8 $HEAT
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run"

# the whole second "node" dies at once
out="$tmp/node"
app_run "$out" 8 -x ELASTIC_TEST_RANKS_PER_NODE=4 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT \
    --fail 4:40 --fail 5:40 --fail 6:40 --fail 7:40
is "$MPI_RC" 0 "node loss: the job succeeded" || show_failure "$out"
is "$(checksum_of "$out")" "$ref" "node loss: the failure-free checksum"
is "$(events "$out.events")" "reshard_down 35 8->4 failed=4,5,6,7 spares= attempts=1" "node loss: one event, 8 -> 4"

# with buddies on the same node (no node information), the same loss is final
out="$tmp/same-node"
app_run "$out" 8 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --fail 4:40 --fail 5:40 --fail 6:40 --fail 7:40
is "$MPI_RC" 76 "same node: the loss is final (ELASTIC_EXIT_RELAUNCH)"
grep -q 'ranks 4 and 5 both failed' "$out"
ok $? "same node: the message names rank 4 and its buddy 5"
done_testing
