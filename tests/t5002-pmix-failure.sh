#!/bin/bash
# t5002-pmix-failure.sh - ranks SIGKILLed under the hosted PMIx server recover in place
#
# A rank is killed from outside while the others wait in MPI_Barrier; the
# server reaps it and sends the survivors the PMIx fault event; they must get
# MPIX_ERR_PROC_FAILED (or MPIX_ERR_REVOKED), shrink, and agree on an
# allreduce over the survivors' world ranks.  Then nothing may be left.
. "${srcdir:-.}/pmix/lib.sh"

# run_case NAME N "LAUNCHER ARGS" "APP ARGS" "ROUND VICTIMS..." WANT
#   each ROUND VICTIMS word is a comma list killed together once its
#   victims printed "ready"; WANT is the final "size N -> M" text
run_case() {
    local name=$1 n=$2 largs=$3 aargs=$4 rounds=$5 want=$6 k=0 v r
    # shellcheck disable=SC2086
    pl_start "$name" "$n" $largs -- "$FT_APP" $aargs
    for v in $rounds; do
        k=$((k + 1))
        for r in ${v//,/ }; do
            wait_for_grep "^ready $k $r " "$pl_dir/out" 120 || {
                ok 1 "$name: rank $r reached round $k's kill point"
                diag "$(pl_out)"
                pl_kill_job
                return
            }
        done
        pl_kill ${v//,/ }
        ok $? "$name: SIGKILL sent to rank(s) $v"
    done
    pl_wait 120
    is "$PL_RC" 0 "$name: exit 0" || diag "$(pl_out)" "$(pl_log)"
    is "$(pl_count "^ft-app: ok size $want")" 1 "$name: survivors shrank ($want) and checked the sum" || diag "$(pl_out)"
    is "$(pl_count 'expected MPIX')" 0 "$name: no survivor saw a non-ULFM error class"
    grep -o '^error 1 [0-9]* class=[A-Z_]* t=[0-9]* wait_ms=[0-9.]*' "$pl_dir/out" | head -1 | sed 's/^/# /'
    pl_check_clean "$name"
}

run_case one 4 "" "-v 2" "2" "4 -> 3"
is "$(grep -c 'exit rank=2 .*status=signal:9 verdict=recoverable' "$pl_dir/events")" 1 \
    "one: the server called rank 2's death recoverable"
run_case rank0 4 "" "-v 0" "0" "4 -> 3"
run_case two-at-once 6 "" "-v 1,4" "1,4" "6 -> 4"
run_case two-rounds 5 "" "-v 3 -v 1" "3 1" "5 -> 3"
run_case tcp 4 "--btl tcp" "-v 1" "1" "4 -> 3"

# exiting without MPI_Finalize is a failure too (PMIX_ERR_PROC_TERM_WO_SYNC)
pl_start exit 4 -- "$FT_APP" -x -v 3
pl_wait 120
is "$PL_RC" 0 "exit without finalize: exit 0" || diag "$(pl_out)" "$(pl_log)"
is "$(pl_count '^ft-app: ok size 4 -> 3')" 1 "exit without finalize: survivors recovered"
grep -q 'exit rank=3 .*status=exit:3 verdict=recoverable' "$pl_dir/events"
ok $? "exit without finalize: rank 3's exit 3 was a recoverable failure"
pl_check_clean "exit without finalize"

# 8 ranks on 2 cores, the victim kills itself
pl_start eight 8 -- "$FT_APP" -s -v 5
pl_wait 180
is "$PL_RC" 0 "8 ranks: exit 0" || diag "$(pl_out)" "$(pl_log)"
is "$(pl_count '^ft-app: ok size 8 -> 7')" 1 "8 ranks: survivors recovered"
pl_check_clean "8 ranks"

# a dead rank is deregistered once PMIx reports the lost connection (~1 s
# later), and the survivors' MPI_Finalize still completes
pl_start lost 3 -- "$FT_APP" -v 1 -p "$pl_root/lost.go"
wait_for_grep '^ready 1 1 ' "$pl_dir/out" 120
pl_kill 1
wait_for_grep ' lost rank=1' "$pl_dir/events" 60
ok $? "lost: PMIx reported rank 1's lost connection"
touch "$pl_root/lost.go" # the survivors may finalize now
pl_wait 120
is "$PL_RC" 0 "lost: exit 0" || diag "$(pl_out)" "$(pl_log)"
grep -q ' job_end .* finalized=2 failed=1 lost=1 deregistered=1 ' "$pl_dir/events"
ok $? "lost: rank 1 deregistered before the job ended" || grep job_end "$pl_dir/events" | sed 's/^/# /'
is "$(pl_count '^ft-app: ok size 3 -> 2')" 1 "lost: survivors recovered"
pl_check_clean "lost"

done_testing
