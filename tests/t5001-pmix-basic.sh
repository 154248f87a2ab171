#!/bin/bash
# t5001-pmix-basic.sh - Open MPI 5 jobs under the hosted PMIx server, no failure
#
# pmix-launch hosts the server (src/exec/pmix/pmix_host.c) and forks the ranks
# itself: no mpirun, no PRRTE.  Every job must finish, and leave no process,
# session directory or /dev/shm segment behind.
. "${srcdir:-.}/pmix/lib.sh"

# bad usage: one clear line naming the value and what is accepted
out=$("$PMIX_LAUNCH" -n 2 --btl ib -- /bin/true 2>&1)
rc=$?
is "$rc" 2 "--btl ib: exit 2"
is "$out" "pmix-launch: --btl: 'ib' is not accepted (sm, tcp)" "--btl ib: the error names the value and the accepted ones"
out=$("$PMIX_LAUNCH" -n 0 -- /bin/true 2>&1)
is "$?" 2 "-n 0: exit 2"
echo "$out" | grep -q -- "-n.*'0'" || echo "$out" | grep -q -- "-n.*0"
ok $? "-n 0: the error names the value ($out)"
out=$("$PMIX_LAUNCH" -n 2 2>&1)
is "$?" 2 "no program: exit 2"

# 4 ranks over shared memory
pl_start sm4 4 -- "$FT_APP"
pl_wait 120
is "$PL_RC" 0 "4 ranks (sm): exit 0" || diag "$(pl_out)" "$(pl_log)"
is "$(pl_count '^ft-app: ok size 4 -> 4')" 1 "4 ranks (sm): the job checked its allreduce"
is "$(pl_count '^done ')" 4 "4 ranks (sm): every rank finished"
grep -q ' initialized ranks=4 ' "$pl_dir/events"
ok $? "4 ranks (sm): the server saw MPI_Init end (4 fences)"
# the ranks run on after MPI_Init, so some may have finished and closed
# their sockets before the server counts them: what cannot race is that
# none it saw lacks TCP_NODELAY (t5000 holds its ranks and counts exactly)
nodelay=$(sed -n 's/.* nodelay clients=\([0-9]*\) without=\([0-9]*\).*/\1 \2/p' "$pl_dir/events")
ok $([ -n "$nodelay" ] && [ "${nodelay% *}" -le 4 ] && [ "${nodelay#* }" -eq 0 ]; echo $?) \
    "4 ranks (sm): no client socket without TCP_NODELAY (${nodelay% *} of 4 still open when counted)" ||
    grep nodelay "$pl_dir/events" | sed 's/^/# /'
if [ "$(nproc)" -lt 4 ]; then
    grep -q ' job .* oversubscribed=1' "$pl_dir/events"
    ok $? "4 ranks on $(nproc) cores: PMIX_NODE_OVERSUBSCRIBED set"
fi
is "$(grep -c ' finalized rank=' "$pl_dir/events")" 4 "4 ranks (sm): 4 finalize upcalls"
is "$(grep -c 'verdict=done' "$pl_dir/events")" 4 "4 ranks (sm): 4 normal exits"
grep -o 'init_max_ms=[0-9.]*' "$pl_dir/out" | sed 's/^/# MPI_Init /'
pl_check_clean "4 ranks (sm)"

# the TCP BTL
pl_start tcp4 4 --btl tcp -- "$FT_APP"
pl_wait 120
is "$PL_RC" 0 "4 ranks (tcp): exit 0" || diag "$(pl_out)" "$(pl_log)"
is "$(pl_count '^ft-app: ok size 4 -> 4')" 1 "4 ranks (tcp): the job checked its allreduce"
pl_check_clean "4 ranks (tcp)"

# 8 ranks, oversubscribed
pl_start sm8 8 -- "$FT_APP"
pl_wait 180
is "$PL_RC" 0 "8 ranks (sm): exit 0" || diag "$(pl_out)" "$(pl_log)"
is "$(pl_count '^ft-app: ok size 8 -> 8')" 1 "8 ranks (sm): the job checked its allreduce"
pl_check_clean "8 ranks (sm)"

# SIGTERM to the launcher: every rank is killed, nothing is left
pl_start sigterm 4 -- "$FT_APP" -v 1
wait_for_grep '^ready 1 1 ' "$pl_dir/out" 120
ok $? "sigterm: the job is running (rank 1 waits to be killed, the others in MPI_Barrier)"
kill -TERM "$pl_pid"
pl_wait 60
is "$PL_RC" 143 "sigterm: exit 128+15"
is "$(grep -c 'verdict=stopped' "$pl_dir/events")" 4 "sigterm: all 4 ranks stopped, no fault event"
pl_check_clean "sigterm"

# a program that never uses PMIx: done when it exits 0 ...
pl_start true 2 -- /bin/true
pl_wait 60
is "$PL_RC" 0 "/bin/true: exit 0"
# ... and a restart when it fails before MPI_Init could finish
pl_start false 2 -- /bin/false
pl_wait 60
is "$PL_RC" 76 "/bin/false: exit 76 (restart needed)"
grep -q 'restart needed: rank [01] died during MPI_Init (exit:1)' "$pl_dir/out"
ok $? "/bin/false: reported as a restart" || diag "$(pl_out)"

done_testing
