#!/bin/bash
# t8002-python-heat2d.sh - examples/python/heat2d.py, the NumPy port of
# heat2d.c, under mpirun --with-ft ulfm: the C program's checksum at 8, 3
# and 1 ranks; real SIGKILLs recovered in place to the failure-free
# checksum (one rank, two at the same step, one inside a snapshot, a spare
# taking over, a shrink and a regrow from the spare); sgd.py with a
# picklable blob through two failures.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"
. "${srcdir:-.}/python/python.sh"

py_skip_unless_built
mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
ARGS="--nx 96 --ny 80 --steps 100"
PYRUN=(-x PYTHONPATH="$PYPATH" -x ELASTIC_SNAPSHOT_PERIOD)

# the C program's checksum, and the Python program's at several sizes
app_run "$tmp/c8" 8 $EXAMPLES/heat2d $ARGS
ref=$(checksum_of "$tmp/c8")
is "$MPI_RC" 0 "heat2d (C) at 8 ranks: checksum $ref"
for n in 8 3 1; do
    app_run "$tmp/py$n" $n "${PYRUN[@]}" -- "$PY" "$HEAT_PY" $ARGS
    is "$MPI_RC" 0 "heat2d.py at $n ranks: exit 0" || show_failure "$tmp/py$n"
    is "$(checksum_of "$tmp/py$n")" "$ref" "heat2d.py at $n ranks: the C program's checksum"
done

# scenario NAME N FINAL-WORLD EVENTS [mpirun args --] ARGS...
scenario() {
    local name=$1 n=$2 world=$3 want=$4 out="$tmp/$1" extra=()
    shift 4
    if printf '%s\n' "$@" | grep -qx -- '--'; then
        while [ "$1" != "--" ]; do
            extra+=("$1")
            shift
        done
        shift
    fi
    app_run "$out" "$n" "${PYRUN[@]}" -x ELASTIC_EVENT_LOG="$out.events" "${extra[@]}" -- \
        "$PY" "$HEAT_PY" $ARGS "$@"
    is "$MPI_RC" 0 "$name: the job succeeded" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "$name: the failure-free checksum"
    is "$(final_world_of "$out")" "$world" "$name: final working size $world"
    [ -z "$want" ] || is "$(events "$out.events")" "$want" "$name: the event log"
}

scenario one-rank 8 7 "reshard_down 35 8->7 failed=3 spares= attempts=1" --fail 3:40
grep -q 'rank 3: injected failure at step 40 (SIGKILL)' "$tmp/one-rank"
ok $? "one-rank: rank 3 really killed itself at step 40"
grep -q 'resharded at step 35: world 8 -> 7' "$tmp/one-rank"
ok $? "one-rank: the Python handler ran on the new world"
# killed at the same step: they die together (heat2d.py), one recovery
scenario same-step 8 6 "reshard_down 35 8->6 failed=2,5 spares= attempts=1" --fail 2:40 --fail 5:40
scenario in-snapshot 8 7 "reshard_down 35 8->7 failed=3 spares= attempts=1" --fail 3:42:snapshot
scenario spare-takeover 8 7 "reshard_down 35 7->7 failed=3 spares=7 attempts=1" \
    -x ELASTIC_SPARE_RANKS=1 -- --fail 3:40
grep -q 'heat2d: .* 8 ranks (7 working, 1 spares)' "$tmp/spare-takeover"
ok $? "spare-takeover: 7 working ranks and 1 spare"
scenario regrow 8 7 "reshard_down 35 7->6 failed=3 spares= attempts=1
reshard_up 50 6->7 failed= spares=7 attempts=1" \
    -x ELASTIC_SPARE_RANKS=1 -x ELASTIC_SPARE_TAKEOVER=0 -x ELASTIC_RESHARD_CHECK_PERIOD=25 -- --fail 3:40
app_run "$tmp/idle" 4 "${PYRUN[@]}" -x ELASTIC_SPARE_RANKS=1 -- "$PY" "$HEAT_PY" $ARGS
is "$(checksum_of "$tmp/idle")" "$ref" "an idle spare: the failure-free checksum"
grep -q 'spare rank 3 released after' "$tmp/idle"
ok $? "an idle spare: released at the end" || show_failure "$tmp/idle"

# sgd.py: values, an array and a pickled per-rank blob through two failures
SGD=("$PY" "$SGD_PY" --samples 600 --steps 60)
app_run "$tmp/sgd4" 4 "${PYRUN[@]}" -- "${SGD[@]}"
sref=$(checksum_of "$tmp/sgd4")
is "$MPI_RC" 0 "sgd.py at 4 ranks: checksum $sref" || show_failure "$tmp/sgd4"
app_run "$tmp/sgd3" 3 "${PYRUN[@]}" -- "${SGD[@]}"
is "$(checksum_of "$tmp/sgd3")" "$sref" "sgd.py at 3 ranks: the same weights"
app_run "$tmp/sgd-fail" 6 "${PYRUN[@]}" -x ELASTIC_EVENT_LOG="$tmp/sgd.events" -- "${SGD[@]}" --fail 1:20 --fail 4:45
is "$MPI_RC" 0 "sgd.py at 6 ranks, ranks 1 and 4 killed: exit 0" || show_failure "$tmp/sgd-fail"
is "$(checksum_of "$tmp/sgd-fail")" "$sref" "sgd.py with two failures: the failure-free weights"
grep -q '^\[[0-9]*,[0-9]*\]<stdout>: samples visited 36000 (expected 36000)$' "$tmp/sgd-fail"
ok $? "sgd.py: the blobs' counts of visited samples survived both rollbacks" || show_failure "$tmp/sgd-fail"
is "$(events "$tmp/sgd.events" | cut -d' ' -f1,3)" "reshard_down 6->5
reshard_down 5->4" "sgd.py: two in-place recoveries"
done_testing
