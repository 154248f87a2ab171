#!/bin/bash
# t5018-exec-recovery-timeout.sh - a recovery that cannot end is ended by
# ELASTIC_RECOVERY_TIMEOUT: the ranks exit 76 and the group restarts from L3
#
# Open MPI's agreement and shrink can block for ever after a failure
# (doc/reliability.md); no MPI call can be interrupted, so libelastic's
# recovery watch ends a process whose recovery has not ended within
# ELASTIC_RECOVERY_TIMEOUT seconds with exit 76 (relaunch).  Here the hang
# is made for real: heat2d's rank 2 SIGKILLs itself at step 20, and rank 1
# stops itself (SIGSTOP, `--fail 1:18:stall`) inside the recovery, after
# the shrink, so that the survivors wait for it in the exchange of the
# state.  Under `elastic-exec --nproc-per-node 4 --max-restarts 1` the
# survivors exit 76 after the limit, the agent stops the group (the
# stopped rank included: it is continued after SIGTERM, and ends as well)
# and restarts it, which resumes from the L3 snapshot of step 20 to the
# failure-free checksum.  Without --max-restarts elastic-exec ends with 76
# itself.  Under elastic-mpirun the attempt is relaunched from L3 and the
# summary says why.  A bad ELASTIC_RECOVERY_TIMEOUT is refused by name.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] || skip_all "the examples are not built"

heat=("$HEAT2D" --nx 64 --ny 64 --steps 60)
# rank 1 may still be at step 19 when its neighbour dies at 20: armed from 18
stall="--fail 2:20 --fail 1:18:stall"

ep_start ref 4 -- "${heat[@]}"
ep_wait 180
ref=$(ep_checksum)
is "$EP_RC" 0 "reference run: exit 0 (checksum $ref)" || diag "$(ep_err)"

# stalled NAME: the environment of a run whose recovery stalls
stalled_env() {
    export ELASTIC_RECOVERY_TIMEOUT=3 ELASTIC_PERSIST_PERIOD=10 ELASTIC_PERSIST_BACKGROUND=0
    export ELASTIC_SNAPSHOT_DIR=$ep_root/snap-$1
    mkdir -p "$ELASTIC_SNAPSHOT_DIR"
}

stalled_env restart
t0=$(now_ms)
ep_start restart 4 --max-restarts 1 -- "$FIRST" "$stall" "${heat[@]}"
ep_wait 180
t1=$(now_ms)
is "$EP_RC" 0 "a stalled recovery, one restart allowed: exit 0" || diag "$(ep_err)"
is "$(ep_checksum)" "$ref" "the failure-free checksum" || diag "$(ep_out)"
grep -q '^resumed from step 20 ' "$ep_dir/out"
ok $? "the restarted group resumed from the L3 snapshot of step 20" || diag "$(ep_out)"
n=$(grep -c 'error: in-place recovery did not end within 3 s (ELASTIC_RECOVERY_TIMEOUT): stuck in its drain and exchange of the state; exiting with 76' "$ep_dir/err")
ok $([ "$n" -ge 2 ]; echo $?) "the survivors said where their recovery was stuck ($n ranks)" || diag "$(ep_err)"
ok $([ "$(ep_ev worker_exit attempt=0 exitcode=76)" -ge 2 ]; echo $?) "they exited 76 (worker_exit events)" || diag "$(ep_log)"
is "$(ep_ev restart)/$(ep_get shutdown restarts)" "1/1" "the group restarted once"
is "$(ep_ev kill)" 0 "no worker had to be SIGKILLed at the stop timeout (the stopped one was continued)" || diag "$(ep_err)"
diag "a stalled recovery to the end of the restarted run: $((t1 - t0)) ms"
ep_check_clean "stalled, restarted"

# the library's own event line, in the ranks' event log
stalled_env events
export ELASTIC_EVENT_LOG=$ep_root/rank-events
ep_start events 4 -- "${heat[@]}" $stall
ep_wait 180
unset ELASTIC_EVENT_LOG
is "$EP_RC" 76 "no restart allowed: elastic-exec exits 76 (a relaunch is needed)" || diag "$(ep_err)"
# (the step a survivor was at when rank 2 died: 18 to 20, by its distance)
n=$(grep -cE '"event":"recovery_timeout","step":(18|19|20),.*"error":"in-place recovery did not end within 3 s' "$ep_root/rank-events")
ok $([ "$n" -ge 2 ]; echo $?) "each survivor's recovery_timeout event, at steps 18-20 ($n lines)" || diag "$(cat "$ep_root/rank-events")"
is "$(ep_checksum)" "" "no result is claimed"
ep_check_clean "stalled, no restart"

# under elastic-mpirun (each rank wrapped by elastic-exec): the attempt is
# relaunched from L3, and its line in the summary quotes the library
EMR=${top_builddir:-..}/src/mpirun/elastic-mpirun
if [ -x "$EMR" ]; then
    stalled_env mpirun
    d=$ep_root/emr
    mkdir -p "$d"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TMPDIR=$d \
        "$EMR" -n 4 --run-dir "$d/run" -- /bin/sh -c \
        'if [ "${ELASTIC_ATTEMPT:-1}" = 1 ]; then exec "$0" "$@" --fail 2:20 --fail 1:18:stall; fi; exec "$0" "$@"' \
        "${heat[@]}" > "$d/out" 2> "$d/err" &
    pid=$!
    if wait_for_exit "$pid" 180; then
        wait "$pid"
        rc=$?
    else
        kill -KILL "$pid"
        rc=124
    fi
    is "$rc" 0 "elastic-mpirun: a stalled recovery, relaunched: exit 0" || diag "$(tail -n 30 "$d/err")"
    is "$(sed -n 's/^checksum \([0-9a-f]*\)$/\1/p' "$d/out" | tail -n 1)" "$ref" "elastic-mpirun: the failure-free checksum"
    grep -q 'attempt 1: .*failed, relaunched (mpirun exit 76).*library: in-place recovery did not end within 3 s (ELASTIC_RECOVERY_TIMEOUT): stuck in its drain and exchange of the state' "$d/err"
    ok $? "elastic-mpirun: the summary says the recovery did not end, and where" || diag "$(grep -A8 'summary:' "$d/err")"
    grep -q 'attempt 2: .*resumed from L3: completed' "$d/err"
    ok $? "elastic-mpirun: attempt 2 resumed from L3 and completed" || diag "$(grep -A8 'summary:' "$d/err")"
else
    for i in 1 2 3 4; do skip "elastic-mpirun is not built"; done
fi

# a bad value is refused on every rank; 0 (no limit) is accepted
unset ELASTIC_RECOVERY_TIMEOUT
for bad in abc -1 5s; do
    ELASTIC_RECOVERY_TIMEOUT=$bad ep_start "bad$bad" 2 -- "${heat[@]}"
    ep_wait 120
    ok $([ "$EP_RC" != 0 ]; echo $?) "ELASTIC_RECOVERY_TIMEOUT=$bad: the job fails (exit $EP_RC)"
    grep -q "ELASTIC_RECOVERY_TIMEOUT: '$bad' is invalid (expected a number of seconds >= 0; 0: no limit)" "$ep_dir/out" "$ep_dir/err"
    ok $? "ELASTIC_RECOVERY_TIMEOUT=$bad: the message names the value" || diag "$(ep_err)" "$(ep_out)"
done
ELASTIC_RECOVERY_TIMEOUT=0 ep_start zero 2 -- "${heat[@]}"
ep_wait 120
is "$EP_RC" 0 "ELASTIC_RECOVERY_TIMEOUT=0 (no limit) is accepted" || diag "$(ep_err)"
is "$(ep_checksum)" "$ref" "ELASTIC_RECOVERY_TIMEOUT=0: the failure-free checksum"
ep_check_clean "bad values"

done_testing
