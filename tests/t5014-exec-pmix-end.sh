#!/bin/bash
# t5014-exec-pmix-end.sh - the end of a job under `elastic-exec
# --nproc-per-node 8`: what a death after the last step means
#
# libelastic reports the end of the work through the heartbeat
# (elastic_progress_end, called by elastic_manager_destroy once the ranks
# agreed on the end).  A rank killed after that, inside MPI_Finalize (a
# real SIGKILL: heat2d's --fail RANK:STEP:finalize), or a rank that exits 0
# without MPI_Finalize after it (libelastic's guard when an L3 write was cut
# by a failure) has finished: the job succeeds with the failure-free
# checksum and says what it lost.  Each window runs several times, with
# other ranks; a death before the end is still a loss or a failure
# (t5011).  A preemption is an end too: every rank that suspended counts
# as suspended (libelastic gives the job's exit code 75 to working rank 0
# alone and marks the others' heartbeats).  Nothing may be left behind.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] || skip_all "the examples are not built"

heat=("$HEAT2D" --nx 64 --ny 64 --steps 60)

ep_start ref 8 -- "${heat[@]}"
ep_wait 180
ref=$(ep_checksum)
is "$EP_RC" 0 "reference run: exit 0 (checksum $ref)" || diag "$(ep_err)"

# finished NAME ENDED LOST ARGS...: exit 0 with the reference checksum; the
# ranks in ENDED ended after their end, those in LOST were lost in place
finished() {
    local name=$1 ended=$2 lost=$3 r
    shift 3
    ep_start "$name" 8 -- "${heat[@]}" "$@"
    ep_wait 180
    is "$EP_RC" 0 "$name: exit 0" || diag "$(ep_err)"
    is "$(ep_checksum)" "$ref" "$name: the failure-free checksum" || diag "$(ep_out)"
    is "$(ep_get shutdown state)" SUCCEEDED "$name: the group SUCCEEDED"
    for r in $ended; do
        is "$(ep_ev worker_exit rank="$r" state=SUCCEEDED after_end=True)" 1 \
            "$name: rank $r ended after its end, counted as finished"
    done
    is "$(ep_ev worker_exit after_end=True)/$(ep_ev rank_lost)/$(ep_ev restart)" \
        "$(echo $ended | wc -w)/$(echo $lost | wc -w)/0" \
        "$name: no other rank ended so, $(echo $lost | wc -w) lost in place, no restart"
    grep -q "worker group 'default' SUCCEEDED: 8 ranks, $(echo $lost | wc -w) lost and recovered in place.*, $(echo $ended | wc -w) ended after finishing its work" \
        "$ep_dir/err"
    ok $? "$name: the summary line says what was lost" || diag "$(ep_err)"
    ep_check_clean "$name"
}

# 1. killed inside MPI_Finalize, after the end: rank 3, rank 0 (it printed
#    the checksum), rank 7; three at once; after a recovery in place
finished finalize-3 "3" "" --fail 3:0:finalize
finished finalize-0 "0" "" --fail 0:0:finalize
finished finalize-7 "7" "" --fail 7:0:finalize
finished finalize-three "1 4 6" "" --fail 1:0:finalize --fail 4:0:finalize --fail 6:0:finalize
finished lost-then-finalize "5" "2" --fail 2:20 --fail 5:0:finalize
grep -q "warn: rank 3 (local rank 3, pid [0-9]*) ended by SIGKILL after it had finished its work" \
    "$ep_root"/*-finalize-3/err
ok $? "the agent says on stderr what happened to rank 3"

# 2. an L3 write cut by a failure: the survivors leave MPI_Finalize with
#    exit 0 before HDF5 shuts down (libelastic's guard), after their end
#    (the synchronous write, ELASTIC_PERSIST_BACKGROUND=0: the background
#    one makes no MPI-IO call that a failure could cut)
for victim in 2 6; do
    name=l3-cut-$victim
    ELASTIC_LOG=info ELASTIC_PERSIST_BACKGROUND=0 ep_start "$name" 8 -- "${heat[@]}" --persist-period 20 --snapshot-dir "$ep_root/snap-$victim" \
        --fail "$victim:40:persist"
    ep_wait 180
    is "$EP_RC" 0 "$name: exit 0" || diag "$(ep_err)"
    is "$(ep_checksum)" "$ref" "$name: the failure-free checksum" || diag "$(ep_out)"
    is "$(ep_ev rank_lost rank=$victim)/$(ep_ev rank_lost)" "1/1" "$name: rank $victim lost in place, no other"
    guarded=$(grep -c "MPI_Finalize after an L3 I/O interrupted by a process failure" "$ep_dir/err")
    ok $([ "$guarded" -ge 1 ]; echo $?) "$name: the guard ended $guarded survivors without MPI_Finalize"
    is "$(ep_ev worker_exit after_end=True)" "$guarded" \
        "$name: each of the $guarded ranks the guard ended is counted as finished"
    is "$(ep_get shutdown state)" SUCCEEDED "$name: the group SUCCEEDED"
    ep_check_clean "$name"
done

# 3. a preemption: every rank suspended (exit 75 from rank 0, 0 from the
#    others, all marked in their heartbeats), and the rerun at 6 ranks
#    resumes to the failure-free checksum
long=("$HEAT2D" --nx 64 --ny 64 --steps 3000 --progress 100)
ep_start long-ref 8 -- "${long[@]}"
ep_wait 180
long_ref=$(ep_checksum)
is "$EP_RC" 0 "long reference run: exit 0 (checksum $long_ref)" || diag "$(ep_err)"
snap=$ep_root/snap-suspend
ep_start suspend 8 --run-id "t$$-suspend" -- "${long[@]}" --sleep 1 --snapshot-dir "$snap"
if wait_for_grep '^step 300$' "$ep_dir/out" 120; then
    kill -TERM "$ep_pid"
fi
ep_wait 120
is "$EP_RC" 75 "suspend: exit 75" || diag "$(ep_err)"
is "$(ep_get suspended suspended)/$(ep_get suspended workers)" 8/8 "suspend: all 8 workers suspended"
is "$(ep_ev worker_exit exitcode=75)/$(ep_ev worker_exit exitcode=0 state=STOPPED)" 1/7 \
    "suspend: rank 0 exited 75, the 7 others 0, all suspended"
ok $(! grep -q "workers suspended (exit 75); the others were stopped" "$ep_dir/err"; echo $?) \
    "suspend: no rank is said to have been stopped"
ep_check_clean "suspend"
ELASTIC_RESUME=1 ep_start resume 6 --run-id "t$$-suspend" -- "${long[@]}" --snapshot-dir "$snap"
ep_wait 180
is "$EP_RC" 0 "resume at 6 ranks: exit 0" || diag "$(ep_err)"
grep -q '^resumed from step' "$ep_dir/out"
ok $? "resume at 6 ranks: it resumed" || diag "$(ep_out)"
is "$(ep_checksum)" "$long_ref" "resume at 6 ranks: the failure-free checksum"
ep_check_clean "resume"

# 4. a preemption after the end: rank 5 stops itself inside MPI_Finalize
#    (the work is done, rank 0 printed the checksum; its peers wait for it
#    in MPI_Finalize), then SIGTERM.  Nothing is left to save: the job
#    completed, exit 0 (the campaign saw such a late SIGTERM under
#    elastic-mpirun end "0 of 1 workers suspended", 75 from every wrapper)
ELASTIC_TEST_KILL=5:0:finalize:STOP ep_start late-term 8 -- "${heat[@]}"
stopped() { p=$(ep_rank_pid 5) && [ -n "$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2> /dev/null)" = T ]; }
wait_for_grep '^checksum ' "$ep_dir/out" 180 && wait_until 60 stopped && kill -TERM "$ep_pid"
ok $? "late-term: SIGTERM once rank 5 is stopped inside MPI_Finalize"
ep_wait 120
is "$EP_RC" 0 "late-term: exit 0 (the work was done)" || diag "$(ep_err)"
is "$(ep_checksum)" "$ref" "late-term: the failure-free checksum"
is "$(ep_ev worker_exit state=SUCCEEDED)/$(ep_ev worker_exit rank=5 after_end=True)" 8/1 \
    "late-term: all 8 ranks counted as finished, rank 5 ended after its end"
is "$(ep_get shutdown state)/$(ep_get suspended finished)" SUCCEEDED/True \
    "late-term: the group SUCCEEDED, nothing suspended"
grep -q "warn: every worker had finished its work before the preemption notice: nothing to suspend" \
    "$ep_dir/err"
ok $? "late-term: the agent says why it exits 0" || diag "$(ep_err)"
ep_check_clean "late-term"

done_testing
