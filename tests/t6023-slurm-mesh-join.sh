#!/bin/bash
# t6023-slurm-mesh-join.sh - `elastic-exec --join JOBID.STEP` on the
# emulated 3-node cluster (src/exec/meshjoin.c, doc/mesh.md "Members
# joining by --join"): an allocation of the 3 nodes (salloc --no-shell);
# its step on n1 and n2 is an MPI job in mesh mode (heat2d, 2 x 2 ranks,
# the members authenticated by munge); a later step of the same job on n3
# runs `elastic-exec --join J.S`:
#
#   1. join: garbage on n1's mesh port and a stranger (a joiner with a
#      secret, where the members use munge) are refused without harming
#      the job; then the joiner (a step of two tasks on n3: its leader
#      joins, the other task follows it) is admitted as member 2: n1 and n2 log
#      member_joined (member 2) in their event logs, n1's /metrics counts
#      3 members alive; the job ends with the failure-free checksum, srun
#      exit 0; the joiner exits 0 too, its two tasks printing the same
#      summary line as the two members;
#   2. the joined member lost: its elastic-exec SIGKILLed on n3: n1 and n2
#      log node_lost for member 2, the job goes on and ends with the
#      failure-free checksum, exit 0 (the summary names the joined
#      member lost, with no rank); a second joiner is then refused (the
#      step was started with ELASTIC_MESH_JOIN_SLOTS=1: the one absent
#      slot was taken, and a lost slot is never given again): exit 2, one
#      line saying there is no room;
#   3. a member done before the joiner came: n2's ranks
#      SIGKILLed, n2's member says it is done and waits; the joiner,
#      linked after that, is told again by n2's member; the job, the
#      joiner and both members end with exit 0 and one summary line;
#   4. refusals: a --join value that does not parse (exit 2, naming it
#      and the accepted form), a job that does not exist (exit 2, "no such
#      running job step"), a step that does not run elastic-exec in mesh
#      mode (exit 2, "no member of the step listens").
. "${srcdir:-.}/lib/slurm.sh"
. "${srcdir:-.}/lib/slurm-mesh.sh"

mesh_prelude t6023
HEAT_ARGS="--nx 64 --ny 48"
STEPS=6000
mesh_reference
# the members authenticate with munge (the cluster's munged)
unset ELASTIC_MESH_SECRET ELASTIC_MESH_SECRET_FILE
mesh_cluster_up 3
COMMON=(--oversubscribe --node-timeout 1)

# the allocation: 3 nodes, no shell; its steps are numbered 0, 1, ...
mesh_salloc t6023

# base NAME [ENV...]: a step of job J on n1, n2 (2 x 2 heat2d ranks);
# STEP its id (from its members' "mesh mode: slurm.J.S" line)
base() {
    local name=$1
    shift
    srun_bg "$name" --jobid="$J" -N2 -w n1,n2 --ntasks-per-node=1 env "$@" \
        "$EXEC" "${COMMON[@]}" -v --nproc-per-node 2 --health-port 29556 \
        --event-log "$tmp/ev.$name" "$HEAT" $HEAT_ARGS --steps $STEPS --progress 100 --sleep 4
    wait_for_grep '^step 300$' "$tmp/$name.out" 120 || return 1
    STEP=$(grep -a 'info: mesh mode: slurm\.' "$tmp/$name.out" | sed -n 's/.*mesh mode: slurm\.[0-9]*\.\([0-9]*\):.*/\1/p' | head -n 1)
    [ -n "$STEP" ]
}
# joiner NAME STEP ARGS...: a step of job J on n3 (srun ARGS) joining
# step STEP, with room for 2 ranks ($NPROC, else its 2 tasks)
NPROC=(--nproc-per-node 2)
joiner() {
    local name=$1 step=$2
    shift 2
    srun_bg "$name" --jobid="$J" -N1 -w n3 "$@" "$EXEC" -v --node-timeout 1 \
        --join "$J.$step" "${NPROC[@]}"
}
# joined NAME: n1's and n2's members logged member_joined for member 2
# (their events in one file: the nodes share /tmp)
joined() { ev_both "$1" member_joined '"member":2,'; }
lost2() { ev_both "$1" node_lost '"member":2,'; }
checksum() { tr -d '\0' < "$tmp/$1.out" | sed -n 's/^checksum //p'; }
# ended NAME COUNT WHO SUMMARY: the job NAME and its joiner NAMEB end
# with exit 0 and the failure-free checksum; COUNT summary lines (WHO's)
# are one and the same: "elastic-exec: job slurm.J.S: SUMMARY"
ended() {
    local name=$1 sums
    wait_for_file "$tmp/$name.rc" 300
    is "$(cat "$tmp/$name.rc" 2> /dev/null)" 0 "$name: the job's srun exit 0" || diag "$(show "$name" 30)"
    is "$(checksum "$name")" "$ref" "$name: the failure-free checksum ($ref)"
    wait_for_file "$tmp/${name}B.rc" 120
    is "$(cat "$tmp/${name}B.rc" 2> /dev/null)" 0 "$name: the joiner exits 0" || diag "$(show "${name}B" 30)"
    sums=$( (summaries "$name" && summaries "${name}B") | tr -d '\0')
    is "$(echo "$sums" | sort -u | wc -l) $(echo "$sums" | wc -l)" "1 $2" \
        "$name: $3 print one and the same summary line" || diag "$sums"
    is "$(echo "$sums" | head -n 1)" "elastic-exec: job slurm.$J.$STEP: $4" "$name: it says $4"
}
metrics() {
    nsenter --net="/run/netns/$(sed -n 's/^PREFIX=//p' "$CLUSTER_DIR/cluster.env")-n1" \
        curl -s --max-time 10 http://127.0.0.1:29556/metrics 2> /dev/null
}

# 1. join
base join
ok $? "join: the job (step $J.$STEP on n1, n2) computes" || diag "$(show join)"
port=$(grep -a 'info: mesh mode: ' "$tmp/join.out" | grep -a 'node 0 ' | sed -n 's/.*ports \([0-9]*\).*/\1/p' | head -n 1)
a1=$(on_node n1 ip -4 -o addr show eth0 | sed -n 's|.* inet \([0-9.]*\)/.*|\1|p' | head -n 1)
if [ -n "$port" ] && [ -n "$a1" ]; then
    on_node n3 timeout 10 bash -c "exec 3<>/dev/tcp/$a1/$port && printf 'GET / HTTP/1.0\r\nHost: x\r\n\r\nMESHMESHMESH' >&3" \
        > "$tmp/garbage.out" 2>&1
    wait_for_grep 'mesh 0: dropped connection [0-9.:]* (not authenticated): bad magic' "$tmp/join.out" 30
    ok $? "join: garbage sent to n1's mesh port ($a1:$port) from n3 is dropped" ||
        diag "$(cat "$tmp/garbage.out")" "$(grep -a dropped "$tmp/join.out")"
else
    ok 0 "join: n1's mesh port and address (${port:-?}, ${a1:-?})" || diag "$(grep -a 'mesh mode' "$tmp/join.out")"
fi
joiner stranger "$STEP" --ntasks-per-node=1 env ELASTIC_MESH_SECRET=not.the.job
wait_for_file "$tmp/stranger.rc" 120
is "$(cat "$tmp/stranger.rc" 2> /dev/null)" 2 "join: a stranger (a secret where the members use munge) is refused, exit 2" ||
    diag "$(show stranger)"
grep -aq "elastic-exec: --join $J.$STEP: no member of the step admitted this one" "$tmp/stranger.out"
ok $? "join: ... saying no member admitted it" || diag "$(show stranger 5)"
# (two tasks: the node's leader joins, the other task follows it)
NPROC=()
joiner joinB "$STEP" --ntasks-per-node=2
NPROC=(--nproc-per-node 2)
wait_until 120 joined join
ok $? "join: n1 and n2 log member_joined for member 2" || diag "$(show joinB)" "$(show join)"
wait_for_grep 'elastic-exec: joined job' "$tmp/joinB.out" 30
grep -aq "elastic-exec: joined job slurm\.$J\.$STEP as member 2 (no ranks; room for 2)" "$tmp/joinB.out"
ok $? "join: the joiner says it joined as member 2 with room for 2 ranks" || diag "$(show joinB)"
if [ "$CLUSTER_MODE" = netns ] && command -v curl > /dev/null; then
    metrics > "$tmp/metrics.join"
    grep -qx 'elastic_mesh_members_alive 3' "$tmp/metrics.join"
    ok $? "join: n1's /metrics counts 3 members alive" || diag "$(grep mesh_members "$tmp/metrics.join")"
else
    skip "join: /metrics of a node needs the netns cluster and curl"
fi
ended join 4 "the two members and the joiner's two tasks" \
    "4 ranks on 2 nodes, 1 node joined; 0 nodes lost, 0 ranks lost; completed (exit 0)"
n=$(grep -c '"event":"node_lost"' "$tmp/ev.join" 2> /dev/null)
is "$n" 0 "join: nobody was lost (the garbage and the stranger harmed nothing)"

# 2. the joined member lost (the job with one absent slot, a joiner, a
# second joiner).  The job runs 4 times as many steps: the joined member
# must be killed, and found lost, while the job computes.  With 6000 steps
# a join slowed by the machine's load (up to 120 s allowed) left a CI run
# killing the joiner as the job ended: no node_lost, only the summary's
# loss.
LONG_STEPS=$((STEPS * 4))
ref_long=$("$HEAT" $HEAT_ARGS --steps $LONG_STEPS 2>&1 | sed -n 's/^checksum //p')
STEPS=$LONG_STEPS base lost ELASTIC_MESH_JOIN_SLOTS=1
ok $? "lost: the job (step $J.$STEP, one slot for a joiner) computes" || diag "$(show lost)"
joiner lostB "$STEP" --ntasks-per-node=1
wait_until 120 joined lost
ok $? "lost: n1 and n2 log member_joined for member 2" || diag "$(show lostB)"
killed=0
for p in $("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" n3); do
    [ "$(cat "/proc/$p/comm" 2> /dev/null)" = elastic-exec ] && kill -KILL "$p" && killed=$((killed + 1))
done
[ "$killed" -ge 1 ] && [ ! -e "$tmp/lost.rc" ]
ok $? "lost: the joiner's elastic-exec on n3 SIGKILLed ($killed) while the job computes"
wait_until 60 lost2 lost
ok $? "lost: n1 and n2 log node_lost for member 2" || diag "$(grep node_lost "$tmp/ev.lost" 2>&1)"
wait_for_file "$tmp/lostB.rc" 60
joiner lostC "$STEP" --ntasks-per-node=1
wait_for_file "$tmp/lostC.rc" 120
is "$(cat "$tmp/lostC.rc" 2> /dev/null)" 2 "lost: a second joiner is refused, exit 2" || diag "$(show lostC)"
grep -aq "refused by node n[12] (member [01]): no room: the job has taken in all the members it can" "$tmp/lostC.out"
ok $? "lost: ... no room (its one slot was taken, and a lost slot is never given again)" || diag "$(show lostC 5)"
wait_for_file "$tmp/lost.rc" 300
is "$(cat "$tmp/lost.rc" 2> /dev/null)" 0 "lost: the job goes on: srun exit 0" || diag "$(show lost 30)"
is "$(checksum lost)" "$ref_long" "lost: the failure-free checksum"
is "$(summaries lost | sort -u | wc -l) $(summaries lost | wc -l)" "1 2" "lost: the two members print one summary line" ||
    diag "$(summaries lost)"
# (named by its node once it said its room, by its address before)
summaries lost | head -n 1 | grep -Eq "job slurm\.$J\.$STEP: 4 ranks on 2 nodes, 1 node joined; 1 node lost \(joined: (n3|[0-9.]+)\), 0 ranks lost; completed \(exit 0\)$"
ok $? "lost: it says the joined member on n3 was lost, with no rank (exit 0)" || diag "$(summaries lost)"

# 3. a member done before the joiner came: n2's two ranks SIGKILLed (n1's
# recover 4 -> 2 in place; n2's member, its ranks gone, says it is done
# and waits); the joiner links after that saying went round, so n2's
# member says it again to the newcomer; every member, the joiner
# included, ends with one summary line.  (Here the mesh's re-flood of
# its last 64 broadcasts at link-up brings the first saying too; the
# retelling is what still works when more than 64 came in between.)
base late
ok $? "late: the job (step $J.$STEP) computes" || diag "$(show late)"
killed=0
for p in $("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" n2); do
    [ "$(cat "/proc/$p/comm" 2> /dev/null)" = heat2d ] && kill -KILL "$p" && killed=$((killed + 1))
done
is "$killed" 2 "late: n2's two ranks SIGKILLed"
wait_for_grep "mesh 1: this member's ranks are gone (2 lost, 0 failed)" "$tmp/late.out" 60
ok $? "late: n2's member says its ranks are gone and waits" || diag "$(show late)"
joiner lateB "$STEP" --ntasks-per-node=1
wait_for_grep 'mesh 1: member 2 joined after this member was done: told it again' "$tmp/late.out" 120
ok $? "late: n2's member tells the joiner (member 2) again that it is done" ||
    diag "$(show late)" "$(show lateB)"
ended late 3 "the two members and the joiner" \
    "4 ranks on 2 nodes, 1 node joined; 0 nodes lost, 2 ranks lost; completed after in-place recovery (exit 0)"

# 4. refusals
"$EXEC" --join 12x ./app > "$tmp/bad.out" 2>&1
is "$?" 2 "refusal: --join 12x: exit 2"
grep -q "^elastic-exec: --join: '12x' is not a job step (expected JOBID or JOBID.STEP, e.g. 1234 or 1234.0)$" "$tmp/bad.out"
ok $? "refusal: ... naming the value and the accepted form" || diag "$(cat "$tmp/bad.out")"
srun_fg nojob --jobid="$J" -N1 -w n3 "$EXEC" --join 999999.0
is "$SRUN_RC" 2 "refusal: a job that does not exist: exit 2" || diag "$(show nojob)"
grep -aq "elastic-exec: --join 999999.0: no such running job step" "$tmp/nojob.out"
ok $? "refusal: ... no such running job step" || diag "$(show nojob 5)"
srun_bg plain --jobid="$J" -N1 -w n1 sleep 60
plain_step() { run_in_ctl squeue -h -s -j "$J" -o '%i %j' 2> /dev/null | sed -n 's/^\([0-9.]*\) sleep$/\1/p' | head -n 1; }
wait_until 60 eval '[ -n "$(plain_step)" ]'
S=$(plain_step)
srun_fg notmesh --jobid="$J" -N1 -w n3 "$EXEC" --join "${S:-$J.99}"
is "$SRUN_RC" 2 "refusal: a step that does not run elastic-exec ($S: sleep): exit 2" || diag "$(show notmesh)"
grep -aq "no member of the step listens on its nodes" "$tmp/notmesh.out"
ok $? "refusal: ... no member of the step listens" || diag "$(show notmesh 5)"
run_in_ctl scancel "$J" > /dev/null 2>&1
done_testing
