#!/bin/bash
# t7002-mpirun-relaunch.sh - the relaunch loop on one host, with the real
# mpirun and real failures: a SIGKILLed rank (mpirun fails, or with ULFM the
# survivors exit 76), then every rank exiting 76; each relaunch must resume
# (ELASTIC_RESUME=1) from the program's newest persisted step and finish with
# the checksum of a clean run.  Then relaunches run out: a clear final error.
. "${srcdir:-.}/mpirun/lib.sh"

app() { echo "$LOOPAPP" --state "$tmp/state.$1" --steps 12 --persist 3 --step-ms 20; }

# a clean run for the reference checksum
em_run "$tmp/clean" 300 --no-wrap --run-dir "$tmp/run.clean" -n 3 $EM_MPI_ARGS $(app clean)
is "$EM_RC" 0 "clean run exits 0" || cat "$tmp/clean" | sed 's/^/# /'
want=$(checksum_of "$tmp/clean")
ok $([ -n "$want" ]; echo $?) "clean run printed its checksum ($want)"
grep -q 'summary: completed (exit 0) after 1 attempt ' "$tmp/clean"
ok $? "clean run: summary says completed after 1 attempt"

# attempt 1: rank 1 SIGKILLed at step 4; attempt 2: all ranks exit 76 at step 8
em_run "$tmp/loop" 300 --no-wrap --run-dir "$tmp/run" -n 3 $EM_MPI_ARGS \
    $(app loop) --fail 1:kill:1:4 --fail 2:exit76:0:8 --log-reshard 3:10
is "$EM_RC" 0 "two failures, two relaunches, then exit 0" || sed 's/^/# /' "$tmp/loop"
is "$(checksum_of "$tmp/loop")" "$want" "the relaunched job ends with the clean run's checksum"
grep -q '^launch 2 resume 1 world 3 from step 3$' "$tmp/loop"
ok $? "attempt 2 ran with ELASTIC_RESUME=1 and resumed from step 3 (its last persisted step)"
grep -q '^launch 3 resume 1 world 3 from step 6$' "$tmp/loop"
ok $? "attempt 3 resumed from step 6"
grep -q 'summary: completed (exit 0) after 3 attempts' "$tmp/loop"
ok $? "summary: completed after 3 attempts"
grep -q 'attempt 2: .*resumed from L3: failed, relaunched (mpirun exit 76) - the ranks exited 76' "$tmp/loop"
ok $? "summary: attempt 2 asked for a relaunch with exit 76"
grep -q 'failures: 1 in place (12.5 ms lost to recovery), 2 relaunches' "$tmp/loop"
ok $? "summary counts the in-place recovery from ELASTIC_EVENT_LOG and the 2 relaunches"
grep -q 'in-place recoveries: 1 (12.5 ms in all): reshard_down at step 10: 4 -> 3 ranks' "$tmp/loop"
ok $? "summary details the reshard event of attempt 3"
grep -Eq 'lost to this failure: [0-9.]+ s' "$tmp/loop"
ok $? "summary reports the time lost to each relaunch"
is "$(sed -n 's/^state=//p' "$tmp/run/state")" completed "run directory state: completed"
ok $([ -s "$tmp/run/attempt-3/events.jsonl" ] && [ -s "$tmp/run/attempt-1/command" ]; echo $?) \
    "per-attempt event log and command recorded"

# relaunches exhausted: attempt 1 and 2 both exit 76, --max-relaunches 1
em_run "$tmp/gone" 300 --no-wrap --max-relaunches 1 --run-dir "$tmp/run.gone" -n 2 $EM_MPI_ARGS \
    $(app gone) --fail 1:exit76:0:2 --fail 2:exit76:0:5
is "$EM_RC" 1 "relaunches exhausted: exit 1"
grep -q 'giving up: 1 relaunch exhausted (--max-relaunches 1); last failure: the ranks exited 76' "$tmp/gone"
ok $? "clear final error naming --max-relaunches and the last failure" || sed 's/^/# /' "$tmp/gone"
grep -q 'final state: failed' "$tmp/gone"
ok $? "summary: final state failed"
grep -q '^launch 2 resume 1 world 2 from step 0$' "$tmp/gone"
ok $? "the single relaunch resumed (nothing persisted yet: step 0)"
is "$(sed -n 's/^state=//p' "$tmp/run.gone/state")" failed "run directory state: failed"

# a rerun of the failed job resumes on its own (the previous run did not complete)
em_run "$tmp/again" 300 --no-wrap --max-relaunches 0 --run-dir "$tmp/run.gone" -n 2 $EM_MPI_ARGS $(app gone)
is "$EM_RC" 0 "rerunning the failed job completes"
grep -q '^launch 3 resume 1 world 2 from step 3$' "$tmp/again"
ok $? "the rerun resumed from the newest persisted step" || sed 's/^/# /' "$tmp/again"
grep -q 'attempt 3: ' "$tmp/again"
ok $? "attempt numbers continue across reruns of the same run directory"
done_testing
