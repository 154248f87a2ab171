#!/bin/bash
# t1018-snapshot-overlap.sh - a periodic snapshot's L2 exchange overlaps the
# next step and commits at the next library call: until then the previous
# snapshot stays committed, and a rank killed while the exchange is in
# flight is recovered from it (real SIGKILLs, failure-free checksums).
# ELASTIC_SNAPSHOT_OVERLAP=0 (synchronous snapshots) is the comparison.
# Also: heat2d --no-elastic (the overhead benchmark's baseline) computes the
# same field.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
HEAT="$EXAMPLES/heat2d --nx 96 --ny 80 --steps 100 --ballast 1"

app_run "$tmp/ref" 6 $HEAT
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)" || show_failure "$tmp/ref"

# scenario NAME EVENTS [mpirun args --] ARGS...: 6 ranks
scenario() {
    local name=$1 want=$2 out="$tmp/$1"
    shift 2
    app_run "$out" 6 -x ELASTIC_LOG=debug -x ELASTIC_EVENT_LOG="$out.events" "$@"
    is "$MPI_RC" 0 "$name: the job succeeded" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "$name: the failure-free checksum"
    grep -q 'ballast ok' "$out"
    ok $? "$name: the ballast is intact, every word"
    is "$(events "$out.events")" "$want" "$name: the event log"
}

# rank 3 dies at the top of step 42, after posting the snapshot of 42: its
# L2 exchange is in flight, 42 never commits, the survivors roll back to 35
scenario in-flight "reshard_down 35 6->5 failed=3 spares= attempts=1" -- $HEAT --fail 3:42
# the same kill with synchronous snapshots: 42 is committed and used
scenario sync "reshard_down 42 6->5 failed=3 spares= attempts=1" \
    -x ELASTIC_SNAPSHOT_OVERLAP=0 -- $HEAT --fail 3:42
# killed inside the snapshot itself, after posting its L2 exchange
scenario in-snapshot "reshard_down 35 6->5 failed=2 spares= attempts=1" -- $HEAT --fail 2:42:snapshot
# no failure in flight: the snapshot posted at step 42 commits at step 43,
# and a later failure rolls back to it
scenario committed "reshard_down 42 6->5 failed=4 spares= attempts=1" -- $HEAT --fail 4:45

# B6's baseline: heat2d --no-elastic computes the same field without libelastic
app_run "$tmp/plain" 3 $HEAT --no-elastic
is "$MPI_RC" 0 "no-elastic: the job succeeded" || show_failure "$tmp/plain"
is "$(checksum_of "$tmp/plain")" "$ref" "no-elastic: the failure-free checksum"
done_testing
