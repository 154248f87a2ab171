#!/bin/bash
# t5004-pmix-soak.sh - many jobs with a random victim at a random moment, no hang
#
# Each run starts 4 ranks under pmix-launch in loop mode (allreduce and
# agreement over and over) and kills one random rank at a random moment:
# from outside, 0-300 ms after it reported, or by itself, 0-200 ms into the
# loop.  Every run must recover (3 survivors, right sum), end on its own,
# and leave nothing behind.  PMIX_SOAK_RUNS (default 20) sets the count;
# the long soak (1000 runs and more) is bench/pmix-soak.sh.  A hung run is
# reported with every rank's backtrace (gdb, where installed): Open MPI
# 5.0.7's agreement (ERA) has hung twice in about 1850 runs (one in CI),
# doc/reliability.md.  What the launcher owes a run is the fault event at
# every survivor (ft_app prints "fault-event RANK LOST" when its PMIx client
# gets it).  A hung run where every survivor got it and every live rank
# waits inside Open MPI's MPIX_Comm_agree or MPIX_Comm_shrink is that known
# defect of Open MPI's: reported as a skip, with the stacks, and counted
# apart; any other hang fails.
. "${srcdir:-.}/pmix/lib.sh"

runs=${PMIX_SOAK_RUNS:-20}
pass=0 hangs=0 era=0 t0=$(now_ms)

# ompi_agreement_hang VICTIM: 0 when the hung run ($pl_dir) is Open MPI's
# known agreement hang: every survivor had the fault event for VICTIM, and
# each of the 3 live ranks' stacks is inside MPIX_Comm_agree/_shrink
ompi_agreement_hang() {
    local r
    for r in 0 1 2 3; do
        [ "$r" = "$1" ] && continue
        grep -q "^fault-event $r $1 " "$pl_dir/out" || return 1
    done
    [ -s "$pl_dir/stacks" ] && [ "$(wc -l < "$pl_dir/stacks")" = 3 ] || return 1
    ! grep -v -q -E 'MPIX_Comm_(agree|shrink)' "$pl_dir/stacks"
}
for i in $(seq "$runs"); do
    victim=$((RANDOM % 4))
    if [ $((i % 2)) -eq 0 ]; then
        delay_us=$((RANDOM % 200000))
        how="self-kill after ${delay_us} us"
        pl_start "soak$i" 4 -- "$FT_APP" -l -s -k "$delay_us" -v "$victim"
    else
        delay_ms=$((RANDOM % 300))
        how="killed ${delay_ms} ms after ready"
        pl_start "soak$i" 4 -- "$FT_APP" -l -v "$victim"
        if wait_for_grep "^ready 1 $victim " "$pl_dir/out" 120; then
            sleep "$(printf '0.%03d' "$delay_ms")" # the random moment
            pl_kill "$victim"
        fi
    fi
    pl_wait 90
    known=1
    if [ "$PL_RC" = 124 ]; then
        # the ranks die with the launcher (PR_SET_PDEATHSIG): give them a moment
        wait_until 10 test -z "$(pl_job_procs)"
        ompi_agreement_hang "$victim" && known=0
        [ $known = 0 ] && era=$((era + 1)) || hangs=$((hangs + 1))
    fi
    good=0
    [ "$PL_RC" = 0 ] && [ "$(pl_count '^ft-app: ok size 4 -> 3')" = 1 ] || good=1
    if [ $known = 0 ]; then
        skip "run $i: rank $victim $how: Open MPI's agreement hung, every survivor had the fault event (doc/reliability.md)"
        diag "$(tail -n 20 "$pl_dir/out")"
    else
        ok $good "run $i: rank $victim $how: recovered (exit $PL_RC)" || diag "$(tail -n 20 "$pl_dir/out")" "$(tail -n 12 "$pl_dir/events")"
    fi
    [ $good = 0 ] && pass=$((pass + 1))
    # nothing left: checked quietly, reported on failure
    left=$(for p in $(sed -n 's/.* start rank=[0-9]* pid=\([0-9]*\) .*/\1/p' "$pl_dir/events"); do kill -0 "$p" 2> /dev/null && echo "$p"; done)
    leaked=$(grep -c ' shm_check .* leaked=[1-9]' "$pl_dir/events")
    if [ -n "$left" ] || [ -n "$(ls -A "$pl_dir/tmp")" ] || [ "$leaked" != 0 ]; then
        ok 1 "run $i: left processes '$left', session files '$(ls -A "$pl_dir/tmp")', leaked segments $leaked"
    fi
    [ $good = 0 ] && rm -rf "$pl_dir"
done
diag "$pass/$runs runs recovered, $hangs hang(s), $era of Open MPI's agreement with every survivor notified, $((($(now_ms) - t0) / 1000)) s"
is "$hangs" 0 "no run hung"
done_testing
