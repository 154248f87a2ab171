#!/bin/bash
# t5017-exec-pmix-fence-death.sh - a stop while ranks wait in a fence
#
# elastic-exec's hosted PMIx server, 8 ranks of pmix_fence_hold: 7 in a
# fence that rank 7 never joins, SIGTERM to elastic-exec (a preemption
# before MPI_Init's fences completed: nobody can suspend, the ranks are
# stopped).  PMIx 4.2.2 leaves the fence's tracker broken: deregistering the
# namespace could deadlock its progress thread and PMIx_server_finalize
# crashed (SIGSEGV), 10 of 25 runs of this before the fix
# (doc/reliability.md, defect 14).  Each run must end with 75 in bounded
# time and leave nothing behind.
. "${srcdir:-.}/pmix/exec.sh"

APP=${top_builddir:-..}/tests/pmix/pmix_fence_hold
[ -x "$APP" ] || skip_all "pmix_fence_hold is not built"
RUNS=${T5017_RUNS:-8}

for i in $(seq 1 "$RUNS"); do
    ep_start "stop$i" 8 -- "$APP"
    wait_until 60 eval '[ "$(grep -c "connected$" "$ep_dir/out")" -ge 8 ]'
    ok $? "run $i: 8 ranks connected, 7 of them in the fence" || diag "$(ep_err)"
    kill -TERM "$ep_pid"
    ep_wait 60
    is "$EP_RC" 75 "run $i: SIGTERM -> exit 75, not a crash or a hang" || diag "$(tail -n 5 "$ep_dir/err")"
    is "$(grep -c 'the fence completed' "$ep_dir/out")" 0 "run $i: the fence never completed"
    ep_check_clean "run $i"
done
done_testing
