#!/bin/bash
# t6001-slurm-cluster.sh - the emulated Slurm cluster of the test tier: three
# nodes with their own hostnames run tasks; srun reports a task killed on a
# node; a node whose processes are all
# SIGKILLed is declared DOWN by Slurm and its job requeued; a restarted node
# and a node marked down by hand come back; teardown leaves no process and
# no namespace behind.
. "${srcdir:-.}/lib/slurm.sh"

slurm_require

cluster_up 3
ok $? "3-node cluster up" || {
    done_testing
    exit 1
}
diag "cluster up in ${CLUSTER_UP_MS} ms (mode $CLUSTER_MODE)"
dir=$CLUSTER_DIR
prefix=$(sed -n 's/^PREFIX=//p' "$dir/cluster.env")

# every node runs tasks: hostname (own UTS namespace) and SLURMD_NODENAME
out=$(run_in_ctl srun -N3 --ntasks-per-node=2 printenv SLURMD_NODENAME 2> "$dir/srun.err" | sort | tr '\n' ' ')
is "$out" "n1 n1 n2 n2 n3 n3 " "srun -N3 --ntasks-per-node=2: two tasks on each node" || diag "$(cat "$dir/srun.err")"
if [ "$CLUSTER_MODE" = netns ]; then
    out=$(run_in_ctl srun -N3 --ntasks-per-node=2 hostname 2> "$dir/srun.err" | sort | tr '\n' ' ')
    is "$out" "n1 n1 n2 n2 n3 n3 " "srun -N3 --ntasks-per-node=2 hostname prints n1 n1 n2 n2 n3 n3" \
        || diag "$(cat "$dir/srun.err")"
else
    skip "hostname per node needs network namespaces (fallback mode)"
fi

# the partitions later tests use
out=$(run_in_ctl sinfo -h -o '%P %f' 2>&1 | awk '{print $1}' | sort | tr '\n' ' ')
is "$out" "high normal* " "partitions normal (default) and high"
run_in_ctl scontrol show config > "$dir/config.txt" 2>&1
grep -Eq '^PreemptType +=.*preempt/partition_prio' "$dir/config.txt" \
    && grep -Eq '^PreemptMode +=.*REQUEUE' "$dir/config.txt" \
    && grep -Eq '^JobRequeue += 1' "$dir/config.txt"
ok $? "preemption by partition priority with REQUEUE, JobRequeue=1"

# one task killed: srun reports it and ends the step (--kill-on-bad-exit)
(
    run_in_ctl srun -N3 --kill-on-bad-exit=1 sleep 600 > "$dir/kt.out" 2>&1
    echo $? > "$dir/kt.rc"
) &
wait_until 60 kill_task n3 'sleep 600' KILL
ok $? "kill_task n3 'sleep 600' KILL: a task process found and killed"
wait_for_file "$dir/kt.rc" 60
rc=$(cat "$dir/kt.rc" 2> /dev/null || echo none)
[ "$rc" != none ] && [ "$rc" != 0 ]
ok $? "srun ended with a failure (exit $rc)"
grep -q 'n3: task 2: Killed' "$dir/kt.out"
ok $? "srun reports 'n3: task 2: Killed'" || diag "$(cat "$dir/kt.out")"

# a batch job on all three nodes, then node n2 dies with all its processes
jobid=$(run_in_ctl sbatch --parsable -N3 --requeue -o /dev/null --wrap 'srun sleep 600' 2>&1)
wait_job_state "$jobid" RUNNING 60
ok $? "batch job $jobid runs on n[1-3]"
wait_until 60 sh -c "'$SLURM_CLUSTER_SH' pids '$dir' n2 | xargs -r -I{} cat /proc/{}/cmdline 2>/dev/null | tr '\0' ' ' | grep -q 'sleep 600'"
ok $? "its task runs on n2"
t0=$(now_ms)
kill_node n2
ok $? "kill_node n2 (SIGKILL to its slurmd and job processes)"
is "$("$SLURM_CLUSTER_SH" pids "$dir" n2)" "" "no process left on n2"
wait_node_state n2 DOWN 60
ok $? "Slurm declares n2 DOWN"
diag "n2 DOWN $(($(now_ms) - t0)) ms after its processes were killed"
wait_until 30 sh -c "'$SLURM_CLUSTER_SH' ctl '$dir' scontrol -o show job $jobid | grep -q 'Restarts=1'"
ok $? "its job $jobid was requeued (Restarts=1)"
run_in_ctl scancel "$jobid"

# the node comes back when its slurmd starts again (ReturnToService=1)
t0=$(now_ms)
start_node n2
wait_node_state n2 IDLE 60
ok $? "restarted n2 returns to IDLE"
diag "n2 IDLE $(($(now_ms) - t0)) ms after its slurmd was started"

# an instant failure by hand, and back
mark_down n3 "t6001"
wait_node_state n3 DOWN 10
ok $? "mark_down n3: DOWN"
run_in_ctl scontrol update nodename=n3 state=resume
wait_node_state n3 IDLE 30
ok $? "n3 resumed: IDLE"
out=$(run_in_ctl srun -N3 printenv SLURMD_NODENAME 2> "$dir/srun.err" | sort | tr '\n' ' ')
is "$out" "n1 n2 n3 " "all three nodes run tasks again" || diag "$(cat "$dir/srun.err")"

# teardown: nothing left
t0=$(now_ms)
cluster_down > "$dir.down.log" 2>&1
ok $? "cluster down" || diag "$(cat "$dir.down.log")"
diag "cluster down in $(($(now_ms) - t0)) ms"
rm -f "$dir.down.log"
left=$(grep -lzxF "ELASTIC_SLURM_CLUSTER=$dir" /proc/[0-9]*/environ 2> /dev/null)
is "$left" "" "no process of the cluster is left"
is "$(ip netns list 2> /dev/null | grep -c "^$prefix-")" 0 "no namespace of the cluster is left"
left=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "$dir/*" 2> /dev/null)
is "$left" "" "no process holds a file of the cluster open"
done_testing
