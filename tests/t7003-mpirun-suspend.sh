#!/bin/bash
# t7003-mpirun-suspend.sh - preemption: SIGTERM (then SIGUSR1) to
# elastic-mpirun reaches the ranks through mpirun, they persist their state
# and exit 75, elastic-mpirun exits 75, and rerunning the same command
# resumes (ELASTIC_RESUME=1) and finishes with a clean run's checksum.
. "${srcdir:-.}/mpirun/lib.sh"

# the reference checksum (timing does not change it)
em_run "$tmp/clean" 300 --no-wrap --run-dir "$tmp/run.clean" -n 3 $EM_MPI_ARGS \
    "$LOOPAPP" --state "$tmp/state.clean" --steps 300 --persist 10 --step-ms 0
want=$(checksum_of "$tmp/clean")
ok $([ "$EM_RC" = 0 ] && [ -n "$want" ]; echo $?) "clean run: exit 0, checksum $want"

for sig in TERM USR1; do
    cmd=(--no-wrap --run-dir "$tmp/run.$sig" -n 3 $EM_MPI_ARGS
        "$LOOPAPP" --state "$tmp/state.$sig" --steps 300 --persist 10 --step-ms 25)
    em_start "$tmp/out.$sig" "${cmd[@]}"
    wait_for_grep '^persisted 20$' "$tmp/out.$sig" 120
    ok $? "SIG$sig: the job is running (step 20 persisted)"
    kill -s "$sig" "$em_pid"
    em_wait 180
    is "$EM_RC" 75 "SIG$sig: elastic-mpirun exits 75 (suspended)" || sed 's/^/# /' "$tmp/out.$sig"
    step=$(sed -n 's/^suspended at step \([0-9]*\)$/\1/p' "$tmp/out.$sig")
    ok $([ -n "$step" ] && [ "$step" -ge 20 ] && [ "$step" -lt 300 ]; echo $?) \
        "SIG$sig: the ranks suspended mid-run, at step $step"
    grep -q 'asking the ranks to suspend to a snapshot (SIGUSR1 through mpirun)' "$tmp/out.$sig"
    ok $? "SIG$sig: the notice went to the ranks through mpirun"
    grep -q 'final state: suspended - the ranks suspended to an L3 snapshot; rerun the same command to resume' "$tmp/out.$sig"
    ok $? "SIG$sig: the summary says suspended and how to resume"
    is "$(sed -n 's/^state=//p' "$tmp/run.$sig/state")" suspended "SIG$sig: run directory state: suspended"

    # the same command again resumes and completes
    em_run "$tmp/again.$sig" 300 "${cmd[@]}"
    is "$EM_RC" 0 "SIG$sig: rerunning the same command completes" || sed 's/^/# /' "$tmp/again.$sig"
    grep -q "^launch 2 resume 1 world 3 from step $step\$" "$tmp/again.$sig"
    ok $? "SIG$sig: the rerun resumed from step $step with ELASTIC_RESUME=1"
    grep -q 'resuming from the newest L3 snapshot' "$tmp/again.$sig"
    ok $? "SIG$sig: elastic-mpirun said why it resumes"
    is "$(checksum_of "$tmp/again.$sig")" "$want" "SIG$sig: suspended + resumed gives the clean checksum"
done

# a completed run is not resumed by the next one
em_run "$tmp/fresh" 300 --no-wrap --run-dir "$tmp/run.TERM" -n 3 $EM_MPI_ARGS \
    "$LOOPAPP" --state "$tmp/state.TERM" --steps 5 --persist 5 --step-ms 0
grep -q '^launch 3 resume 0 world 3 from step 0$' "$tmp/fresh"
ok $? "after a completed run, the next one starts fresh (no ELASTIC_RESUME)"
done_testing
