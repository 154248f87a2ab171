#!/bin/bash
# t3012-suspend.sh - suspend on preemption with real signals: SIGTERM to one
# rank at a random step, SIGTERM to every rank, SIGUSR1 to mpirun (which
# forwards it; a spare leaves too), sgd as well.  Each suspended job exits
# 75 after writing L3 at the agreed step, and the same command with
# ELASTIC_RESUME=1 continues on the same, fewer or more ranks to the
# failure-free checksum.  ELASTIC_SIGNALS=none leaves the default action.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
SUSPENDED=75
ARGS="--nx 96 --ny 80 --steps 1500"
HEAT="$EXAMPLES/heat2d $ARGS --sleep 2 --progress 50"

app_run "$tmp/ref" 4 $EXAMPLES/heat2d $ARGS
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)"

# a progress line "step S" for a random S in 200..650
random_step() { echo $(((RANDOM % 10 + 4) * 50)); }
suspended_step() { tr -d '\0' < "$1" | sed -n 's/.*<stdout>: suspended at step \([0-9]*\).*/\1/p' | head -n 1; }

# suspended NAME OUT EVENTS REASON: checks on a job that should have suspended
suspended() {
    local name=$1 out=$2 reason=$3 dir=$4 s
    is "$MPI_RC" "$SUSPENDED" "$name: the job exits 75 (ELASTIC_EXIT_SUSPENDED)" || show_failure "$out"
    s=$(suspended_step "$out")
    ok $([ -n "$s" ]; echo $?) "$name: rank 0 printed 'suspended at step $s'" || show_failure "$out"
    is "$(grep -c 'suspended at step' "$out")" 1 "$name: only rank 0 says so"
    ok "$(test -f "$dir/snap-$(printf %012d "$s").h5"; echo $?)" "$name: the L3 file of step $s is there"
    is "$(events "$out.events" | tail -n 2)" "persist $s size=4
suspend $s size=4 reason=$reason file=yes" "$name: persist and suspend events, reason $reason"
    SUSPENDED_AT=$s
}

# resume_at NAME N DIR STEP [CMD]: the same command with ELASTIC_RESUME=1
# (WORKING: the working size if not N)
resume_at() {
    local name=$1 n=$2 dir=$3 step=$4 out="$tmp/$1-resume$2"
    shift 4
    app_run "$out" "$n" -x ELASTIC_RESUME=1 -x ELASTIC_SNAPSHOT_DIR="$dir" -- ${@:-$HEAT}
    is "$MPI_RC" 0 "$name: resumed at $n ranks, the job completed" || show_failure "$out"
    tr -d '\0' < "$out" | grep -q "<stdout>: resumed from step $step (file $dir/snap-$(printf %012d "$step").h5, world 4 -> ${WORKING:-$n})"
    ok $? "$name: at $n ranks it resumed from step $step" || show_failure "$out"
    is "$(checksum_of "$out")" "${REF:-$ref}" "$name: at $n ranks, the failure-free checksum"
}

# 1. SIGTERM to one rank at a random step; resume on 4, 2 and 6 ranks
S=$(random_step)
out=$tmp/one
mpi_start "$out" 4 -x ELASTIC_SNAPSHOT_DIR="$tmp/one.d" -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT
kill_rank_at 2 "<stdout>: step $S\$" 120 TERM
ok $? "one: SIGTERM sent to rank 2 after step $S"
mpi_wait 120
suspended one "$out" SIGTERM "$tmp/one.d"
ok $((SUSPENDED_AT < S)) "one: it suspended after the signal (step $SUSPENDED_AT >= $S)"
for n in 4 2 6; do
    resume_at one $n "$tmp/one.d" "$SUSPENDED_AT"
done

# 2. SIGTERM to every rank (as a scheduler does)
S=$(random_step)
out=$tmp/all
mpi_start "$out" 4 -x ELASTIC_SNAPSHOT_DIR="$tmp/all.d" -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT
wait_for_grep "<stdout>: step $S\$" "$out" 120
for r in 0 1 2 3; do kill_rank $r TERM; done
mpi_wait 120
suspended all "$out" SIGTERM "$tmp/all.d"
resume_at all 3 "$tmp/all.d" "$SUSPENDED_AT"

# 3. SIGUSR1 to mpirun, which forwards it to every rank, the spare too
S=$(random_step)
out=$tmp/usr1
mpi_start "$out" 5 -x ELASTIC_SPARE_RANKS=1 -x ELASTIC_SNAPSHOT_DIR="$tmp/usr1.d" -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT
wait_for_grep "<stdout>: step $S\$" "$out" 120
kill -USR1 "$mpi_pid"
ok $? "usr1: SIGUSR1 sent to mpirun after step $S"
mpi_wait 120
suspended usr1 "$out" SIGUSR1 "$tmp/usr1.d"
grep -q '^\[[0-9]*,4\]<stdout>: spare rank 4 released' "$out"
ok $? "usr1: the idle spare left cleanly" || show_failure "$out"
WORKING=4 resume_at usr1 5 "$tmp/usr1.d" "$SUSPENDED_AT" -x ELASTIC_SPARE_RANKS=1 -- $HEAT
grep -q "heat2d: .* 5 ranks (4 working, 1 spares)" "$tmp/usr1-resume5"
ok $? "usr1: the resumed job has its spare again" || show_failure "$tmp/usr1-resume5"

# 4. sgd: the weights (a value) and the data set (an array)
SGD="$EXAMPLES/sgd --samples 3000 --steps 1500"
app_run "$tmp/sgd-ref" 4 $SGD
sref=$(checksum_of "$tmp/sgd-ref")
is "$MPI_RC" 0 "sgd reference (checksum $sref)"
out=$tmp/sgd
mpi_start "$out" 4 -x ELASTIC_SNAPSHOT_DIR="$tmp/sgd.d" -x ELASTIC_EVENT_LOG="$out.events" -- $SGD --sleep 2 --progress 50
wait_for_grep "<stdout>: step $(((RANDOM % 8 + 2) * 50))\$" "$out" 120
kill_rank 1 TERM
mpi_wait 120
suspended sgd "$out" SIGTERM "$tmp/sgd.d"
REF=$sref resume_at sgd 3 "$tmp/sgd.d" "$SUSPENDED_AT" $SGD

# 5. ELASTIC_SIGNALS=none: nothing is installed, SIGUSR1 kills the rank
if mpi_have_ulfm; then
    out=$tmp/none
    mpi_start "$out" 4 -x ELASTIC_SIGNALS=none -x ELASTIC_SNAPSHOT_PERIOD=20 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT
    kill_rank_at 2 "<stdout>: step 200\$" 120 USR1
    mpi_wait 120
    is "$MPI_RC" 0 "none: the job completed (in place, without rank 2)" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "none: the failure-free checksum"
    events "$out.events" | grep -q '^reshard_down .* 4->3 failed=2 '
    ok $? "none: SIGUSR1 killed rank 2 (a failure, not a suspend)" || diag "$(events "$out.events")"
else
    skip "this MPI has no ULFM: a killed rank ends the job" 3
fi
done_testing
