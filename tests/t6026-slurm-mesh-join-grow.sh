#!/bin/bash
# t6026-slurm-mesh-join-grow.sh - a job under `srun elastic-exec` (mesh
# mode) grows onto a node it was not running on: a member that joined by
# `elastic-exec --join` (issue #15; src/exec/meshjoin.c,
# src/exec/pmix/pmix_grow.c), on the emulated 3-node cluster:
#
#   an allocation of the 3 nodes (salloc --no-shell); its step on n1, n2
#   and n3 is heat2d, 3 x 2 ranks;
#   1. n3 lost: its elastic-exec and ranks SIGKILLed: n1 and n2 recover
#      in place (6 -> 4); n1 and n2 have no free slot, so the job stays
#      at 4;
#   2. a new member: a later step of the job on n3 runs `elastic-exec
#      --join J.S --nproc-per-node 2`; it is admitted as member 3 and says
#      it has 2 free slots (naming its node); the job spawns 2 new
#      processes there (ranks 6, 7: workers_spawn_placed on n3, member 3;
#      the joiner logs workers_spawned), libelastic grows 4 -> 6;
#   3. the joined member lost: its elastic-exec and its 2 ranks SIGKILLed
#      once the 6 ranks compute: n1's and n2's ranks recover (6 -> 4) and
#      the job ends with the failure-free checksum in a world of 4 (the
#      members' result: exit 0; their summary counts n3 lost twice, as
#      a node of the job and as the joined member, 4 ranks lost); n1 and
#      n2 logged node_lost for member 3 with its 2 spawned ranks.
#   4. a joiner that is never used: the same job with no loss, a joiner
#      on n3: nothing is spawned there, and the joiner ends with the job
#      (exit 0, the members' summary line: "1 node joined").
. "${srcdir:-.}/lib/slurm.sh"
. "${srcdir:-.}/lib/slurm-mesh.sh"

mesh_prelude t6026
HEAT_ARGS="--nx 64 --ny 48"
STEPS=12000
mesh_reference
mesh_cluster_up 3
COMMON=(--oversubscribe --mpi-btl tcp --node-timeout 1)

mesh_salloc t6026

checksum_of() { tr -d '\0' < "$tmp/$1.out" | sed -n 's/^checksum //p'; }
# kill_step_on NODE: SIGKILL the step's elastic-exec and heat2d on NODE
kill_step_on() {
    local p n=0
    for p in $("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" "$1"); do
        case "$(cat "/proc/$p/comm" 2> /dev/null)" in
            elastic-exec | heat2d) kill -KILL "$p" 2> /dev/null && n=$((n + 1)) ;;
        esac
    done
    [ "$n" -ge 1 ]
}
# base NAME: the step on n1, n2, n3 (3 x 2 heat2d ranks); STEP its id
base() {
    local name=$1
    srun_bg "$name" --jobid="$J" -N3 -w n1,n2,n3 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" -v \
        --nproc-per-node 2 --event-log "$tmp/ev.$name" "$HEAT" $HEAT_ARGS --steps $STEPS \
        --progress 100 --sleep 4
    wait_for_grep '^step 300$' "$tmp/$name.out" 120 || return 1
    STEP=$(grep -a 'info: mesh mode: slurm\.' "$tmp/$name.out" | sed -n 's/.*mesh mode: slurm\.[0-9]*\.\([0-9]*\):.*/\1/p' | head -n 1)
    [ -n "$STEP" ]
}
# joiner NAME: a step of job J on n3 joining step STEP with room for 2
joiner() {
    srun_bg "$1" --jobid="$J" -N1 -w n3 --ntasks-per-node=1 --overlap "$EXEC" -v --oversubscribe \
        --node-timeout 1 --event-log "$tmp/ev.$1" --join "$J.$STEP" --nproc-per-node 2
}

# 1. n3 lost
base grow
ok $? "the job (step $J.${STEP:-?} on n1, n2, n3: 6 ranks) computes" || diag "$(show grow)"
kill_step_on n3
ok $? "n3 lost: its elastic-exec and ranks SIGKILLed"
wait_for_grep '^resharded at step [0-9]*: world 6 -> 4$' "$tmp/grow.out" 120
ok $? "n1 and n2 recovered in place (6 -> 4)" || diag "$(show grow 40)"

# 2. a new member on n3
joiner joinB
wait_for_grep 'elastic-exec: joined job' "$tmp/joinB.out" 120
grep -aq "elastic-exec: joined job slurm\.$J\.$STEP as member 3 (no ranks; room for 2)" "$tmp/joinB.out"
ok $? "the joiner on n3 joined as member 3 with room for 2 ranks" || diag "$(show joinB)"
wait_for_grep '^resharded at step [0-9]*: world 4 -> 6$' "$tmp/grow.out" 180
ok $? "the job grew 4 -> 6 with new processes" || diag "$(show grow 40)" "$(show joinB 40)"
grep '"event":"workers_spawn_placed"' "$tmp/ev.grow" | grep '"node":"n3"' | grep -q '"member":3'
ok $? "the spawn was placed on n3, member 3, the joined member (workers_spawn_placed)" ||
    diag "$(grep spawn "$tmp/ev.grow")"
grep '"event":"workers_spawned"' "$tmp/ev.joinB" | grep -q '"ranks":\[6,7\]'
ok $? "the joiner started ranks 6 and 7 (workers_spawned)" || diag "$(grep spawn "$tmp/ev.joinB")"
s=$(sed -n 's/^resharded at step \([0-9]*\): world 4 -> 6$/\1/p' "$tmp/grow.out" | head -n 1)
wait_for_grep "^step $(((s / 100 + 2) * 100))\$" "$tmp/grow.out" 120
ok $? "the 6 ranks compute" || diag "$(show grow 40)"

# 3. the joined member lost
kill_step_on n3
ok $? "the joined member lost: its elastic-exec and its 2 ranks SIGKILLed"
twice() { [ "$(grep -ac '^resharded at step [0-9]*: world 6 -> 4$' "$tmp/grow.out")" -ge 2 ]; }
wait_until 120 twice
ok $? "n1's and n2's ranks recovered again (6 -> 4)" || diag "$(grep -a resharded "$tmp/grow.out")"
wait_until 60 ev_both grow node_lost '"member":3,'
ok $? "n1 and n2 logged node_lost for member 3" || diag "$(grep node_lost "$tmp/ev.grow")"
grep '"event":"node_lost"' "$tmp/ev.grow" | grep '"member":3,' | grep -q '"ranks":2'
ok $? "... with its 2 spawned ranks" || diag "$(grep node_lost "$tmp/ev.grow")"
wait_for_file "$tmp/grow.rc" 300
# (srun's own status is n3's killed task's: the members agree on 0)
summaries grow | head -n 1 | grep -q "job slurm\.$J\.$STEP: 6 ranks on 3 nodes, 1 node joined; 2 nodes lost (n3; joined: n3), 4 ranks lost; completed after in-place recovery (exit 0)$"
ok $? "the members' result: n3 lost twice (as a node of the job, then as the joined member), 4 ranks lost, completed after in-place recovery (exit 0)" || diag "$(summaries grow)" "$(show grow 20)"
is "$(checksum_of grow)" "$ref" "the failure-free checksum ($ref)"
grep -aq '^final world 4,' "$tmp/grow.out"
ok $? "the job finished in a world of 4" || diag "$(grep -a 'resharded\|final' "$tmp/grow.out")"
is "$(summaries grow | sort -u | wc -l) $(summaries grow | wc -l)" "1 2" \
    "n1 and n2 print one summary line" || diag "$(summaries grow)"

# 4. a joiner never used: it ends with the job
base idle
ok $? "idle: the job (step $J.${STEP:-?}) computes" || diag "$(show idle)"
joiner idleB
wait_until 120 ev_both idle member_joined '"member":3,'
ok $? "idle: n1 and n2 log member_joined for member 3" || diag "$(show idleB)"
wait_for_file "$tmp/idle.rc" 300
is "$(cat "$tmp/idle.rc" 2> /dev/null)" 0 "idle: srun exit 0" || diag "$(show idle 30)"
is "$(checksum_of idle)" "$ref" "idle: the failure-free checksum"
wait_for_file "$tmp/idleB.rc" 120
is "$(cat "$tmp/idleB.rc" 2> /dev/null)" 0 "idle: the joiner exits 0" || diag "$(show idleB 30)"
! grep -q '"event":"workers_spawned"' "$tmp/ev.idleB" 2> /dev/null
ok $? "idle: nothing was spawned on the joiner"
sums=$( (summaries idle && summaries idleB) | tr -d '\0')
is "$(echo "$sums" | sort -u | wc -l) $(echo "$sums" | wc -l)" "1 4" \
    "idle: the three members and the joiner print one and the same summary line" || diag "$sums"
echo "$sums" | head -n 1 | grep -q "job slurm\.$J\.$STEP: 6 ranks on 3 nodes, 1 node joined; 0 nodes lost, 0 ranks lost; completed (exit 0)$"
ok $? "idle: it says 6 ranks on 3 nodes, 1 node joined, completed (exit 0)" || diag "$sums"

run_in_ctl scancel "$J" > /dev/null 2>&1
done_testing
