#!/bin/bash
# t2004-exec-signals.sh - signals to the agent: SIGTERM relayed as a
# preemption notice (workers suspend with exit 75, the agent exits 75),
# workers that ignore it are killed after --shutdown-timeout, SIGINT stops
# the run, a second signal does not wait, a worker that suspends by itself
# suspends the group, and SIGKILL to the agent leaves no process behind.
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT

# start_ready N DIR ARGS...: start the agent and wait until N workers are ready
start_ready() {
    local n=$1 d=$2
    shift 2
    mkdir -p "$d"
    exec_start "$d/out" "$d/err" --event-log "$d/ev" "$@"
    wait_until 60 eval "[ \$(ls $d/ready.* 2> /dev/null | wc -l) -ge $n ]"
}

# 1. SIGTERM: preemption relay, workers suspend
d=$tmp/term
start_ready 3 "$d" --nproc-per-node 3 --shutdown-timeout 30 "$WORKER" trap:TERM:75 "ready:$d" hang
ok $? "3 workers ready"
kill -TERM "$exec_pid"
exec_wait 60
is "$EXEC_RC" 75 "SIGTERM: the agent exits with the suspend code 75"
is "$(ev_get "$d/ev" suspended suspended)" 3 "all three workers exited 75 (suspended)"
is "$(ev_count "$d/ev" preempt signal=SIGTERM)" 1 "the preemption was logged"
wait_no_marked 20
ok $? "no process left after SIGTERM"

# 2. workers that ignore the notice are killed after --shutdown-timeout
d=$tmp/ignore
start_ready 2 "$d" --nproc-per-node 2 --shutdown-timeout 1 "$WORKER" ignore:TERM "ready:$d" hang
t0=$(now_ms)
kill -TERM "$exec_pid"
exec_wait 60
t1=$(now_ms)
is "$EXEC_RC" 75 "still exit 75 (a requeue can follow)"
is "$(ev_get "$d/ev" kill workers)" 2 "both were SIGKILLed after the timeout"
ok $([ $((t1 - t0)) -ge 900 ]; echo $?) "the agent waited the shutdown timeout ($((t1 - t0)) ms)"
wait_no_marked 20
ok $? "no process left"

# 3. SIGUSR1 is a preemption signal too; --preempt-signals changes the set
d=$tmp/usr1
start_ready 1 "$d" --preempt-signals SIGUSR2 "$WORKER" trap:USR2:75 "ready:$d" hang
kill -USR2 "$exec_pid"
exec_wait 60
is "$EXEC_RC" 75 "--preempt-signals SIGUSR2: SIGUSR2 is relayed and the run suspends"

# 4. SIGHUP is not a preemption: it stops the run, 128+1 (a shell starts
#    background jobs with SIGINT ignored, and an ignored signal stays so)
d=$tmp/hup
start_ready 2 "$d" --nproc-per-node 2 "$WORKER" "ready:$d" hang
kill -HUP "$exec_pid"
exec_wait 60
is "$EXEC_RC" 129 "SIGHUP: the workers are stopped and the agent exits 129"
is "$(ev_count "$d/ev" worker_exit signal=SIGHUP state=STOPPED)" 2 "the workers got SIGHUP"
wait_no_marked 20
ok $? "no process left after SIGHUP"

# 5. a second signal while waiting: kill at once (a repeat within a second
#    is the same notice, see 5b: the sleep makes this one a second signal)
d=$tmp/twice
start_ready 2 "$d" --nproc-per-node 2 --shutdown-timeout 120 "$WORKER" ignore:TERM "ready:$d" hang
t0=$(now_ms)
kill -TERM "$exec_pid"
wait_for_grep '"event":"preempt"' "$d/ev" 30
sleep 1.5
kill -TERM "$exec_pid"
exec_wait 60
t1=$(now_ms)
ok $([ $((t1 - t0)) -lt 30000 ]; echo $?) "a second SIGTERM does not wait 120 s ($((t1 - t0)) ms)"
wait_no_marked 20
ok $? "no process left"

# 5b. the same notice twice at once (Slurm signals a step's processes by
#     process group and by process tree): not a reason to kill the workers
#     before --shutdown-timeout
d=$tmp/dup
start_ready 2 "$d" --nproc-per-node 2 --shutdown-timeout 5 "$WORKER" ignore:TERM "ready:$d" hang
t0=$(now_ms)
kill -TERM "$exec_pid"; kill -TERM "$exec_pid"
exec_wait 60
t1=$(now_ms)
ok $([ $((t1 - t0)) -ge 4500 ]; echo $?) "SIGTERM twice at once: the workers got the full 5 s ($((t1 - t0)) ms)"
is "$(ev_count "$d/ev" preempt signal=SIGTERM)" 1 "SIGTERM twice at once: one preemption"
wait_no_marked 20
ok $? "no process left"

# 6. a worker suspends on its own (libelastic agreed on a preemption): the
#    others are told and the agent exits 75
d=$tmp/self
start_ready 3 "$d" --nproc-per-node 3 "$WORKER" trap:TERM:75 "ready:$d" "waitfor:$d/ready.1.0" \
    "waitfor:$d/ready.2.0" "crash:0:*:exit=75" hang
exec_wait 60
is "$EXEC_RC" 75 "a worker's exit 75 suspends the group: exit 75"
is "$(ev_get "$d/ev" suspended suspended)" 3 "and every worker suspended"
is "$(ev_count "$d/ev" restart)" 0 "no restart"

# 7. SIGKILL to the agent: workers and their children die too
d=$tmp/kill9
start_ready 3 "$d" --nproc-per-node 3 "$WORKER" "spawn:$d" "ready:$d" hang
ok $? "3 workers ready, each with a child process"
children=$(cat "$d"/child.*)
# the guardian (the agent's child that is not a worker) shares the agent's
# memory (clone with CLONE_VM: no page-table copy): kcmp(KCMP_VM) says 0;
# fork (sanitizer builds, valgrind) gives another address space
workers=" $(cat "$d"/ready.* 2> /dev/null | tr '\n' ' ') "
guard=
for c in $(cat /proc/"$exec_pid"/task/*/children 2> /dev/null); do
    case "$workers" in *" $c "*) ;; *) guard=$c ;; esac
done
vm=$(python3 -c 'import ctypes, sys
r = ctypes.CDLL(None, use_errno=True).syscall(312, int(sys.argv[1]), int(sys.argv[2]), 1, 0, 0)
print(r if r >= 0 else "errno%d" % ctypes.get_errno())' "$exec_pid" "${guard:-0}" 2> /dev/null)
san=$(ldd "$EXEC" 2> /dev/null | grep -o 'lib[at]san' | head -1)
if [ -n "$san" ] || [ -z "$guard" ] || [ "${vm#errno}" != "$vm" ]; then
    skip "the guardian shares the agent's memory (guardian '$guard', kcmp '$vm', sanitizer '$san')"
else
    is "$vm" 0 "the guardian (pid $guard) shares the agent's memory"
fi
kill -KILL "$exec_pid"
wait "$exec_pid" 2> /dev/null
wait_no_marked 20
ok $? "after SIGKILL to the agent no worker or worker child is left"
left=
for c in $children; do alive "$c" && left="$left $c"; done
is "$left" "" "the workers' children are gone too"

# 8. a worker's children are cleaned up when the group restarts
d=$tmp/orphans
mkdir -p "$d"
"$EXEC" --nproc-per-node 2 --max-restarts 1 "$WORKER" "spawn:$d" "crash:1:0:exit=1" "crash:*:0:hang" 2> "$d/err"
is "$?" 0 "a failing attempt whose workers had children, then success"
left=
for c in $(cat "$d"/child.*); do alive "$c" && left="$left $c"; done
is "$left" "" "no child of any attempt survives"
done_testing
