#!/bin/bash
# t5102-mesh-stop.sh - a member SIGSTOPped: silent, not dead
#
# Its TCP connections stay open, so only the heartbeat can tell: the
# survivors must see it lost within --timeout (1 s) plus slack, agree on
# the live set, re-link its children (member 1 is interior: 3 and 4 hang
# under it) and complete a fence without it.  Resumed, it must find that
# it was cut off and fence itself (exit 3) without disturbing the others.
. "${srcdir:-.}/mesh/lib.sh"

timeout=1
slack=${MESH_STOP_SLACK_MS:-2500} # a loaded 2-core machine
survivors="0 2 3 4"
mesh_start 5 --timeout $timeout --radix 2
ok $? "5 members joined" || diag "$(mesh_err 0)"
mesh_fence 0 1 2 3 4
ok $? "fence 1 on all five"

t0=$(now_ms)
kill -STOP "$(mesh_pid 1)"
for i in $survivors; do
    mesh_wait "$i" '^lost 1 epoch 1 live 4 ' 30
    ok $? "member $i sees the stopped member 1 lost" || diag "$(mesh_out $i)" "$(mesh_err $i)"
done
worst=0
for i in $survivors; do
    ms=$(mesh_lost_ms $i $t0)
    [ -n "$ms" ] && [ "$ms" -gt "$worst" ] && worst=$ms
done
diag "detection of a silent member (ms): $(for i in $survivors; do printf '%s ' "$(mesh_lost_ms $i $t0)"; done)(node timeout ${timeout}000)"
[ "$worst" -le $((timeout * 1000 + slack)) ]
ok $? "every survivor saw it within the node timeout + ${slack} ms (worst $worst ms)"
grep -q 'lost (silent)' "$mesh_dir/err0"
ok $? "member 0 says why: silent"

for i in $survivors; do mesh_cmd "$i" live; done
for i in $survivors; do
    mesh_wait "$i" '^live ' 30
    is "$(mesh_line $i '^live ')" "live 0,2,3,4 epoch 1" "member $i: live set 0,2,3,4, epoch 1"
done
mesh_fence $survivors
for i in $survivors; do
    grep -q '^fence 2 ok epoch 1 members 0,2,3,4 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 2 among the survivors (3 and 4 re-linked to 0)" || diag "$(mesh_out $i)"
done
mesh_cmd 3 stats
mesh_wait 3 '^stats ' 30
mesh_line 3 '^stats ' | grep -q ' parent 0 '
ok $? "member 3's parent is now 0: $(mesh_line 3 '^stats ')"

kill -CONT "$(mesh_pid 1)"
mesh_wait 1 '^fenced ' 30
ok $? "resumed, member 1 fences itself: $(mesh_line 1 '^fenced ' | cut -d' ' -f3-)"
wait_for_exit "$(mesh_pid 1)" 30
wait "$(mesh_pid 1)"
is "$?" 3 "member 1 exits 3 (fenced)"

mesh_fence $survivors
for i in $survivors; do
    grep -q '^fence 3 ok epoch 1 members 0,2,3,4 ' "$mesh_dir/out$i"
    ok $? "member $i: after the resume, fence 3 still among the same four, epoch 1" || diag "$(mesh_out $i)"
done
mesh_stop
for i in $survivors; do
    ! grep -q 'fencing itself' "$mesh_dir/err$i"
    ok $? "member $i never fenced itself"
done
done_testing
