#!/bin/bash
# t5012-exec-pmix-init-abort.sh - under `elastic-exec --nproc-per-node N`: a rank
# killed inside MPI_Init, MPI_Abort, and the group restart policy
#
# A rank that dies before every rank finished MPI_Init cannot be recovered
# in place (the others wait in an init fence): elastic-exec sees it at once
# and restarts the group in a new namespace, within --max-restarts.
# --init-timeout restarts a group whose MPI_Init never ends.  MPI_Abort ends
# the job with its code in the exit status and the report, and no restart.
# With --restart-policy group a death after MPI_Init restarts every rank
# (torchelastic's way; from libelastic's last HDF5 snapshot when it
# persists them, else from scratch) and the result is the same.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] && [ -x "$SGD" ] || skip_all "the examples are not built"
INIT_KILL=${srcdir:-.}/pmix/init-kill.sh

heat=("$HEAT2D" --nx 64 --ny 64 --steps 60)
ep_start heat-ref 8 -- "${heat[@]}"
ep_wait 180
heat_ref=$(ep_checksum)
is "$EP_RC" 0 "heat2d reference run: exit 0 (checksum $heat_ref)" || diag "$(ep_err)"

# 1. heat2d, 8 ranks: rank 5 killed inside MPI_Init; the group restarts
ep_start init-kill 8 --max-restarts 1 -- "$INIT_KILL" 5 "$ep_root/go.1" "${heat[@]}"
ep_wait 180
is "$EP_RC" 0 "killed in MPI_Init: the restarted group succeeded" || diag "$(ep_err)"
is "$(ep_checksum)" "$heat_ref" "killed in MPI_Init: the failure-free checksum"
grep -q 'init-kill: rank 5 killed inside MPI_Init' "$ep_dir/err"
ok $? "killed in MPI_Init: rank 5's program was killed after it entered MPI_Init" || diag "$(ep_err)"
is "$(ep_ev mpi_init_failed rank=5 in_mpi_init=True)" 1 "killed in MPI_Init: seen as a death inside MPI_Init"
is "$(ep_ev rank_lost)/$(ep_ev restart)/$(ep_get restarted ok)" "0/1/True" \
    "killed in MPI_Init: no in-place recovery, one group restart"
grep -q 'inside MPI_Init, before every rank had finished it: no in-place recovery' "$ep_dir/ev"
ok $? "killed in MPI_Init: the failure says why the group restarts"
is "$(ep_get pmix_job nspace 1 | sed 's/.*\.//')/$(ep_get pmix_job_end initialized 0)" "1/False" \
    "killed in MPI_Init: attempt 1 in a new namespace; attempt 0 never finished MPI_Init"
diag "restart after the death in MPI_Init: $(ep_get restarted failure_to_start_ms) ms to the new start"
ep_check_clean "killed in MPI_Init"

# 2. ... with no restart left the job fails at once (no hang in the fence)
ep_start init-kill-final 4 -- "$INIT_KILL" 2 "$ep_root/go.2" "$FT_APP"
ep_wait 120
is "$EP_RC" 137 "killed in MPI_Init, no restart left: exit 128+9, no hang" || diag "$(ep_err)"
grep -q "message   : Signal 9 (SIGKILL) received by PID [0-9]*; inside MPI_Init" "$ep_dir/err"
ok $? "killed in MPI_Init, no restart left: the report says where" || diag "$(ep_err)"
ep_check_clean "killed in MPI_Init, no restart left"

# 3. a rank that dies before MPI_Init while the others wait in it
ep_start before-init 4 --max-restarts 1 -- "$FT_APP" -b 1
ep_wait 120
is "$EP_RC" 0 "dead before MPI_Init: the restarted group succeeded" || diag "$(ep_err)"
is "$(ep_ev rank_lost)/$(ep_ev restart)" "0/1" "dead before MPI_Init: a group restart"
grep -q '^ft-app: ok size 4 -> 4' "$ep_dir/out"
ok $? "dead before MPI_Init: the second attempt ran" || diag "$(ep_out)"
ep_check_clean "dead before MPI_Init"

# 4. MPI_Init that never ends: --init-timeout
ep_start init-timeout 2 --init-timeout 1 -- sleep 300
ep_wait 60
is "$EP_RC" 137 "--init-timeout 1: the group failed (a rank was killed)" || diag "$(ep_err)"
is "$(ep_ev watchdog_fire kind=mpi_init)" 1 "--init-timeout 1: fired once"
grep -q 'MPI_Init did not finish within 1 s (0 of 2 ranks had entered it)' "$ep_dir/err"
ok $? "--init-timeout 1: the report says so" || diag "$(ep_err)"
ep_check_clean "--init-timeout"

# 5. MPI_Abort: every rank killed, the abort's code, no restart, nobody told
# of a failure (the others sit in MPI_Barrier and would print "error")
ep_start abort 8 --max-restarts 2 -- "$FT_APP" -a 3:7
ep_wait 120
is "$EP_RC" 7 "MPI_Abort: exit status is the abort's code" || diag "$(ep_err)"
is "$(ep_ev job_abort rank=3 code=7)/$(ep_ev restart)" "1/0" "MPI_Abort: one abort, no restart"
sed -n '/^Root Cause/,/^=====/p' "$ep_dir/err" > "$ep_dir/report"
grep -q 'rank      : 3 (local_rank: 3)' "$ep_dir/report" && grep -q 'exitcode  : 7 ' "$ep_dir/report" &&
    grep -q 'message   : MPI_Abort with code 7' "$ep_dir/report"
ok $? "MPI_Abort: the report names rank 3, code 7 and MPI_Abort" || diag "$(ep_err)"
is "$(ep_ev worker_exit state=STOPPED)" 7 "MPI_Abort: the 7 other ranks were stopped"
is "$(grep -c '^error ' "$ep_dir/out")/$(ep_get pmix_job_end failed)" "0/0" "MPI_Abort: no rank was sent a failure event"
ep_check_clean "MPI_Abort"

# 6. --restart-policy group: heat2d and sgd restart every rank; heat2d
# persists an HDF5 snapshot every 10 steps, and the restarted group (which
# gets ELASTIC_RESUME=1) resumes from the one of step 20 (written
# synchronously: a background write of step 20 would only be committed at
# a later snapshot step)
mkdir -p "$ep_root/snap"
ELASTIC_PERSIST_PERIOD=10 ELASTIC_PERSIST_BACKGROUND=0 ELASTIC_SNAPSHOT_DIR=$ep_root/snap \
    ep_start group-heat 8 --restart-policy group --max-restarts 1 -- "$FIRST" "--fail 3:25" "${heat[@]}"
ep_wait 180
is "$EP_RC" 0 "group policy, heat2d: exit 0" || diag "$(ep_err)"
is "$(ep_checksum)" "$heat_ref" "group policy, heat2d: the failure-free checksum"
if grep -q '^#define HAVE_HDF5 1' "${top_builddir:-..}/config.h" 2> /dev/null; then
    grep -q '^resumed from step 20 ' "$ep_dir/out"
    ok $? "group policy, heat2d: the restarted group resumed from the HDF5 snapshot of step 20" ||
        diag "$(ep_out)"
else
    skip "no HDF5: the restarted group starts from scratch"
fi
is "$(ep_get agent_start restart_policy)/$(ep_ev rank_lost)/$(ep_ev restart)" "group/0/1" \
    "group policy, heat2d: no in-place recovery, one restart"
is "$(ep_ev worker_exit attempt=0 state=STOPPED)" 7 "group policy, heat2d: the 7 others were stopped"
is "$(ep_get pmix_job_end failed 0)" 0 "group policy, heat2d: the others were not told to recover"
grep -q '^final world 8,' "$ep_dir/out"
ok $? "group policy, heat2d: the restarted group has all 8 ranks" || diag "$(ep_out)"
ep_check_clean "group policy, heat2d"

ep_start sgd-ref 8 -- "$SGD" --steps 30
ep_wait 180
sgd_ref=$(ep_checksum)
ep_start group-sgd 8 --restart-policy group --max-restarts 1 -- "$FIRST" "--fail 6:10" "$SGD" --steps 30
ep_wait 180
is "$EP_RC/$(ep_ev restart)" "0/1" "group policy, sgd: one restart, exit 0" || diag "$(ep_err)"
is "$(ep_checksum)" "$sgd_ref" "group policy, sgd: the failure-free checksum"
ep_check_clean "group policy, sgd"

done_testing
