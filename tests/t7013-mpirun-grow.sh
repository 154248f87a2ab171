#!/bin/bash
# t7013-mpirun-grow.sh - elastic-mpirun grows a job back into new processes
# after losing ranks in place (issue #15's mpirun path)
#
# elastic-mpirun hands the ranks the slots of its host list
# (ELASTIC_GROW_SLOTS: -n here, one host); libelastic's room is those slots
# less the processes of the world, so after two ranks are SIGKILLed (heat2d's
# --fail: the rank kills itself, a real process gone) the survivors recover
# in place at 6 and, at the next check, MPI_Comm_spawn two new processes
# (PRRTE places them in the freed slots of the host where the ranks died)
# and grow back to 8: the failure-free checksum, 10 processes with 10 pids
# in all, the summary naming one in-place recovery and one growth, the event
# log ending with libelastic's "completed".  A new process that dies in its
# join: the growth fails (or goes on without it) and a later one succeeds;
# mpirun itself exits 0 (elastic-mpirun makes PRRTE's jobs recoverable by
# default: --with-ft ulfm alone covers only the job mpirun starts, and a
# spawned job's dead process then took the job down or hung it).
# grow_policy never stays at 6; a bad ELASTIC_GROW_SLOTS is named.
. "${srcdir:-.}/lib/tap.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM: nothing recovers in place"
heat2d=${top_builddir:-..}/examples/heat2d
empirun=${top_builddir:-..}/src/mpirun/elastic-mpirun
exec_bin=${top_builddir:-..}/src/exec/elastic-exec
[ -x "$heat2d" ] && [ -x "$exec_bin" ] || skip_all "heat2d or elastic-exec not built"
tmp=$(mktemp -d)
trap 'pkill -KILL -f "$tmp/" 2>/dev/null; rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# a check at every 5th step, the room agreed at every step: the growth
# comes at the first check after the loss
export ELASTIC_SNAPSHOT_PERIOD=7 ELASTIC_RESHARD_CHECK_PERIOD=5 ELASTIC_SIGNAL_CHECK_PERIOD=1
app=("$heat2d" --nx 96 --ny 80 --steps 200)
checksum_of() { tr -d '\0' < "$1" | grep -a -o 'checksum [0-9a-f]*' | tail -n 1 | cut -d' ' -f2; }
events() { cat "$tmp/$1.run"/*/attempt-1/events.jsonl "$tmp/$1.run"/attempt-1/events.jsonl 2> /dev/null; }
nev() { events "$1" | grep -c "\"event\":\"$2\""; }

ELASTIC_SNAPSHOT_DIR=$tmp/ref timeout 300 "$empirun" -q --run-dir "$tmp/ref.run" \
    --exec "$exec_bin" -n 8 "${app[@]}" > "$tmp/ref.out" 2>&1
ok $? "failure-free run of 8 ranks under elastic-mpirun"
ref=$(checksum_of "$tmp/ref.out")

# run NAME [ENV=V...] -- HEAT2D ARGS: elastic-mpirun -n 8 heat2d ARGS
run() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    env "${envs[@]}" ELASTIC_SNAPSHOT_DIR="$tmp/$name.snap" timeout 300 "$empirun" \
        --run-dir "$tmp/$name.run" --exec "$exec_bin" -n 8 "${app[@]}" "$@" \
        > "$tmp/$name.out" 2> "$tmp/$name.err"
    echo $? > "$tmp/$name.rc"
}

# 1. two ranks die at step 40: 8 -> 6 in place, then 6 -> 8 with new processes
run back ELASTIC_GROW_MIN_BATCH=2 -- --fail 3:40 --fail 5:40
is "$(cat "$tmp/back.rc")" 0 "back: exit 0" || diag "$(tail -n 30 "$tmp/back.err")"
is "$(checksum_of "$tmp/back.out")" "$ref" "back: the failure-free checksum"
grep -q '^resharded at step [0-9]*: world 8 -> 6$' "$tmp/back.out"
ok $? "back: the survivors recovered in place at 6 ranks" || diag "$(cat "$tmp/back.out")"
grep -q '^resharded at step [0-9]*: world 6 -> 8$' "$tmp/back.out"
ok $? "back: and grew back to 8" || diag "$(cat "$tmp/back.out")"
events back | grep '"event":"reshard_up"' | grep -q '"old_size":6,"new_size":8,.*"new_ranks":\[8,9\]'
ok $? "back: reshard_up 6 -> 8 with new ranks 8 and 9 and its phases" ||
    diag "$(events back | grep reshard)"
events back | grep '"event":"reshard_up"' | grep -q '"t_spawn_ms":[0-9.]*,"t_merge_ms":'
ok $? "back: the event has the spawn and merge times"
is "$(events back | grep '"event":"rank_loaded"' | grep -o '"pid":[0-9]*' | sort -u | wc -l)" 10 \
    "back: 10 processes with 10 different pids (8 started, 2 grown)"
grep -q '^final world 8,' "$tmp/back.out"
ok $? "back: the job ended at 8 ranks"
grep -q 'in-place recoveries: 1 .*; growths into new processes: 1 ' "$tmp/back.err"
ok $? "back: the summary names one in-place recovery and one growth" ||
    diag "$(grep -A8 'summary:' "$tmp/back.err")"
grep -q '^  failures: 1 in place' "$tmp/back.err"
ok $? "back: one failure, not two (a growth is none)"
events back | grep -q '"event":"completed","step":199,"world_size":8,'
ok $? "back: the event log ends with the job's own word: completed at step 199, 8 ranks" ||
    diag "$(events back | tail -n 2)"
grep -q "ELASTIC_GROW_SLOTS" "$tmp/back.run/attempt-1/command"
ok $? "back: mpirun forwards ELASTIC_GROW_SLOTS to the ranks" ||
    diag "$(cat "$tmp/back.run/attempt-1/command")"

# 2. the first new process dies in its join (the library's test hook): the
# growth is rolled back; a later one takes the job back to 8
run joindies ELASTIC_GROW_MIN_BATCH=2 ELASTIC_TEST_KILL=8:0:join -- --fail 3:40 --fail 5:40
is "$(cat "$tmp/joindies.rc")" 0 "join-dies: exit 0" || diag "$(tail -n 30 "$tmp/joindies.err")"
is "$(checksum_of "$tmp/joindies.out")" "$ref" "join-dies: the failure-free checksum"
{ events joindies | grep '"event":"grow_failed"' | grep -q '"new_ranks":\[8,9\]' ||
    events joindies | grep '"event":"reshard_up"' | grep '"new_ranks":\[8,9\]' |
    grep -q '"failed":\[8\]'; } &&
    events joindies | grep '"event":"reshard_up"' | grep -q '"new_size":8'
ok $? "join-dies: rank 8 was never taken in; the job grew back to 8 all the same" ||
    diag "$(events joindies | grep 'grow\|reshard')"
grep -q 'attempt 1: .*: completed (mpirun exit 0)' "$tmp/joindies.err"
ok $? "join-dies: mpirun itself exited 0 (the spawned job was recoverable)" ||
    diag "$(grep 'attempt 1' "$tmp/joindies.err")"
grep -q '^final world 8,' "$tmp/joindies.out"
ok $? "join-dies: the job ended at 8 ranks" || diag "$(tail -n 5 "$tmp/joindies.out")"

# 3. grow_policy never: the job stays at 6
run never ELASTIC_GROW_POLICY=never -- --fail 3:40 --fail 5:40
is "$(cat "$tmp/never.rc")" 0 "never: exit 0"
is "$(checksum_of "$tmp/never.out")" "$ref" "never: the failure-free checksum"
grep -q '^final world 6,' "$tmp/never.out"
ok $? "never: the job ended at 6 ranks" || diag "$(tail -n 5 "$tmp/never.out")"
is "$(nev never reshard_up)" 0 "never: no growth"

# 4. a bad ELASTIC_GROW_SLOTS is named and ignored, nothing grows
run badslots ELASTIC_GROW_SLOTS=lots -- --fail 3:40
is "$(cat "$tmp/badslots.rc")" 0 "bad slots: exit 0"
grep -q "ELASTIC_GROW_SLOTS='lots' is not a number of slots" "$tmp/badslots.err"
ok $? "bad slots: the ranks say what is wrong with ELASTIC_GROW_SLOTS" ||
    diag "$(grep -i slots "$tmp/badslots.err" | head -n 3)"
grep -q '^final world 7,' "$tmp/badslots.out"
ok $? "bad slots: the job ended at 7 ranks (no room reported)"

done_testing
