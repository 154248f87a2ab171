#!/bin/bash
# t6021-slurm-mesh-nodes.sh - whole nodes lost under `srun elastic-exec`
# (mesh mode, t6020) on the emulated cluster, the hard cases:
#
#   root:   3 nodes; n1 is killed: it holds rank 0, the mesh's member 0
#           (the root of its tree) and the first node of the step; the
#           others recover in place (6 -> 4) with the failure-free checksum;
#   twice:  4 nodes; n2 is killed, the survivors recover (8 -> 6) and
#           protect themselves again (new buddies), then n3 is killed
#           (6 -> 4): the failure-free checksum;
#   spare:  4 nodes with ELASTIC_SPARE_RANKS=2 (n4's two ranks idle); n2 is
#           killed: the spares take its ranks' places (6 -> 6 working),
#           the failure-free checksum.
# Each member's summary line says what was lost; srun --no-kill ends when
# the survivors end.
. "${srcdir:-.}/lib/slurm.sh"
. "${srcdir:-.}/lib/slurm-mesh.sh"

mesh_prelude t6021
HEAT_ARGS="--nx 64 --ny 48"
STEPS=3000
ref=$("$HEAT" $HEAT_ARGS --steps $STEPS 2>&1 | sed -n 's/^checksum //p')
mesh_cluster_up 4
COMMON=(--oversubscribe --mpi-btl tcp --node-timeout 1)

finished() {
    local name=$1 want=$2
    wait_for_file "$tmp/$name.rc" 300
    is "$(tr -d '\0' < "$tmp/$name.out" | sed -n 's/^checksum //p')" "$ref" "$name: the failure-free checksum ($ref)" ||
        diag "$(show "$name")"
    grep -aq "^final world $want," "$tmp/$name.out"
    ok $? "$name: $want working ranks finished the job" || diag "$(grep -a 'resharded\|final' "$tmp/$name.out")"
    is "$(summaries "$name" | sort -u | wc -l)" 1 "$name: every surviving member printed the same summary" ||
        diag "$(summaries "$name")"
}

# root: n1 (rank 0, member 0) lost
srun_bg root -N3 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" --nproc-per-node 2 \
    "$HEAT" $HEAT_ARGS --steps $STEPS --progress 100 --sleep 1
wait_for_grep '^step 300$' "$tmp/root.out" 120
ok $? "root: the job computes on n1, n2, n3" || diag "$(show root)"
kill_node n1
ok $? "root: every process of n1 (rank 0's node, the mesh's root) SIGKILLed"
wait_for_grep '^resharded at step [0-9]*: world 6 -> 4$' "$tmp/root.out" 120
ok $? "root: the survivors on n2, n3 recovered in place (6 -> 4)" || diag "$(show root)"
finished root 4
summaries root | sort -u | grep -q '1 node lost (n1), 2 ranks lost; completed after in-place recovery (exit 0)$'
ok $? "root: the summary names n1 and the in-place recovery" || diag "$(summaries root)"
node_back n1

# twice: n2, then n3
srun_bg twice -N4 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" --nproc-per-node 2 \
    "$HEAT" $HEAT_ARGS --steps $STEPS --progress 100 --sleep 1
wait_for_grep '^step 300$' "$tmp/twice.out" 120
ok $? "twice: the job computes on n1..n4 (8 ranks)" || diag "$(show twice)"
kill_node n2
ok $? "twice: n2 killed"
wait_for_grep '^resharded at step [0-9]*: world 8 -> 6$' "$tmp/twice.out" 120
ok $? "twice: 8 -> 6 in place" || diag "$(show twice)"
# a progress line after the recovery: the survivors computed (and took
# their protecting snapshot) on the new world
s=$(sed -n 's/^resharded at step \([0-9]*\): world 8 -> 6$/\1/p' "$tmp/twice.out")
wait_for_grep "^step $(((s / 100 + 3) * 100))\$" "$tmp/twice.out" 120
ok $? "twice: the 6 ranks compute (step $(((s / 100 + 3) * 100)))"
kill_node n3
ok $? "twice: n3 killed"
wait_for_grep '^resharded at step [0-9]*: world 6 -> 4$' "$tmp/twice.out" 120
ok $? "twice: 6 -> 4 in place" || diag "$(show twice)"
finished twice 4
summaries twice | sort -u | grep -q '2 nodes lost (n2,n3), 4 ranks lost; completed after in-place recovery (exit 0)$'
ok $? "twice: the summary names n2 and n3" || diag "$(summaries twice)"
node_back n2
node_back n3

# spare: n4's two ranks take n2's places
ELASTIC_SPARE_RANKS=2 srun_bg spare -N4 --ntasks-per-node=1 "$EXEC" "${COMMON[@]}" --nproc-per-node 2 \
    "$HEAT" $HEAT_ARGS --steps $STEPS --progress 100 --sleep 1
wait_for_grep '^step 300$' "$tmp/spare.out" 120
ok $? "spare: 6 working ranks and 2 spares (n4) compute" || diag "$(show spare)"
grep -aq '^heat2d: 64x48 grid, 3000 steps, 8 ranks (6 working, 2 spares)$' "$tmp/spare.out"
ok $? "spare: heat2d says 6 working, 2 spares"
kill_node n2
ok $? "spare: n2 killed"
wait_for_grep '^resharded at step [0-9]*: world 6 -> 6$' "$tmp/spare.out" 120
ok $? "spare: the spares took the lost ranks' places (6 -> 6, no shrink of the work)" || diag "$(show spare)"
finished spare 6
node_back n2
done_testing
