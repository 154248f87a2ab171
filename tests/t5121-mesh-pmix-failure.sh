#!/bin/bash
# t5121-mesh-pmix-failure.sh - a failure on one "node" reaches the ranks of the others
#
# Three pmix/mesh-pmix-node "nodes" of 2 ranks each (t5120).  A rank
# killed on node 1 is reaped there, broadcast over the mesh, and every
# other node sends its ranks the PMIx fault event for it; a whole node
# killed is lost to the mesh, and the survivors report each of its ranks.
# The survivors (ULFM) must get MPIX_ERR_PROC_FAILED, shrink and check an
# allreduce over the ranks left.  Times are between the nodes' event logs
# (CLOCK_REALTIME on this one machine).
. "${srcdir:-.}/pmix/lib.sh"
. "${srcdir:-.}/pmix/mesh.sh"

# a rank killed on node 1 (rank 3 kills itself after MPI_Init)
mn_start rank 3 2 -- "$FT_APP" -s -v 3
mn_wait 180
for k in 0 1 2; do
    is "${mn_rc[k]}" 0 "rank: node $k exit 0" || diag "$(mn_out)" "$(mn_ev "$k")"
done
grep -q 'exit rank=3 .*verdict=recoverable' "$mn_dir/ev.1"
ok $? "rank: node 1 reaped rank 3 as a recoverable failure"
for k in 0 2; do
    is "$(grep -c ' reported rank=3 signaled=1' "$mn_dir/ev.$k")" 1 \
        "rank: node $k sent its ranks the fault event for rank 3 (killed by a signal)" || diag "$(mn_ev "$k")"
    is "$(grep -c ' reported ' "$mn_dir/ev.$k")" 1 "rank: node $k was told of nothing else"
done
is "$(mn_count '^ft-app: ok size 6 -> 5')" 1 "rank: the survivors shrank (6 -> 5) and checked the sum" ||
    diag "$(mn_out)"
is "$(mn_count 'expected MPIX')" 0 "rank: no survivor saw a non-ULFM error class"
t_exit=$(mn_ev_time 1 'exit rank=3 ')
diag "rank: node 1 reaped rank 3 -> node 0 reported it: $(mn_ms "$t_exit" "$(mn_ev_time 0 'reported rank=3')") ms," \
    "node 2: $(mn_ms "$t_exit" "$(mn_ev_time 2 'reported rank=3')") ms"
mn_out | grep -o '^error 1 [0-9]* class=[A-Z_]* t=[0-9]* wait_ms=[0-9.]*' | head -n 3 | sed 's/^/# rank: /'
mn_check_clean rank

# node 2 (ranks 4 and 5) killed while every rank waits in MPI_Barrier
mn_start node 3 2 -- "$FT_APP" -v 4,5
for r in 4 5; do
    wait_for_grep "^ready 1 $r " "$mn_dir/out.2" 180
    ok $? "node: rank $r reached the kill point" || diag "$(mn_out)"
done
t_kill=$(date +%s.%N)
mn_kill_node 2
ok $? "node: node 2's process SIGKILLed"
mn_wait 180
for k in 0 1; do
    is "${mn_rc[k]}" 0 "node: node $k exit 0" || diag "$(mn_out)" "$(mn_ev "$k")"
    grep -q ' lost member=2 ' "$mn_dir/ev.$k"
    ok $? "node: node $k's mesh lost member 2"
    for r in 4 5; do
        is "$(grep -c " reported rank=$r signaled=0" "$mn_dir/ev.$k")" 1 \
            "node: node $k sent its ranks the fault event for rank $r" || diag "$(mn_ev "$k")"
    done
done
is "$(mn_count '^ft-app: ok size 6 -> 4')" 1 "node: the survivors shrank (6 -> 4) and checked the sum" ||
    diag "$(mn_out)"
diag "node: node 2 killed -> node 0 reported its ranks: $(mn_ms "$t_kill" "$(mn_ev_time 0 'reported rank=5')") ms," \
    "node 1: $(mn_ms "$t_kill" "$(mn_ev_time 1 'reported rank=5')") ms"
mn_check_clean node
done_testing
