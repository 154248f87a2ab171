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

# node 1 (ranks 2 and 3) killed while every rank waits in MPI_Barrier
mn_start node 3 2 -- "$FT_APP" -v 2,3
for r in 2 3; do
    wait_for_grep "^ready 1 $r " "$mn_dir/out.1" 180
    ok $? "node: rank $r reached the kill point" || diag "$(mn_out)"
done
t_kill=$(date +%s.%N)
mn_kill_node 1
ok $? "node: node 1's process SIGKILLed"
for k in 0 2; do
    wait_for_grep ' reported rank=3 ' "$mn_dir/ev.$k" 120
    grep -q ' lost member=1 ' "$mn_dir/ev.$k"
    ok $? "node: node $k's mesh lost member 1"
    for r in 2 3; do
        is "$(grep -c " reported rank=$r signaled=0" "$mn_dir/ev.$k")" 1 \
            "node: node $k sent its ranks the fault event for rank $r" || diag "$(mn_ev "$k")"
    done
done
for r in 0 1 4 5; do
    wait_for_grep "^error 1 $r class=\(PROC_FAILED\|REVOKED\)" "$mn_dir/out.$((r / 2))" 120
    ok $? "node: survivor rank $r got MPIX_ERR_PROC_FAILED or MPIX_ERR_REVOKED" || diag "$(mn_out)"
done
diag "node: node 1 killed -> node 0 reported its ranks: $(mn_ms "$t_kill" "$(mn_ev_time 0 'reported rank=3')") ms," \
    "node 2: $(mn_ms "$t_kill" "$(mn_ev_time 2 'reported rank=3')") ms"
# Known: after a whole node's loss the survivors often hang in
# MPIX_Comm_shrink's agreement (doc/mesh.md, "Integration"); 30 s is
# far above the < 1 s recovery takes when it works.
if wait_for_grep '^ft-app: ok size 6 -> 4' "$mn_dir/out.0" 30; then
    ok 0 "node: the survivors shrank (6 -> 4) and checked the sum"
    mn_wait 120
    for k in 0 2; do is "${mn_rc[k]}" 0 "node: node $k exit 0"; done
else
    echo "not ok $((++tap_n)) - node: the survivors shrank (6 -> 4) # TODO shrink hangs after a node loss"
    mn_stop
    mn_wait 120
fi
mn_check_clean node 0 2
done_testing
