#!/bin/bash
# t5121-mesh-pmix-failure.sh - a failure on one "node" reaches the ranks of the others
#
# Three pmix/mesh-pmix-node "nodes" of 2 ranks each (t5120).  A rank
# killed on node 1 is reaped there, broadcast over the mesh, and every
# other node sends its ranks the PMIx fault event for it; a whole node
# killed is lost to the mesh, and the survivors report each of its ranks.
# The survivors (ULFM) must get MPIX_ERR_PROC_FAILED (or REVOKED), shrink
# and check an allreduce over the ranks left.  Times are between the
# nodes' event logs (CLOCK_REALTIME on this one machine).
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

# node_case NAME NODES NODE: node NODE (of NODES, ranks 2*NODE and
# 2*NODE+1) SIGKILLed while every rank waits in MPI_Barrier
node_case() {
    local name=$1 n=$2 v=$3 r k s a=$(($3 * 2)) b=$(($3 * 2 + 1))
    local want="$((n * 2)) -> $((n * 2 - 2))"
    mn_start "$name" "$n" 2 -- "$FT_APP" -v "$a,$b"
    for r in $a $b; do
        wait_for_grep "^ready 1 $r " "$mn_dir/out.$v" 180
        ok $? "$name: rank $r reached the kill point" || diag "$(mn_out)"
    done
    t_kill=$(date +%s.%N)
    mn_kill_node "$v"
    ok $? "$name: node $v's process SIGKILLed"
    s=
    for ((k = 0; k < n; k++)); do
        [ "$k" = "$v" ] && continue
        s="$s $k"
        wait_for_grep " reported rank=$b " "$mn_dir/ev.$k" 120
        grep -q " lost member=$v " "$mn_dir/ev.$k"
        ok $? "$name: node $k's mesh lost member $v"
        for r in $a $b; do
            is "$(grep -c " reported rank=$r signaled=0" "$mn_dir/ev.$k")" 1 \
                "$name: node $k sent its ranks the fault event for rank $r" || diag "$(mn_ev "$k")"
        done
        for r in $((k * 2)) $((k * 2 + 1)); do
            wait_for_grep "^error 1 $r class=\(PROC_FAILED\|REVOKED\)" "$mn_dir/out.$k" 120
            ok $? "$name: survivor rank $r got MPIX_ERR_PROC_FAILED or MPIX_ERR_REVOKED" || diag "$(mn_out)"
        done
    done
    k=${s# }
    k=${k%% *}
    diag "$name: node $v killed -> node $k reported its ranks: $(mn_ms "$t_kill" "$(mn_ev_time "$k" "reported rank=$b")") ms"
    mn_wait 120
    for k in $s; do is "${mn_rc[k]}" 0 "$name: node $k exit 0" || diag "$(mn_out)" "$(mn_ev "$k")"; done
    is "$(mn_count "^ft-app: ok size $want")" 1 "$name: the survivors shrank ($want) and checked the sum" ||
        diag "$(mn_out)"
    for k in $s; do
        is "$(grep -c ' exit rank=[0-9]* status=0 verdict=done' "$mn_dir/ev.$k")" 2 "$name: both ranks of node $k finished (none lost on the way)" ||
            diag "$(mn_ev "$k")"
    done
    mn_out | grep -o '^shrunk 1 [0-9]* .*' | head -n 2 | sed "s/^/# $name: /"
    # shellcheck disable=SC2086
    mn_check_clean "$name" $s
}

# 2 nodes, node 1 killed; 3 nodes, node 2 killed.  Of 3 nodes, ranks 4
# and 5 are children in ULFM's agreement tree of ranks 1 and 2 that never
# talked to them: the shrink waited for them forever until the ranks got
# OMPI_MCA_mpi_add_procs_cutoff (pmix_host.c), and a survivor writing to
# them could die of SIGPIPE until mesh-pmix-node ignored it (doc/mesh.md).
node_case node2 2 1
node_case node3 3 2

# both ranks of node 2 SIGKILLed while its server stays: node 2 reaps them
# (recoverable), the mesh broadcast tells nodes 0 and 1 (signaled), and the
# survivors shrink 6 -> 4 (the same agreement tree as node3)
mn_start ranks3 3 2 -- "$FT_APP" -v 4,5
for r in 4 5; do
    wait_for_grep "^ready 1 $r " "$mn_dir/out.2" 180
    ok $? "ranks3: rank $r reached the kill point" || diag "$(mn_out)"
done
for r in 4 5; do
    p=$(grep -a -o "^ready 1 $r [0-9]*" "$mn_dir/out.2" | head -n 1 | cut -d' ' -f4)
    kill -KILL "$p"
    ok $? "ranks3: rank $r (pid $p) SIGKILLed"
done
mn_wait 120
for k in 0 1 2; do is "${mn_rc[k]}" 0 "ranks3: node $k exit 0" || diag "$(mn_out)" "$(mn_ev "$k")"; done
for r in 4 5; do
    grep -q "exit rank=$r .*verdict=recoverable" "$mn_dir/ev.2"
    ok $? "ranks3: node 2 reaped rank $r as a recoverable failure" || diag "$(mn_ev 2)"
    for k in 0 1; do
        is "$(grep -c " reported rank=$r signaled=1" "$mn_dir/ev.$k")" 1 \
            "ranks3: node $k sent its ranks the fault event for rank $r (killed by a signal)" || diag "$(mn_ev "$k")"
    done
done
is "$(mn_count '^ft-app: ok size 6 -> 4')" 1 "ranks3: the survivors shrank (6 -> 4) and checked the sum" ||
    diag "$(mn_out)"
for k in 0 1; do
    is "$(grep -c ' exit rank=[0-9]* status=0 verdict=done' "$mn_dir/ev.$k")" 2 \
        "ranks3: both ranks of node $k finished (none lost on the way)" || diag "$(mn_ev "$k")"
done
mn_out | grep -a -o '^shrunk 1 [0-9]* .*' | head -n 2 | sed 's/^/# ranks3: /'
mn_check_clean ranks3
done_testing
