#!/bin/bash
# t6025-slurm-mesh-grow.sh - a job under `srun elastic-exec` (mesh mode)
# grows back into new processes after it lost ranks (issue #15,
# src/exec/pmix/pmix_grow.c "In a mesh"), on the emulated cluster:
#
#   other:  2 nodes x 3 ranks of heat2d; ranks 4 and 5 (n2) kill
#           themselves at step 30: the survivors recover in place (6 -> 4);
#           n2 says it has 2 free slots, the requestor's member (n1, rank
#           0's) places the spawn there, n2 starts two new processes
#           (ranks 6, 7), libelastic grows 4 -> 6 and the job ends with the
#           failure-free checksum in a world of 6; every member registered
#           the new namespace (n1 logged where the spawn went, n2 started
#           it);
#   self:   the same with rank 1 (n1) killed: the spawn lands on n1, the
#           requestor's own node (5 -> 6);
#   lost:   other, then n2 SIGKILLed once the grown job computes: the new
#           processes die with their node, n1's ranks recover (6 -> 3) and
#           end with the checksum in a world of 3 (n1 has no free slot);
#   join-dies: the first new process dies in its join: the growth fails,
#           the next one grows 4 -> 6 with other processes;
#   grow-dies: rank 1 dies after the spawn: the new processes are not
#           taken in, 4 -> 3, then back to 6 (two spawns, n1's one slot and
#           n2's two);
#   never:  ELASTIC_GROW_POLICY=never: the job stays at 4 and spawns nothing.
. "${srcdir:-.}/lib/slurm.sh"
. "${srcdir:-.}/lib/slurm-mesh.sh"

mesh_prelude t6025
HEAT_ARGS="--nx 64 --ny 48"
STEPS=1200
ref=$("$HEAT" $HEAT_ARGS --steps $STEPS 2>&1 | sed -n 's/^checksum //p')
mesh_cluster_up 2
COMMON=(--oversubscribe --mpi-btl tcp --node-timeout 1)

checksum_of() { tr -d '\0' < "$tmp/$1.out" | sed -n 's/^checksum //p'; }
events() { cat "$tmp/ev.$1" 2> /dev/null; }

# grow_case NAME FROM WANT FAIL... : 2 x 3 ranks, --fail FAIL..., end in
# WANT.  Two ranks of n2 die at once in most cases: their slots free up
# when n2 reaps each, and a load can put a reshard check between the two
# (room 1: a growth of one rank, then another).  The cases that name
# the growth's two new ranks ask for both at once (ELASTIC_GROW_MIN_BATCH
# in $BATCH, 1 otherwise).
grow_case() {
    local name=$1 from=$2 want=$3
    shift 3
    local fails=()
    for f in "$@"; do fails+=(--fail "$f"); done
    ELASTIC_GROW_MIN_BATCH=${BATCH:-1} ELASTIC_EVENT_LOG=$tmp/lev.$name srun_fg "$name" -N2 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" --nproc-per-node 3 \
        --event-log "$tmp/ev.$name" "$HEAT" $HEAT_ARGS --steps $STEPS --progress 100 \
        --sleep 2 "${fails[@]}"
    is "$SRUN_RC" 0 "$name: srun exit 0" || diag "$(show "$name" 40)"
    is "$(checksum_of "$name")" "$ref" "$name: the failure-free checksum ($ref)"
    grep -aq "^resharded at step [0-9]*: world ${from/\*/[0-9]*} -> $want\$" "$tmp/$name.out" &&
        grep -aq "^final world $want," "$tmp/$name.out"
    ok $? "$name: grew $from -> $want with new processes and finished in a world of $want" ||
        diag "$(grep -a 'resharded\|final\|spawn\|grow' "$tmp/$name.out" | head -20)"
}

# other: the children go to n2
BATCH=2 grow_case other 4 6 4:30 5:30
events other | grep '"event":"workers_spawn_placed"' | grep '"node":"n2"' | grep -q '"first_rank":6'
ok $? "other: n1 placed the spawn on n2, which had the room (workers_spawn_placed)" ||
    diag "$(events other | grep spawn)"
events other | grep '"event":"workers_spawned"' | grep -q '"ranks":\[6,7\]'
ok $? "other: n2 started ranks 6 and 7 (workers_spawned)" || diag "$(events other | grep spawn)"
grep '"event":"reshard_up"' "$tmp/lev.other" | grep '"old_size":4' | grep '"new_size":6' |
    grep '"new_ranks":\[6,7\]' | grep -q '"t_spawn_ms"'
ok $? "other: libelastic's reshard_up 4 -> 6, new ranks 6 and 7, the spawn's time" ||
    diag "$(grep reshard "$tmp/lev.other")"
is "$(summaries other | sort -u | wc -l)" 1 "other: one summary line on both members" ||
    diag "$(summaries other)"

# self: the child goes to n1, the requestor's node
grow_case self 5 6 1:30
events self | grep '"event":"workers_spawned"' | grep -q '"ranks":\[6\]'
ok $? "self: n1 started rank 6 into rank 1's slot" || diag "$(events self | grep spawn)"

# join-dies: the first new process (6, on n2) dies in its join.  Where
# the others see it decides how: before the merge, the growth fails
# (grow_failed for 6 and 7, 7 is not taken in) and the next try grows
# 4 -> 6 with 8 and 9; after it, the growth goes on without 6 (reshard_up
# 4 -> 5 naming 6 failed) and the next one adds 8.  Either way the job
# ends in a world of 6 with the checksum and rank 6 never computed.
BATCH=2 grow_case join-dies '*' 6 4:30 5:30 6:0:join
{ grep '"event":"grow_failed"' "$tmp/lev.join-dies" | grep -q '"new_ranks":\[6,7\]' ||
    grep '"event":"reshard_up"' "$tmp/lev.join-dies" | grep '"new_ranks":\[6,7\]' |
    grep -q '"failed":\[6\]'; } &&
    grep '"event":"reshard_up"' "$tmp/lev.join-dies" | grep -q '"new_ranks":\[8'
ok $? "join-dies: rank 6 was never taken in; a later growth brought new processes from 8" ||
    diag "$(grep -h 'grow\|reshard' "$tmp/lev.join-dies")"

# grow-dies: rank 1 (n1) dies after the spawn, before the merge: the new
# processes are not taken in, the survivors recover (4 -> 3), then grow
# back to 6 (a spawn goes to one node: n1's one slot and n2's two, in
# the order they free up)
grow_case grow-dies '*' 6 4:30 5:30 1:0:grow
grep -aq '^resharded at step [0-9]*: world 4 -> 3$' "$tmp/grow-dies.out"
ok $? "grow-dies: the survivors recovered without rank 1 (4 -> 3)" ||
    diag "$(grep -a resharded "$tmp/grow-dies.out")"
events grow-dies | grep '"event":"workers_spawn_placed"' | grep -q '"first_rank":6'
ok $? "grow-dies: the first spawn went to n2" || diag "$(events grow-dies | grep spawn)"

# never: no growth
ELASTIC_GROW_POLICY=never srun_fg never -N2 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" \
    --nproc-per-node 3 --event-log "$tmp/ev.never" "$HEAT" $HEAT_ARGS --steps $STEPS \
    --progress 100 --sleep 2 --fail 4:30 --fail 5:30
is "$SRUN_RC" 0 "never: srun exit 0" || diag "$(show never 40)"
is "$(checksum_of never)" "$ref" "never: the failure-free checksum"
grep -aq "^final world 4," "$tmp/never.out" && ! events never | grep -q workers_spawned
ok $? "never: the job stayed at 4 and spawned nothing" || diag "$(grep -a 'final\|spawn' "$tmp/never.out")"

# lost: grown onto n2, then n2 lost
ELASTIC_GROW_MIN_BATCH=2 srun_bg lost -N2 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" --nproc-per-node 3 \
    --event-log "$tmp/ev.lost" "$HEAT" $HEAT_ARGS --steps 4000 --progress 100 --sleep 2 \
    --fail 4:30 --fail 5:30
wait_for_grep '^resharded at step [0-9]*: world 4 -> 6$' "$tmp/lost.out" 180
ok $? "lost: grew 4 -> 6 onto n2" || diag "$(show lost 40)"
s=$(sed -n 's/^resharded at step \([0-9]*\): world 4 -> 6$/\1/p' "$tmp/lost.out" | head -n 1)
wait_for_grep "^step $(((s / 100 + 2) * 100))\$" "$tmp/lost.out" 120
ok $? "lost: the 6 ranks compute" || diag "$(show lost 40)"
kill_node n2
ok $? "lost: every process of n2 SIGKILLed (its 2 new ranks with it)"
wait_for_file "$tmp/lost.rc" 240
ref4=$("$HEAT" $HEAT_ARGS --steps 4000 2>&1 | sed -n 's/^checksum //p')
is "$(checksum_of lost)" "$ref4" "lost: the failure-free checksum ($ref4)" || diag "$(show lost 40)"
grep -aq '^resharded at step [0-9]*: world 6 -> 3$' "$tmp/lost.out" && grep -aq '^final world 3,' "$tmp/lost.out"
ok $? "lost: n1's ranks recovered (6 -> 3) and finished" || diag "$(grep -a 'resharded\|final' "$tmp/lost.out")"
node_back n2

done_testing
