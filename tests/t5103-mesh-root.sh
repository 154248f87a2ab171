#!/bin/bash
# t5103-mesh-root.sh - no member is special: the root lost, mid-fence
#
# A fence is under way (members 0-3 have contributed, 4 has not) when the
# root, member 0, is SIGKILLed: the tree is repaired under member 1 (the
# lowest live), the fence completes on every survivor with the same blobs
# once 4 contributes, never hangs.  Then the new root is SIGSTOPped (its
# loss seen by heartbeat) and the last three still agree and fence.
. "${srcdir:-.}/mesh/lib.sh"

mesh_start 5 --timeout 1 --radix 2
ok $? "5 members joined" || diag "$(mesh_err 0)"
mesh_fence 0 1 2 3 4
ok $? "fence 1 on all five"

# fence 2: everyone but 4 contributes, then the root dies
for i in 0 1 2 3; do mesh_cmd "$i" fence; done
t0=$(now_ms)
kill -KILL "$(mesh_pid 0)"
for i in 1 2 3 4; do
    mesh_wait "$i" '^lost 0 epoch 1 live 4 ' 30
    ok $? "member $i sees the root (member 0) lost" || diag "$(mesh_out $i)" "$(mesh_err $i)"
done
diag "detection of the killed root (ms): $(for i in 1 2 3 4; do printf '%s ' "$(mesh_lost_ms $i $t0)"; done)"
mesh_cmd 4 fence
for i in 1 2 3 4; do
    mesh_wait "$i" '^fence 2 ' 60
    grep -q '^fence 2 ok epoch 1 members 1,2,3,4 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 2, interrupted by the root's loss, completes among 1-4" || diag "$(mesh_out $i)"
done
mesh_cmd 1 stats
mesh_wait 1 '^stats ' 30
mesh_line 1 '^stats ' | grep -q ' parent -1 '
ok $? "member 1 is the new root: $(mesh_line 1 '^stats ')"

# the new root goes silent
mesh_fences=2
kill -STOP "$(mesh_pid 1)"
for i in 2 3 4; do
    mesh_wait "$i" '^lost 1 epoch 2 live 3 ' 30
    ok $? "member $i sees the stopped new root lost, epoch 2" || diag "$(mesh_out $i)" "$(mesh_err $i)"
done
mesh_fence 2 3 4
for i in 2 3 4; do
    grep -q '^fence 3 ok epoch 2 members 2,3,4 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 3 among 2, 3, 4 under the third root" || diag "$(mesh_out $i)"
done
for i in 2 3 4; do mesh_cmd "$i" live; done
for i in 2 3 4; do
    mesh_wait "$i" '^live ' 30
    is "$(mesh_line $i '^live ')" "live 2,3,4 epoch 2" "member $i: live 2,3,4, epoch 2"
done
kill -CONT "$(mesh_pid 1)"
mesh_wait 1 '^fenced ' 30
ok $? "the resumed old root fences itself"
mesh_stop
for i in 2 3 4; do
    ! grep -q 'fencing itself' "$mesh_dir/err$i"
    ok $? "member $i never fenced itself"
done
done_testing
