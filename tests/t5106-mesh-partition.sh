#!/bin/bash
# t5106-mesh-partition.sh - a member's network cut while it runs
#
# mesh_test_cut makes a member deaf and mute as a cut link would (nothing
# it sends arrives, nothing sent to it is read, its connects never
# complete) while its thread keeps running: the majority must lose it
# within the node timeout and agree; the cut-off member must fence itself
# on its own (it cannot be told), within about two node timeouts.  First a
# leaf (member 4), then the root (member 0) of the four left.  Last, the
# new root (member 1) stops reading while what it sends still arrives (a
# member starved of CPU, or whose input is lost): it finds both its
# neighbours silent and fences itself alone; the two it found silent must
# not take its verdict for theirs (they were the majority) and go on.
. "${srcdir:-.}/mesh/lib.sh"

timeout=1
mesh_start 5 --timeout $timeout --radix 2
ok $? "5 members joined" || diag "$(mesh_err 0)"
mesh_fence 0 1 2 3 4
ok $? "fence 1 on all five"

t0=$(now_ms)
mesh_cmd 4 cut
for i in 0 1 2 3; do
    mesh_wait "$i" '^lost 4 epoch 1 live 4 ' 30
    ok $? "member $i sees the cut-off member 4 lost" || diag "$(mesh_out $i)" "$(mesh_err $i)"
done
diag "majority detection of the cut member (ms): $(for i in 0 1 2 3; do printf '%s ' "$(mesh_lost_ms $i $t0)"; done)"
mesh_wait 4 '^fenced ' 30
ok $? "member 4 fences itself: $(mesh_line 4 '^fenced ' | cut -d' ' -f3-)" || diag "$(mesh_out 4)" "$(mesh_err 4)"
t=$(mesh_line 4 '^fenced ' | sed -n 's/^fenced t=\([0-9]*\).*/\1/p')
diag "the cut member fenced itself after $((t - t0)) ms"
[ -n "$t" ] && [ $((t - t0)) -le $((timeout * 1000 * 4 + 2000)) ]
ok $? "within 4 node timeouts + 2 s"
wait_for_exit "$(mesh_pid 4)" 30
ok $? "member 4 exited"

mesh_fence 0 1 2 3
for i in 0 1 2 3; do
    grep -q '^fence 2 ok epoch 1 members 0,1,2,3 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 2 among the majority" || diag "$(mesh_out $i)"
done

# the root's network cut: 1, 2, 3 re-form under member 1; 0 fences itself
t0=$(now_ms)
mesh_cmd 0 cut
for i in 1 2 3; do
    mesh_wait "$i" '^lost 0 epoch 2 live 3 ' 30
    ok $? "member $i sees the cut-off root lost" || diag "$(mesh_out $i)" "$(mesh_err $i)"
done
mesh_wait 0 '^fenced ' 30
ok $? "the cut-off root fences itself: $(mesh_line 0 '^fenced ' | cut -d' ' -f3-)" || diag "$(mesh_out 0)" "$(mesh_err 0)"
t=$(mesh_line 0 '^fenced ' | sed -n 's/^fenced t=\([0-9]*\).*/\1/p')
diag "the cut root fenced itself after $((t - t0)) ms"
mesh_fence 1 2 3
for i in 1 2 3; do
    grep -q '^fence 3 ok epoch 2 members 1,2,3 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 3 among 1, 2, 3" || diag "$(mesh_out $i)"
    ! grep -q 'fencing itself' "$mesh_dir/err$i"
    ok $? "member $i never fenced itself"
done

# only the new root's input cut: it fences itself, 2 and 3 go on
mesh_cmd 1 cutin
mesh_wait 1 '^fenced ' 30
ok $? "the root that hears nothing fences itself: $(mesh_line 1 '^fenced ' | cut -d' ' -f3-)" ||
    diag "$(mesh_out 1)" "$(mesh_err 1)"
for i in 2 3; do
    mesh_wait "$i" '^lost 1 epoch 3 live 2 ' 30
    ok $? "member $i loses the deaf root" || diag "$(mesh_out $i)" "$(mesh_err $i)"
done
mesh_fence 2 3
for i in 2 3; do
    grep -q '^fence 4 ok epoch 3 members 2,3 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 4 among 2 and 3" || diag "$(mesh_out $i)" "$(mesh_err $i)"
    ! grep -q 'fencing itself' "$mesh_dir/err$i"
    ok $? "member $i did not fence itself on the deaf root's word" || diag "$(mesh_err $i)"
done
mesh_stop
done_testing
