#!/bin/bash
# t5019-exec-pmix-spawn.sh - a job under `elastic-exec --nproc-per-node 4`
# loses rank 3 in place and grows back with MPI_Comm_spawn
#
# pmix/spawn_app (plain MPI): rank 3 SIGKILLs itself after a barrier; the
# survivors shrink, wait until the capacity in their heartbeat file is 1,
# and spawn copies of themselves with --child over the shrunk
# communicator.  elastic-exec, their PMIx host, starts the child into rank
# 3's slot as rank 4 (the numbering goes on after the ranks started so
# far); parents and child merge and check an allreduce of their RANK
# variables (0+1+2+4 = 7); the capacity goes back to 0.  A child killed
# before MPI_Init fails the spawn at once (every parent's MPI_Comm_spawn
# returns an error) and its slot comes back; a spawn of more ranks than
# the capacity is refused with one line.  The sm BTL of Open MPI 5.0.7
# does not reach a spawned namespace (MPI_ERR_INTERN in the child's
# MPI_Intercomm_merge), so the jobs run with --mpi-btl sm,tcp, which is
# also the default in place.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
APP=./pmix/spawn_app
[ -x "$APP" ] || skip_all "pmix/spawn_app is not built"

# (a) rank 3 lost, one rank spawned into its slot (each line prefixed with
# its global rank; -v: the agent's info lines)
ep_start grow 4 -v --mpi-btl sm,tcp --log-line-prefix-template '[${rank}]:' \
    -- "$APP"
ep_wait 180
is "$EP_RC" 0 "grow: exit 0" || diag "$(ep_err)"
is "$(grep -c '^\[[012]\]:merged parent .* size 4 .* sum 7 rc 0$' "$ep_dir/out")" 3 \
    "grow: the 3 survivors merged with the child (size 4, sum of RANK 7)" || diag "$(ep_out)"
grep -q '^\[4\]:merged child RANK 4 pid [0-9]* size 4 rank 3 sum 7 rc 0$' "$ep_dir/out"
ok $? "grow: the child took part, its output prefixed with rank 4" ||
    diag "$(ep_out)"
is "$(grep -c 'capacity 1$' "$ep_dir/out")/$(grep -c 'capacity after the spawn 0$' "$ep_dir/out")" \
    3/3 "grow: the survivors read capacity 1 before the spawn and 0 after it" ||
    diag "$(ep_out)"
pid3=$(ep_rank_pid 3)
pid4=$(ep_rank_pid 4)
ok $([ -n "$pid4" ] && [ "$pid4" != "$pid3" ] && echo 0 || echo 1) \
    "grow: rank 4 is a new process (pid $pid4, rank 3 was $pid3)"
grep -q 'info: spawning 1 rank (4) into the slots of rank 3 for elastic\.[^ ]*:0$' "$ep_dir/err"
ok $? "grow: the spawn's log line" || diag "$(ep_err)"
is "$(ep_get workers_spawned ranks)/$(ep_get workers_spawned slots)/$(ep_get workers_spawned slots_of)" \
    "[4]/[3]/[3]" "grow: the workers_spawned event (ranks, slots, slots of)"
is "$(ep_get workers_spawned pids)" "[$pid4]" "grow: the event names the new pid"
is "$(ep_ev rank_lost rank=3)/$(ep_ev worker_exit rank=4 exitcode=0)/$(ep_ev restart)" \
    "1/1/0" "grow: rank 3 lost in place, rank 4 exited 0, no restart"
grep -q "worker group 'default' SUCCEEDED: 5 ranks (1 spawned), 1 lost and recovered in place (ranks 3)" \
    "$ep_dir/err"
ok $? "grow: the summary counts the spawned rank" || diag "$(ep_err)"
ep_check_clean "grow"

# spawn_fails NAME DESC ENV TIMEOUT: a job whose child fails as ENV (VAR=1) asks,
# with --spawn-timeout TIMEOUT: every parent's MPI_Comm_spawn returns an
# error and the capacity comes back; SECS is how long the job took
spawn_fails() {
    local name=$1 desc=$2 env=$3 timeout=$4 t0
    export "$env"
    ep_start "$name" 4 --mpi-btl sm,tcp --spawn-timeout "$timeout" -- "$APP"
    unset "${env%%=*}"
    t0=$(date +%s)
    ep_wait 180
    SECS=$(($(date +%s) - t0))
    is "$EP_RC" 0 "$desc: exit 0 (the parents went on without it)" || diag "$(ep_err)"
    is "$(grep -c 'spawn failed class=' "$ep_dir/out")" 3 \
        "$desc: MPI_Comm_spawn returned an error on every parent" || diag "$(ep_out)"
    is "$(grep -c 'capacity after the failed spawn 1$' "$ep_dir/out")" 3 \
        "$desc: the capacity came back to 1" || diag "$(ep_out)"
}

# (b) the child dies before MPI_Init: the spawn fails at once
spawn_fails child-dies "child dies" SPAWN_APP_CHILD_DIE=1 120
ok $([ "$SECS" -lt 100 ] && echo 0 || echo 1) \
    "child dies: no wait for a timeout ($SECS s, --spawn-timeout 120)"
is "$(ep_ev workers_spawn_failed timed_out=False)/$(ep_ev rank_lost rank=4 signal=SIGKILL)" \
    "1/1" "child dies: workers_spawn_failed, rank 4 lost"
ep_check_clean "child dies"

# (b2) the child never reaches MPI_Init: --spawn-timeout fails the spawn
# on every parent, the child is killed, its slot comes back
spawn_fails child-stalls "child stalls" SPAWN_APP_CHILD_STALL=1 3
ok $([ "$SECS" -lt 100 ] && echo 0 || echo 1) \
    "child stalls: the job ended soon after the 3 s spawn timeout ($SECS s)"
is "$(ep_ev workers_spawn_failed timed_out=True)" 1 "child stalls: workers_spawn_failed, timed out" ||
    diag "$(ep_log | grep spawn)"
ep_check_clean "child stalls"

# (c) more ranks than the capacity: refused at once
ep_start too-many 4 --mpi-btl sm,tcp -- "$APP" --spawn 2
ep_wait 180
is "$EP_RC" 0 "too many: exit 0" || diag "$(ep_err)"
is "$(grep -c 'spawn failed class=' "$ep_dir/out")" 3 \
    "too many: MPI_Comm_spawn returned an error on every parent" || diag "$(ep_out)"
grep -q 'warn: MPI_Comm_spawn of 2 ranks by elastic\.[^ ]*:0 refused: more ranks than free slots (capacity 1: 4 slots, 3 live workers)' \
    "$ep_dir/err"
ok $? "too many: the refusal's log line" || diag "$(ep_err)"
is "$(ep_ev workers_spawn_refused ranks=2 capacity=1)/$(ep_ev workers_spawned)" "1/0" \
    "too many: workers_spawn_refused, nothing started"
ep_check_clean "too many"

done_testing
