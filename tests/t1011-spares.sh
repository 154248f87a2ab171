#!/bin/bash
# t1011-spares.sh - spare ranks: they wait idle inside libelastic, take a
# killed rank's place (working size unchanged, only its shard moves, from
# its buddy), and re-grow a shrunk world through maybe_reshard_up.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
HEAT="$EXAMPLES/heat2d --nx 96 --ny 80 --steps 100"

app_run "$tmp/ref" 8 $HEAT
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)"

# scenario NAME N FINAL-WORLD EVENTS [mpirun args --] ARGS...
scenario() {
    local name=$1 n=$2 world=$3 want=$4 out="$tmp/$1"
    shift 4
    app_run "$out" "$n" -x ELASTIC_EVENT_LOG="$out.events" "$@"
    is "$MPI_RC" 0 "$name: the job succeeded, spares included" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "$name: the failure-free checksum"
    is "$(final_world_of "$out")" "$world" "$name: final working size $world"
    is "$(events "$out.events")" "$want" "$name: the event log"
}

# no failure: the spare is released at the end
scenario idle 8 7 "(no events)" -x ELASTIC_SPARE_RANKS=1 -- $HEAT
grep -q 'heat2d: .* 8 ranks (7 working, 1 spares)' "$tmp/idle"
ok $? "idle: the application sees 7 working ranks and 1 spare"

# the spare takes rank 3's place
scenario takeover 8 7 "reshard_down 35 7->7 failed=3 spares=7 attempts=1" \
    -x ELASTIC_SPARE_RANKS=1 -- $HEAT --fail 3:40
# two spares for two failures at different steps
scenario two-spares 8 6 "reshard_down 28 6->6 failed=1 spares=6 attempts=1
reshard_down 56 6->6 failed=4 spares=7 attempts=1" -x ELASTIC_SPARE_RANKS=2 -- $HEAT --fail 1:30 --fail 4:60
# the spare dies inside the recovery that brings it in: shrink instead.  The
# spare takes its step from working rank 0, which may be at step 37 when
# rank 3 dies at 40 (three neighbours away): armed from step 36.
scenario spare-dies 8 6 "reshard_down 35 7->6 failed=3,7 spares= attempts=2" \
    -x ELASTIC_SPARE_RANKS=1 -- $HEAT --fail 3:40 --fail 7:36:recovery
# more failures than spares: the spare joins and the world shrinks by one
scenario short 8 6 "reshard_down 35 7->6 failed=2,5 spares=7 attempts=1" \
    -x ELASTIC_SPARE_RANKS=1 -- $HEAT --fail 2:40 --fail 5:40
# shrink at once, re-grow from the idle spare at the next check
scenario regrow 8 7 "reshard_down 35 7->6 failed=3 spares= attempts=1
reshard_up 50 6->7 failed= spares=7 attempts=1" \
    -x ELASTIC_SPARE_RANKS=1 -x ELASTIC_SPARE_TAKEOVER=0 -x ELASTIC_RESHARD_CHECK_PERIOD=25 -- $HEAT --fail 3:40
# re-grown, then killed again: the regrown rank's data is protected too
scenario regrow-again 8 6 "reshard_down 35 7->6 failed=3 spares= attempts=1
reshard_up 50 6->7 failed= spares=7 attempts=1
reshard_down 70 7->6 failed=7 spares= attempts=1" \
    -x ELASTIC_SPARE_RANKS=1 -x ELASTIC_SPARE_TAKEOVER=0 -x ELASTIC_RESHARD_CHECK_PERIOD=25 -- $HEAT \
    --fail 3:40 --fail 7:75

# idle spares sleep instead of spinning: a spare's CPU time stays small
app_run "$tmp/cpu" 3 -x ELASTIC_SPARE_RANKS=1 -- $EXAMPLES/heat2d --nx 512 --ny 512 --steps 2000 --quiet
is "$MPI_RC" 0 "a longer run with an idle spare"
line=$(grep -o 'spare rank 2 released after [0-9.]* s idle, [0-9.]* s CPU' "$tmp/cpu")
diag "$line"
idle=$(echo "$line" | awk '{print $6}')
cpu=$(echo "$line" | awk '{print $9}')
ok $(awk -v i="$idle" -v c="$cpu" 'BEGIN { exit !(i > 0.2 && c < 0.1 * i) }'; echo $?) \
    "the idle spare used under 10% of a core (${cpu} s CPU in ${idle} s)"
done_testing
