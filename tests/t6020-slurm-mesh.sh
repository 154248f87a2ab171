#!/bin/bash
# t6020-slurm-mesh.sh - `srun elastic-exec ./heat2d` on the emulated 3-node
# cluster in mesh mode (the default under srun): the nodes' elastic-exec
# join in one job over the mesh (src/exec/meshjob.c, doc/mesh.md), host
# the PMIx server of their node's ranks, and recover in place across
# nodes.
#
#   1. one task per node, two ranks each (--nproc-per-node 2): the
#      failure-free checksum, exit 0, the same summary line from every
#      member, the agreed result in --status-file; no secret is set, the
#      members authenticate each other with munge;
#   1b. a member that comes late (n3's elastic-exec starts 2 s after the
#      others): no rank of any node starts before every member is up (the
#      launch barrier: mesh_launch made with 3 members), so no rank waits
#      in MPI_Init for a node the launcher has not reached; the checksum;
#   2. one task per rank (--ntasks-per-node=2): the node's task 0 starts
#      its ranks, the other task follows it; the same checksum and line;
#      the mesh on the ports Slurm reserved for the step (--resv-ports);
#   3. a rank SIGKILLed on n2 (the step started with --mpi=pmix, whose
#      variables the ranks ignore): one reshard 6 -> 5 on every survivor, the
#      failure-free checksum, srun exit 0, every member reports one rank
#      lost and "completed after in-place recovery"; the other members'
#      event logs have rank_failed for it;
#   4. every process of n2 SIGKILLed: the other members lose n2 at once
#      (node_lost), its ranks are reported failed to theirs;
#   5. n2's network cut (its veth down): the others lose it within
#      --node-timeout, n2's member kills its own ranks (self_fence);
#   6. neither a secret nor munged: one clear line and exit 2 before
#      anything runs;
#   7. preemption (scancel -s USR1): every member agrees on 75 (srun's
#      exit, --status-file); the job resumes from HDF5 on 2 nodes;
#   8. the same job with torchrun's flags (--nnodes/--node-rank/
#      --rdzv-endpoint) started in the nodes' namespaces, without Slurm.
. "${srcdir:-.}/lib/slurm.sh"
. "${srcdir:-.}/lib/slurm-mesh.sh"

mesh_prelude t6020
HEAT_ARGS="--nx 64 --ny 48"
ref() { "$HEAT" $HEAT_ARGS --steps "$1" 2>&1 | sed -n 's/^checksum //p'; }
ref300=$(ref 300)
[ -n "$ref300" ] || {
    echo "not ok 1 - heat2d runs as a singleton"
    exit 1
}
mesh_cluster_up 3
# the ranks' BTLs are mesh mode's default: sm within a node, tcp between
COMMON=(--oversubscribe --node-timeout 1)

# 1. one task per node; no secret: the members authenticate with munge
# (the cluster's munged, found through AuthInfo in $SLURM_CONF)
ELASTIC_MESH_SECRET= srun_fg node -N3 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" --nproc-per-node 2 \
    --status-file "$tmp/status" "$HEAT" $HEAT_ARGS --steps 300
is "$SRUN_RC" 0 "node shape: srun -N3 --ntasks-per-node=1 elastic-exec --nproc-per-node 2 heat2d: exit 0" ||
    diag "$(show node)"
grep -aq '^heat2d: 64x48 grid, 300 steps, 6 ranks' "$tmp/node.out"
ok $? "node shape: one MPI job of 6 ranks across n1, n2, n3"
is "$(tr -d '\0' < "$tmp/node.out" | sed -n 's/^checksum //p')" "$ref300" "node shape: the failure-free checksum ($ref300)"
is "$(summaries node | sort -u | wc -l) $(summaries node | wc -l)" "1 3" \
    "node shape: the 3 members print one and the same summary line" || diag "$(summaries node)"
summaries node | head -n 1 | grep -q '6 ranks on 3 nodes; 0 nodes lost, 0 ranks lost; completed (exit 0)$'
ok $? "node shape: it says 6 ranks on 3 nodes, nothing lost, completed (exit 0)"
# every member writes the same line (here to one file: a shared /tmp)
grep -q '^0 job slurm\.[0-9]*\.0: 6 ranks on 3 nodes;' "$tmp/status" 2> /dev/null
ok $? "node shape: --status-file holds the agreed result (exit 0 first)" || diag "$(cat "$tmp/status" 2>&1)"

# 1b. a late member: a wrapper holds n3's elastic-exec back 2 s (as a
# launcher that reaches one node late); the ranks of n1 and n2 must not
# start before n3's member is up (its agent_start event; one clock: the
# nodes are namespaces of one kernel)
srun_fg late -N3 --ntasks-per-node=1 sh -c '[ "$SLURM_NODEID" != 2 ] || sleep 2; exec "$@"' late \
    "$EXEC" "${COMMON[@]}" --nproc-per-node 2 --event-log "$tmp/ev.late" "$HEAT" $HEAT_ARGS --steps 300
is "$SRUN_RC" 0 "late member: n3's elastic-exec 2 s late: exit 0" || diag "$(show late)"
is "$(tr -d '\0' < "$tmp/late.out" | sed -n 's/^checksum //p')" "$ref300" "late member: the failure-free checksum"
# ev_ts HOST EVENT: the first EVENT's time of HOST's member
ev_ts() { grep "\"event\":\"$2\"" "$tmp/ev.late" | grep "\"host\":\"$1\"" | head -n 1 | sed -n 's/^{"ts":\([0-9.]*\),.*/\1/p'; }
t3=$(ev_ts n3 agent_start)
early=
for n in n1 n2 n3; do
    ts=$(ev_ts "$n" workers_started)
    awk -v a="$ts" -v b="$t3" 'BEGIN { exit !(a != "" && b != "" && a + 0 >= b + 0) }' || early="$early $n:$ts"
done
is "$early" "" "late member: no node started its ranks before n3's member was up ($t3)" ||
    diag "$(grep -h -e agent_start -e workers_started -e mesh_launch "$tmp/ev.late" | cut -c1-160)"
is "$(grep '"event":"mesh_launch"' "$tmp/ev.late" | grep -c '"result":"made","members":3,')" 3 \
    "late member: every member's launch barrier was made with the 3 members" ||
    diag "$(grep -h mesh_launch "$tmp/ev.late")"

# 2. one task per rank
# (on the ports Slurm reserves for the step: MpiParams=ports= in the
# cluster's slurm.conf, srun --resv-ports)
srun_fg rank --resv-ports=4 -N3 --ntasks-per-node=2 "$EXEC" "${COMMON[@]}" -v "$HEAT" $HEAT_ARGS --steps 300
is "$SRUN_RC" 0 "rank shape: srun -N3 --ntasks-per-node=2 elastic-exec heat2d: exit 0" || diag "$(show rank)"
is "$(tr -d '\0' < "$tmp/rank.out" | sed -n 's/^checksum //p')" "$ref300" "rank shape: the failure-free checksum"
is "$(summaries rank | sort -u | wc -l) $(summaries rank | wc -l)" "1 6" \
    "rank shape: all 6 tasks (3 leaders, 3 followers) print the same summary line" || diag "$(summaries rank)"
is "$(grep -a 'info: mesh mode: ' "$tmp/rank.out" | grep -c 'ports 2000[0-9],[0-9,]* (reserved)$')" 3 \
    "rank shape: the 3 leaders listen on a port Slurm reserved (SLURM_STEP_RESV_PORTS)" ||
    diag "$(grep -a 'mesh mode' "$tmp/rank.out")"
leftover=$(ls -d /tmp/elastic-"$(id -u)".slurm.* 2> /dev/null)
is "$leftover" "" "rank shape: the node directories of leaders and followers are gone"

# 3. a rank killed on n2
STEPS=3000
ref3=$(ref $STEPS)
# (with --mpi=pmix where Slurm has it: its PMIx server runs, the ranks
# ignore it)
MPI_PMIX=()
slurm_has_pmix && MPI_PMIX=(--mpi=pmix)
# (ELASTIC_GROW_POLICY=never: the job stays at 5; t6025 grows it back)
ELASTIC_GROW_POLICY=never srun_bg kill "${MPI_PMIX[@]}" -N3 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" --nproc-per-node 2 \
    --health-port 29555 --event-log "$tmp/ev.kill.%h" "$HEAT" $HEAT_ARGS --steps $STEPS \
    --progress 100 --sleep 1
wait_for_grep '^step 300$' "$tmp/kill.out" 120
ok $? "kill: the job computes" || diag "$(show kill)"
# n1's /metrics (from inside its namespace)
metrics() {
    nsenter --net="/run/netns/$(sed -n 's/^PREFIX=//p' "$CLUSTER_DIR/cluster.env")-n1" \
        curl -s --max-time 10 http://127.0.0.1:29555/metrics 2> /dev/null
}
if [ "$CLUSTER_MODE" = netns ] && command -v curl > /dev/null; then
    metrics > "$tmp/metrics.1"
    grep -qx 'elastic_mesh_members_alive 3' "$tmp/metrics.1" &&
        grep -q '^elastic_mesh_heartbeat_age_seconds{member="[12]",node="n[23]"} [0-9.]*$' "$tmp/metrics.1"
    ok $? "kill: n1's /metrics: 3 members alive, a heartbeat age per tree neighbour" ||
        diag "$(grep mesh "$tmp/metrics.1")"
else
    skip "kill: /metrics of a node needs the netns cluster and curl"
fi
kill_one_rank n2
ok $? "kill: one heat2d rank on n2 SIGKILLed (its elastic-exec and the other rank live)"
wait_for_file "$tmp/kill.rc" 240
is "$(cat "$tmp/kill.rc" 2> /dev/null)" 0 "kill: srun exit 0" || diag "$(show kill 40)"
is "$(tr -d '\0' < "$tmp/kill.out" | sed -n 's/^checksum //p')" "$ref3" "kill: the failure-free checksum ($ref3)"
grep -aq '^resharded at step [0-9]*: world 6 -> 5$' "$tmp/kill.out" && grep -aq '^final world 5' "$tmp/kill.out"
ok $? "kill: the survivors resharded 6 -> 5 in place and finished" || diag "$(show kill 40)"
is "$(summaries kill | sort -u | wc -l) $(summaries kill | wc -l)" "1 3" "kill: one summary line, from the 3 members"
summaries kill | head -n 1 | grep -q '0 nodes lost, 1 rank lost; completed after in-place recovery (exit 0)$'
ok $? "kill: it says 1 rank lost, completed after in-place recovery (exit 0)" || diag "$(summaries kill)"
n=$(cat "$tmp"/ev.kill.* 2> /dev/null | grep -c '"event":"rank_failed"')
is "$n" 2 "kill: the two other members logged rank_failed for it" || diag "$(grep -h rank_failed "$tmp"/ev.kill.* 2>&1)"

# node_case NAME HOW: n2 lost while the job runs (HOW: kill or cut)
node_case() {
    local name=$1 how=$2 t0 t_lost
    srun_bg "$name" -N3 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" --nproc-per-node 2 \
        --event-log "$tmp/ev.$name.%h" "$HEAT" $HEAT_ARGS --steps $STEPS --progress 100 --sleep 1
    wait_for_grep '^step 300$' "$tmp/$name.out" 120
    ok $? "$name: the job computes" || diag "$(show "$name")"
    t0=$(now_ms)
    if [ "$how" = kill ]; then
        kill_node n2
        ok $? "$name: every process of n2 SIGKILLed"
    else
        ip -n "$(sed -n 's/^PREFIX=//p' "$CLUSTER_DIR/cluster.env")-ctl" link set veth2 down
        ok $? "$name: n2's link cut (veth2 down)"
    fi
    wait_until 30 sh -c "cat '$tmp'/ev.$name.* | grep '\"event\":\"node_lost\"' | grep -c '\"node\":\"n2\"' | grep -qx 2"
    ok $? "$name: both other members lost n2 (node_lost)" || diag "$(grep -h node_lost "$tmp"/ev."$name".* 2>&1)"
    t_lost=$(now_ms)
    diag "$name: n2 lost -> both members knew: $((t_lost - t0)) ms (node timeout 1 s)"
    if [ "$how" = cut ]; then
        wait_until 30 sh -c "grep -q '\"event\":\"self_fence\"' '$tmp'/ev.$name.* 2>/dev/null"
        ok $? "$name: n2's member fenced itself (its ranks killed)" || diag "$(show "$name" 40)"
        wait_until 30 no_heat_on n2
        ok $? "$name: no rank is left on n2"
    fi
    if wait_for_file "$tmp/$name.rc" 90 && [ "$(cat "$tmp/$name.rc")" = 0 ] &&
        [ "$(tr -d '\0' < "$tmp/$name.out" | sed -n 's/^checksum //p')" = "$ref3" ]; then
        ok 0 "$name: the survivors recovered in place (6 -> 4) with the failure-free checksum"
    else
        ok 1 "$name: the survivors recovered in place (6 -> 4) with the failure-free checksum"
        diag "$(show "$name" 40)"
    fi
    grep -aq '^resharded at step [0-9]*: world 6 -> 4$' "$tmp/$name.out"
    ok $? "$name: one reshard, 6 -> 4"
    [ "$how" = cut ] && ip -n "$(sed -n 's/^PREFIX=//p' "$CLUSTER_DIR/cluster.env")-ctl" link set veth2 up
    node_back n2
}
node_case nodekill kill
node_case cut cut

# 7. preemption: scancel -s USR1 -> the ranks suspend to HDF5, every member
# agrees on 75; then the same job resumes on 2 nodes (4 ranks)
ELASTIC_RUN_ID=t6020pre srun_bg pre -N3 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" --nproc-per-node 2 \
    --status-file "$tmp/status.pre" "$HEAT" $HEAT_ARGS --steps $STEPS --progress 100 \
    --sleep 1 --snapshot-dir "$tmp/snap" --persist-period 1000000
wait_for_grep '^step 300$' "$tmp/pre.out" 120
ok $? "preempt: the job computes" || diag "$(show pre)"
job=$(run_in_ctl squeue -h -o %i | head -n 1)
run_in_ctl scancel -s USR1 "$job"
ok $? "preempt: scancel -s USR1 $job"
wait_for_file "$tmp/pre.rc" 120
is "$(cat "$tmp/pre.rc" 2> /dev/null)" 75 "preempt: srun exits 75" || diag "$(show pre 30)"
is "$(summaries pre | sort -u | wc -l) $(summaries pre | wc -l)" "1 3" "preempt: one summary line from the 3 members"
grep -q '^75 job slurm\.[0-9]*\.0: .*suspended (exit 75: resume it)' "$tmp/status.pre" 2> /dev/null
ok $? "preempt: --status-file says 75, suspended" || diag "$(cat "$tmp/status.pre" 2>&1)"
ELASTIC_RESUME=1 ELASTIC_RUN_ID=t6020pre srun_fg resume -N2 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" \
    --nproc-per-node 2 "$HEAT" $HEAT_ARGS --steps $STEPS --snapshot-dir "$tmp/snap"
is "$SRUN_RC" 0 "resume: srun -N2 (4 ranks) exit 0" || diag "$(show resume 30)"
grep -aq '^resumed from step [1-9][0-9]* .*world [0-9]* -> 4' "$tmp/resume.out"
ok $? "resume: resumed from the suspended step on 4 ranks" || diag "$(grep -a resumed "$tmp/resume.out")"
is "$(tr -d '\0' < "$tmp/resume.out" | sed -n 's/^checksum //p')" "$ref3" "resume: the failure-free checksum"

# 8. torchrun's flags inside the nodes' namespaces, without Slurm: each
# node's elastic-exec started by hand (nsenter), the rendezvous at n1
prefix=$(sed -n 's/^PREFIX=//p' "$CLUSTER_DIR/cluster.env")
for k in 2 1 0; do
    (
        rc=0
        timeout --kill-after=10 240 nsenter --net="/run/netns/$prefix-n$((k + 1))" "$EXEC" \
            --nnodes 3 --node-rank $k --rdzv-endpoint 10.77.0.11:29400 --nproc-per-node 2 \
            "${COMMON[@]}" "$HEAT" $HEAT_ARGS --steps 300 > "$tmp/tr.$k" 2>&1 || rc=$?
        echo $rc > "$tmp/tr.$k.rc"
    ) &
done
for k in 0 1 2; do wait_for_file "$tmp/tr.$k.rc" 240; done
is "$(cat "$tmp"/tr.[012].rc | tr '\n' ' ')" "0 0 0 " \
    "torchrun flags in the namespaces: the three elastic-exec exit 0" || diag "$(tail -n 5 "$tmp"/tr.[012])"
is "$(cat "$tmp"/tr.[012] | sed -n 's/^checksum //p')" "$ref300" \
    "torchrun flags in the namespaces: one job of 6 ranks across n1..n3, the failure-free checksum"
grep -h '^elastic-exec: job torchrun\.' "$tmp"/tr.[012] | sort -u | grep -q '6 ranks on 3 nodes; 0 nodes lost'
ok $? "torchrun flags in the namespaces: the same summary from every node"

# 6. neither a secret nor munged
(
    unset ELASTIC_MESH_SECRET
    export ELASTIC_MUNGE_SOCKET=$tmp/no-munged.socket
    timeout 120 "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" srun -N2 --ntasks-per-node=1 "$EXEC" \
        --nproc-per-node 1 "$HEAT" --steps 10 > "$tmp/nosecret.out" 2>&1
    echo "rc=$?" >> "$tmp/nosecret.out"
)
grep -q '^rc=2$' "$tmp/nosecret.out" && grep -q 'ELASTIC_MESH_SECRET' "$tmp/nosecret.out" &&
    ! grep -q '^heat2d:' "$tmp/nosecret.out"
ok $? "neither a secret nor munged: exit 2 with one line naming ELASTIC_MESH_SECRET and munged; nothing ran" || diag "$(cat "$tmp/nosecret.out")"
done_testing
