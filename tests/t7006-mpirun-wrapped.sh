#!/bin/bash
# t7006-mpirun-wrapped.sh - ranks under elastic-exec (the default): the
# wrapper's events (worker_start with each rank's host, worker_exit with the
# signal that killed a rank) reach ELASTIC_EVENT_LOG and name the failed
# rank and host; exit 76 and preemption pass through the wrapper.
. "${srcdir:-.}/mpirun/lib.sh"

EXEC=$(cd "${top_builddir:-..}/src/exec" 2> /dev/null && pwd)/elastic-exec
[ -x "$EXEC" ] || skip_all "elastic-exec is not built (src/exec/elastic-exec): the wrapped path cannot run"
host=$(hostname)
host=${host%%.*}

app() { echo "$LOOPAPP" --state "$tmp/state.$1" --steps 12 --persist 3 --step-ms 20; }

em_run "$tmp/clean" 300 --no-wrap --run-dir "$tmp/run.clean" -n 3 $EM_MPI_ARGS $(app clean)
want=$(checksum_of "$tmp/clean")
ok $([ "$EM_RC" = 0 ] && [ -n "$want" ]; echo $?) "clean run: checksum $want"

# every rank exits 76 in attempt 1: the wrapper passes the code on
em_run "$tmp/w76" 300 --exec "$EXEC" --run-dir "$tmp/run.76" -n 3 $EM_MPI_ARGS $(app w76) --fail 1:exit76:0:4
is "$EM_RC" 0 "wrapped: exit 76, relaunch, completion" || sed 's/^/# /' "$tmp/w76"
is "$(checksum_of "$tmp/w76")" "$want" "wrapped: the clean checksum"
grep -q -- "$EXEC -- $LOOPAPP" "$tmp/run.76/attempt-1/command"
ok $? "each rank ran under elastic-exec"
n=$(grep -c '"event":"worker_start".*"host":"'"$host" "$tmp/run.76/attempt-1/events.jsonl")
is "$n" 3 "elastic-exec recorded each rank's host in the job's event log"
grep -q 'ranks under elastic-exec' "$tmp/w76"
ok $? "the summary says the ranks ran under elastic-exec"

# a rank SIGKILLed under the wrapper, relaunch-only: the event log names
# the rank, its host and the signal (mpirun itself sees only an exit code)
em_run "$tmp/wkill" 300 --ulfm no --exec "$EXEC" --run-dir "$tmp/run.kill" -n 3 $EM_MPI_ARGS \
    $(app wkill) --fail 1:kill:1:4
is "$EM_RC" 0 "wrapped, relaunch-only: killed rank, relaunch, completion" || sed 's/^/# /' "$tmp/wkill"
is "$(checksum_of "$tmp/wkill")" "$want" "wrapped, relaunch-only: the clean checksum"
grep -q "attempt 1: .* - rank 1 on $host[^ ]* killed by signal 9" "$tmp/wkill"
ok $? "the failure is attributed to rank 1 on $host, signal 9, from elastic-exec's worker_exit" ||
    grep 'attempt 1' "$tmp/wkill" | sed 's/^/# /'

# preemption through mpirun and the wrapper
cmd=(--exec "$EXEC" --run-dir "$tmp/run.pre" -n 3 $EM_MPI_ARGS
    "$LOOPAPP" --state "$tmp/state.pre" --steps 12 --persist 3 --step-ms 200)
em_start "$tmp/pre" "${cmd[@]}"
wait_for_grep '^persisted 3$' "$tmp/pre" 120
ok $? "wrapped job running"
kill -TERM "$em_pid"
em_wait 180
is "$EM_RC" 75 "wrapped: SIGTERM -> the ranks suspend -> exit 75" || sed 's/^/# /' "$tmp/pre"
step=$(sed -n 's/^suspended at step \([0-9]*\)$/\1/p' "$tmp/pre")
em_run "$tmp/pre2" 300 "${cmd[@]}"
is "$EM_RC" 0 "wrapped: the rerun completes"
grep -q "^launch 2 resume 1 world 3 from step $step\$" "$tmp/pre2"
ok $? "wrapped: the rerun resumed from step $step"
is "$(checksum_of "$tmp/pre2")" "$want" "wrapped: suspended + resumed gives the clean checksum"
done_testing
