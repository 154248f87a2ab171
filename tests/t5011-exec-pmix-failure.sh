#!/bin/bash
# t5011-exec-pmix-failure.sh - ranks killed under `elastic-exec --nproc-per-node 8`
# recover in place
#
# A rank that dies after MPI_Init (a real SIGKILL: heat2d's and sgd's
# --fail RANK:STEP kill the rank itself, ft_app's victim is killed from
# outside) is reaped by elastic-exec, whose PMIx server tells the survivors;
# libelastic shrinks and rolls back, and the job ends with the failure-free
# checksum, without a restart.  The death is a failure in the event log
# (worker_exit with in_place, rank_lost).  Two buddy ranks lost at once
# are not recoverable in place: libelastic exits 76 (relaunch needed) and
# the group restarts in a new namespace.  When every rank is lost the job
# fails.  Nothing may be left behind.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] && [ -x "$SGD" ] || skip_all "the examples are not built"

heat=("$HEAT2D" --nx 64 --ny 64 --steps 60)
sgd=("$SGD" --steps 30)

# the failure-free results
ep_start heat-ref 8 -- "${heat[@]}"
ep_wait 180
heat_ref=$(ep_checksum)
is "$EP_RC" 0 "heat2d reference run: exit 0 (checksum $heat_ref)" || diag "$(ep_err)"
ep_start sgd-ref 8 -- "${sgd[@]}"
ep_wait 180
sgd_ref=$(ep_checksum)
is "$EP_RC" 0 "sgd reference run: exit 0 (checksum $sgd_ref)" || diag "$(ep_err)"

# in_place NAME WORLD VICTIMS APP ARGS...: 8 ranks, the victims (original
# ranks) die, the survivors finish in a world of WORLD with the reference
# checksum and no restart
in_place() {
    local name=$1 world=$2 victims=$3 ref v
    shift 3
    case $1 in "$SGD") ref=$sgd_ref ;; *) ref=$heat_ref ;; esac
    ep_start "$name" 8 -- "$@"
    ep_wait 180
    is "$EP_RC" 0 "$name: exit 0" || diag "$(ep_err)"
    is "$(ep_checksum)" "$ref" "$name: the failure-free checksum" || diag "$(ep_out)"
    grep -q "^final world $world," "$ep_dir/out"
    ok $? "$name: the survivors finished in a world of $world" || diag "$(ep_out)"
    for v in $victims; do
        is "$(ep_ev worker_exit rank="$v" state=FAILED signal=SIGKILL in_place=True)/$(ep_ev rank_lost rank="$v")" \
            "1/1" "$name: rank $v's death is in the event log (worker_exit in place, rank_lost)"
    done
    is "$(ep_ev rank_lost)/$(ep_ev restart)/$(ep_ev pmix_job)" "$(echo $victims | wc -w)/0/1" \
        "$name: no other loss, no restart, one namespace"
    ep_check_clean "$name"
}

in_place one 7 3 "${heat[@]}" --fail 3:20
in_place two-rounds 6 "2 5" "${heat[@]}" --fail 2:15 --fail 5:35
in_place two-at-once 6 "1 4" "${heat[@]}" --fail 1:20 --fail 4:20
in_place rank0 7 0 "${heat[@]}" --fail 0:20
in_place sgd-one 7 2 "${sgd[@]}" --fail 2:10
in_place sgd-two-rounds 6 "5 1" "${sgd[@]}" --fail 5:8 --fail 1:20
grep -q 'warn: rank 2 (local rank 2, pid [0-9]*) lost: Signal 9 (SIGKILL) received by PID [0-9]*; recovered in place (died after MPI_Init); 7 workers left' \
    "$ep_root"/*-sgd-one/err
ok $? "the agent says what happened on stderr"

# killed from outside while the others wait in MPI_Barrier
ep_start outside 8 -- "$FT_APP" -v 5
if wait_for_grep '^ready 1 5 ' "$ep_dir/out" 120; then
    kill -KILL "$(ep_rank_pid 5)"
fi
ep_wait 120
is "$EP_RC" 0 "killed from outside: exit 0" || diag "$(ep_err)"
grep -q '^ft-app: ok size 8 -> 7' "$ep_dir/out"
ok $? "killed from outside: the 7 survivors shrank and checked their sum" || diag "$(ep_out)"
grep -o '^error 1 [0-9]* class=[A-Z_]* t=[0-9]* wait_ms=[0-9.]*' "$ep_dir/out" | head -1 | sed 's/^/# /'
ep_check_clean "killed from outside"

# exit without MPI_Finalize: a loss too (PMIX_ERR_PROC_TERM_WO_SYNC)
ep_start noexit 4 -- "$FT_APP" -x -v 3
ep_wait 120
is "$EP_RC" 0 "exit 3 without MPI_Finalize: exit 0" || diag "$(ep_err)"
is "$(ep_ev rank_lost rank=3 exitcode=3)" 1 "exit 3 without MPI_Finalize: rank 3 lost in place"
grep -q '^ft-app: ok size 4 -> 3' "$ep_dir/out"
ok $? "exit 3 without MPI_Finalize: the survivors recovered" || diag "$(ep_out)"
ep_check_clean "exit without MPI_Finalize"

# two buddies at once: libelastic cannot recover in place and exits 76
# (ELASTIC_EXIT_RELAUNCH); the group restarts (from HDF5 when libelastic
# has a persistent snapshot, here from the start) in a new namespace
ep_start relaunch 8 --max-restarts 1 -- "$FIRST" "--fail 2:20 --fail 3:20" "${heat[@]}"
ep_wait 180
is "$EP_RC" 0 "relaunch: exit 0" || diag "$(ep_err)"
is "$(ep_checksum)" "$heat_ref" "relaunch: the failure-free checksum"
ok $([ "$(ep_ev worker_exit attempt=0 exitcode=76)" -ge 1 ]; echo $?) "relaunch: a survivor asked for it (exit 76)"
is "$(ep_ev restart)/$(ep_get shutdown restarts)" "1/1" "relaunch: the group restarted once"
is "$(ep_get pmix_job nspace 0 | sed 's/.*\.//')/$(ep_get pmix_job nspace 1 | sed 's/.*\.//')" "0/1" \
    "relaunch: each attempt has its own namespace"
ep_check_clean "relaunch"

# ... and with no restart left, elastic-exec exits 76 itself, with the
# relaunch as the root cause (an outer launcher relaunches)
ep_start relaunch-none 8 -- "${heat[@]}" --fail 2:20 --fail 3:20
ep_wait 180
is "$EP_RC" 76 "relaunch, no restart left: exit 76" || diag "$(ep_err)"
sed -n '/^Root Cause/,/^----/p' "$ep_dir/err" | grep -q 'exitcode  : 76'
ok $? "relaunch, no restart left: the root cause is the rank that asked for it" || diag "$(ep_err)"
ep_check_clean "relaunch, no restart left"

# every rank lost: nobody goes on, the job fails
ep_start all-lost 2 -- "$FT_APP" -s -v 0,1
ep_wait 120
is "$EP_RC" 137 "every rank lost: exit 128+9" || diag "$(ep_err)"
is "$(ep_ev rank_lost)/$(ep_get shutdown state)" "2/FAILED" "every rank lost: two losses, the group FAILED"
grep -q "worker group 'default' FAILED: 2 failed ranks" "$ep_dir/err"
ok $? "every rank lost: the failure report" || diag "$(ep_err)"
ep_check_clean "every rank lost"

done_testing
