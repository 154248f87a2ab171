#!/bin/bash
# t5010-exec-pmix-basic.sh - `elastic-exec --nproc-per-node N ./mpi_app`, no mpirun
#
# In agent mode elastic-exec hosts the PMIx server of its workers (--wireup
# pmix, the default): it registers a namespace, gives each worker its PMIx
# and ULFM environment, and the workers are the MPI ranks of one
# MPI_COMM_WORLD.  heat2d and sgd with 8 ranks (oversubscribed on this
# machine), the environment and descriptors a rank gets, --wireup none,
# the TCP transport, a stop by SIGTERM, and programs that are not MPI.
# Every job must leave no process, directory or /dev/shm segment behind.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] && [ -x "$SGD" ] || skip_all "the examples are not built"

# 1. heat2d, 8 ranks
ep_start heat8 8 -- "$HEAT2D" --nx 64 --ny 64 --steps 60
ep_wait 180
is "$EP_RC" 0 "heat2d, 8 ranks: exit 0" || diag "$(ep_err)"
ref=$(ep_checksum)
ok $([ -n "$ref" ]; echo $?) "heat2d, 8 ranks: checksum $ref"
grep -q '^heat2d: 64x64 grid, 60 steps, 8 ranks (8 working' "$ep_dir/out"
ok $? "heat2d, 8 ranks: one MPI_COMM_WORLD of 8" || diag "$(ep_out)"
is "$(ep_get agent_start backend)/$(ep_get agent_start wireup)/$(ep_get agent_start restart_policy)" \
    "pmix/pmix/in-place" "agent mode defaults: the PMIx backend, --wireup pmix, in-place restarts"
is "$(ep_ev mpi_initialized ranks=8)" 1 "heat2d, 8 ranks: the server saw every rank finish MPI_Init"
is "$(ep_get mpi_initialized clients_without_nodelay)" 0 "every PMIx client socket has TCP_NODELAY"
if [ "$(nproc)" -lt 8 ]; then
    is "$(ep_get pmix_job oversubscribed)" True "8 ranks on $(nproc) cores: PMIX_NODE_OVERSUBSCRIBED"
fi
is "$(ep_ev worker_exit state=SUCCEEDED)" 8 "heat2d, 8 ranks: 8 workers succeeded"
is "$(ep_get pmix_job_end finalized)" 8 "heat2d, 8 ranks: 8 ranks called MPI_Finalize"
diag "MPI_Init of 8 ranks: $(ep_get mpi_initialized init_ms) ms after the start"
ep_check_clean "heat2d, 8 ranks"

# the field does not depend on the decomposition: one rank agrees
ep_start heat1 1 -- "$HEAT2D" --nx 64 --ny 64 --steps 60
ep_wait 120
is "$EP_RC/$(ep_checksum)" "0/$ref" "heat2d, 1 rank: the same checksum"

# 2. sgd, 8 ranks
ep_start sgd8 8 -- "$SGD" --steps 30
ep_wait 180
is "$EP_RC" 0 "sgd, 8 ranks: exit 0" || diag "$(ep_err)"
ok $([ -n "$(ep_checksum)" ]; echo $?) "sgd, 8 ranks: checksum $(ep_checksum)"
is "$(ep_ev worker_exit state=SUCCEEDED)" 8 "sgd, 8 ranks: 8 workers succeeded"
ep_check_clean "sgd, 8 ranks"

# 3. what a rank gets: the server's namespace, ULFM's settings, no stale PMIx
# identity from outside (PMIX_MCA_* kept), and no descriptor beyond 0-2
# (ls lists its own descriptors: 0-2, and 3 for the directory it reads)
envprog='env > "$ELASTIC_TEST_DIR/env.$RANK"; exec ls /proc/self/fd > "$ELASTIC_TEST_DIR/fd.$RANK"'
export ELASTIC_TEST_DIR=$ep_root
PMIX_NAMESPACE=outer PMIX_RANK=7 PMIX_MCA_ptl_base_test=kept ep_start env 2 -- sh -c "$envprog"
ep_wait 60
is "$EP_RC" 0 "environment dump: exit 0"
e=$ep_root/env.1
got=$(for v in PMIX_RANK OMPI_MCA_mpi_ft_enable OMPI_MCA_pml OMPI_MCA_btl OMPI_MCA_coll PMIX_MCA_ptl_base_test RANK WORLD_SIZE; do
    sed -n "s/^$v=//p" "$e"
done | tr '\n' ' ')
is "$got" "1 1 ob1 self,sm ^han kept 1 2 " "rank 1: PMIx rank, ULFM settings, PMIX_MCA_* kept, torchrun's RANK/WORLD_SIZE"
ns=$(sed -n 's/^PMIX_NAMESPACE=//p' "$e")
is "$ns" "$(ep_get pmix_job nspace)" "rank 1: the agent's namespace ($ns), not the outer one"
is "$(tr '\n' ' ' < "$ep_root/fd.0")" "0 1 2 3 " "rank 0: only descriptors 0-2 (no PMIx socket leaked)"
ep_check_clean "environment dump"

# 4. --wireup none: the torchrun environment only
PMIX_NAMESPACE=outer ep_start none 2 --wireup none -- sh -c "$envprog"
ep_wait 60
is "$EP_RC" 0 "--wireup none: exit 0"
is "$(ep_get agent_start backend)/$(ep_get agent_start restart_policy)" "local/group" \
    "--wireup none: the local backend, group restarts"
is "$(sed -n 's/^PMIX_NAMESPACE=//p' "$ep_root/env.0")/$(grep -c '^OMPI_MCA_mpi_ft_enable=' "$ep_root/env.0")" \
    "outer/0" "--wireup none: the environment is passed as it is, nothing added"
is "$(ep_ev pmix_server)" 0 "--wireup none: no PMIx server"

# 5. the TCP transport
ep_start tcp 4 --mpi-btl tcp -- "$FT_APP"
ep_wait 120
is "$EP_RC" 0 "--mpi-btl tcp: exit 0" || diag "$(ep_err)"
grep -q '^ft-app: ok size 4 -> 4' "$ep_dir/out"
ok $? "--mpi-btl tcp: the ranks checked their allreduce" || diag "$(ep_out)"
is "$(ep_get pmix_job btl)" tcp "--mpi-btl tcp: the namespace uses self,tcp"
ep_check_clean "--mpi-btl tcp"

# 6. SIGTERM to the agent while ranks wait in MPI_Barrier: stopped on
# purpose, no rank is told of a failure, nothing is left
ep_start sigterm 4 -- "$FT_APP" -v 1
wait_for_grep '^ready 1 1 ' "$ep_dir/out" 120
ok $? "sigterm: rank 1 waits to be killed, the others in MPI_Barrier"
kill -TERM "$ep_pid"
ep_wait 60
is "$EP_RC" 75 "sigterm: a preemption, exit 75 (ELASTIC_EXIT_SUSPENDED)"
is "$(ep_ev worker_exit state=STOPPED)" 4 "sigterm: 4 workers stopped"
is "$(ep_get pmix_job_end failed)" 0 "sigterm: no failure event was sent to the ranks"
is "$(grep -c '^error ' "$ep_dir/out")" 0 "sigterm: no rank saw an MPI error"
ep_check_clean "sigterm"

# SIGKILL to the agent itself: its guardian kills the ranks and removes the
# run and PMIx directories and the ranks' /dev/shm segments
ep_start agent-killed 4 -- "$FT_APP" -v 1
wait_for_grep '^ready 1 1 ' "$ep_dir/out" 120
ok $? "agent killed: the ranks are running"
segs=$(for r in 0 1 2 3; do grep -o ' /dev/shm/[^ ]*' "/proc/$(ep_rank_pid $r)/maps" 2> /dev/null; done | sort -u)
ok $([ -n "$segs" ]; echo $?) "agent killed: the ranks mapped $(echo $segs | wc -w) segment(s)"
kill -KILL "$ep_pid"
ep_wait 30
wait_no_marked 20
ok $? "agent killed: no rank is left"
wait_until 20 eval 'test -z "$(ls -A "$ep_dir/tmp")"'
ok $? "agent killed: no run or PMIx directory left ($(ls -A "$ep_dir/tmp" | tr '\n' ' '))"
segs_left() { for f in $segs; do [ -e "$f" ] && echo "$f"; done; }
wait_until 20 eval 'test -z "$(segs_left)"'
is "$(segs_left)" "" "agent killed: no /dev/shm segment left"

# 7. preemption: SIGTERM relayed to heat2d's ranks, libelastic suspends them
# (a snapshot, exit 75), the agent exits 75
mkdir -p "$ep_root/snap"
# (rank 0's progress heartbeat counts its steps: libelastic, which handles
# SIGTERM by then, is running)
ELASTIC_SNAPSHOT_DIR=$ep_root/snap ep_start preempt 4 --log-dir "$ep_root/preempt-logs" -- \
    "$HEAT2D" --nx 64 --ny 64 --steps 100000000
hb=$ep_root/preempt-logs/t$$-$ep_seq/attempt_0/0/heartbeat
wait_until 120 eval '[ "$(od -An -tu8 -j32 -N8 "$hb" 2> /dev/null | tr -d " ")" -gt 0 ]'
ok $? "preempt: heat2d is running (step $(od -An -td8 -j16 -N8 "$hb" | tr -d ' '))" || diag "$(ep_err)"
kill -TERM "$ep_pid"
ep_wait 120
is "$EP_RC" 75 "preempt: exit 75 (ELASTIC_EXIT_SUSPENDED)" || diag "$(ep_err)"
grep -q '^suspended at step [0-9]*' "$ep_dir/out"
ok $? "preempt: heat2d suspended" || diag "$(ep_out)"
is "$(ep_ev rank_lost)/$(ep_get pmix_job_end failed)" "0/0" "preempt: no rank was lost or told of a failure"
ep_check_clean "preempt"

# 8. programs that are not MPI run under the default wire-up as under torchrun
ep_start true 2 -- /bin/true
ep_wait 60
is "$EP_RC/$(ep_get agent_start wireup)" "0/pmix" "/bin/true under --wireup pmix: exit 0"
ep_start false 2 --max-restarts 1 -- sh -c 'exit 3'
ep_wait 60
is "$EP_RC" 3 "a failing non-MPI program: its exit code"
is "$(ep_ev restart)" 1 "a failing non-MPI program: the group restarted once"
is "$(ep_ev rank_lost)" 0 "a failing non-MPI program: not an in-place recovery"
ep_check_clean "non-MPI programs"

# 9. when the server cannot start (its directory cannot be made), the
# default starts the workers without it; --wireup pmix is an error
mkdir -p "$ep_root/logs"
out=$(TMPDIR=/nonexistent/dir ELASTIC_TEST_MARK=$test_mark "$EXEC" --log-dir "$ep_root/logs" \
    --nproc-per-node 2 sh -c 'echo "ns=$PMIX_NAMESPACE"' 2> "$ep_root/fallback.err")
is "$?/$(echo $out)" "0/ns= ns=" "no server possible: the default runs the workers without one"
grep -q "hosted PMIx server: tmpdir: cannot create a directory in '/nonexistent/dir'.*start without it" "$ep_root/fallback.err"
ok $? "no server possible: a warning says why" || diag "$(cat "$ep_root/fallback.err")"
TMPDIR=/nonexistent/dir ELASTIC_TEST_MARK=$test_mark "$EXEC" --log-dir "$ep_root/logs" --wireup pmix \
    --nproc-per-node 2 /bin/true 2> "$ep_root/fallback.err"
is "$?" 1 "no server possible, --wireup pmix: exit 1"
grep -q "elastic-exec: hosted PMIx server: tmpdir: cannot create" "$ep_root/fallback.err"
ok $? "no server possible, --wireup pmix: one line says why" || diag "$(cat "$ep_root/fallback.err")"

done_testing
