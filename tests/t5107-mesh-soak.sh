#!/bin/bash
# t5107-mesh-soak.sh - rounds of random losses in one 9-member mesh
#
# Each round picks a random live member (fixed seed; MESH_SOAK_SEED) and
# kills it (SIGKILL), stops it (SIGSTOP) or cuts its network
# (mesh_test_cut), then checks that every other live member sees it lost,
# that they all agree on the live set and the epoch, and that a fence
# among them completes with exactly their blobs; a stopped or cut member
# must fence itself.  The root and interior members are as likely victims
# as leaves.  MESH_SOAK_ROUNDS (default 6) rounds, node timeout
# MESH_SOAK_TIMEOUT (default 1 s).
. "${srcdir:-.}/mesh/lib.sh"

n=9
rounds=${MESH_SOAK_ROUNDS:-6}
timeout=${MESH_SOAK_TIMEOUT:-1}
RANDOM=${MESH_SOAK_SEED:-5107}
mesh_start $n --timeout "$timeout" --radix 2
ok $? "$n members joined" || diag "$(mesh_err 0)"
live=($(seq 0 $((n - 1))))
mesh_fence "${live[@]}"
ok $? "fence 1 on all"
epoch=0
for ((r = 1; r <= rounds; r++)); do
    v=${live[$((RANDOM % ${#live[@]}))]}
    case $((RANDOM % 3)) in
        0) how=kill ;;
        1) how=stop ;;
        *) how=cut ;;
    esac
    t0=$(now_ms)
    case $how in
        kill) kill -KILL "$(mesh_pid $v)" ;;
        stop) kill -STOP "$(mesh_pid $v)" ;;
        cut) mesh_cmd "$v" cut ;;
    esac
    rest=()
    for i in "${live[@]}"; do [ "$i" = "$v" ] || rest+=("$i"); done
    live=("${rest[@]}")
    epoch=$((epoch + 1))
    good=0 worst=0
    for i in "${live[@]}"; do
        if mesh_wait "$i" "^lost \(.*,\)*$v\(,.*\)* epoch " 15; then
            good=$((good + 1))
            t=$(grep "^lost \(.*,\)*$v\(,.*\)* epoch " "$mesh_dir/out$i" | head -1 | sed -n 's/.* t=\([0-9]*\).*/\1/p')
            [ $((t - t0)) -gt $worst ] && worst=$((t - t0))
        fi
    done
    is "$good" "${#live[@]}" "round $r: member $v ($how): all ${#live[@]} others see it lost (worst $worst ms)"
    for i in "${live[@]}"; do mesh_cmd "$i" live; done
    want="live $(echo "${live[@]}" | tr ' ' ',') epoch $epoch"
    same=0
    for i in "${live[@]}"; do
        wait_until 15 sh -c "[ \"\$(grep '^live ' '$mesh_dir/out$i' | tail -n1)\" = '$want' ]" && same=$((same + 1))
    done
    is "$same" "${#live[@]}" "round $r: all agree: $want"
    mesh_fence "${live[@]}"
    cnt=0
    for i in "${live[@]}"; do
        grep -q "^fence $mesh_fences ok epoch $epoch members $(echo "${live[@]}" | tr ' ' ',') " "$mesh_dir/out$i" && cnt=$((cnt + 1))
    done
    is "$cnt" "${#live[@]}" "round $r: fence $mesh_fences among the ${#live[@]} survivors"
    if [ "$how" = stop ]; then
        kill -CONT "$(mesh_pid $v)"
    fi
    if [ "$how" != kill ]; then
        mesh_wait "$v" '^fenced ' 30
        ok $? "round $r: member $v ($how) fenced itself"
    fi
    [ ${#live[@]} -gt 2 ] || break
done
for i in "${live[@]}"; do
    ! grep -q 'fencing itself' "$mesh_dir/err$i"
    ok $? "survivor $i never fenced itself"
done
mesh_stop
done_testing
