#!/bin/bash
# t5101-mesh-kill.sh - a member of a 5-member mesh SIGKILLed
#
# The survivors see it lost (its TCP connection closes), all agree on the
# same live set and epoch, a fence among them completes with exactly their
# blobs, a direct modex to a live member is answered and one to the lost
# member fails at once, a rank-failed broadcast reaches every survivor
# once, and they end cleanly.
. "${srcdir:-.}/mesh/lib.sh"

survivors="0 1 2 4"
mesh_start 5 --timeout 1
ok $? "5 members joined" || diag "$(mesh_err 0)"
mesh_fence 0 1 2 3 4
for i in 0 1 2 3 4; do
    grep -q '^fence 1 ok epoch 0 members 0,1,2,3,4 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 1 has all five blobs" || diag "$(mesh_out $i)"
done

t0=$(now_ms)
kill -KILL "$(mesh_pid 3)"
for i in $survivors; do
    mesh_wait "$i" '^lost 3 epoch 1 live 4 ' 30
    ok $? "member $i sees member 3 lost, epoch 1, 4 live" || diag "$(mesh_out $i)" "$(mesh_err $i)"
done
diag "detection after SIGKILL (ms): $(for i in $survivors; do printf '%s ' "$(mesh_lost_ms $i $t0)"; done)"
for i in $survivors; do mesh_cmd "$i" live; done
for i in $survivors; do
    mesh_wait "$i" '^live ' 30
    is "$(mesh_line $i '^live ')" "live 0,1,2,4 epoch 1" "member $i: live set 0,1,2,4, epoch 1"
done

mesh_fence $survivors
for i in $survivors; do
    grep -q '^fence 2 ok epoch 1 members 0,1,2,4 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 2 among the survivors, their four blobs" || diag "$(mesh_out $i)"
done
diag "fence 2 on member 0: $(mesh_line 0 '^fence 2 ')"

mesh_cmd 0 "dmodex 4"
mesh_wait 0 '^dmodex ' 30
is "$(mesh_line 0 '^dmodex ')" "dmodex ok data-of-4-for-0(key)" "a direct modex from 0 to 4 is answered by 4"
mesh_cmd 1 "dmodex 3"
mesh_wait 1 '^dmodex ' 30
is "$(mesh_line 1 '^dmodex ')" "dmodex error -113" "a direct modex to the lost member fails at once"

mesh_cmd 2 "failed 7"
for i in 0 1 4; do
    mesh_wait "$i" '^rankfailed 2 7 -190 mesh-test-ns' 30
    ok $? "member $i hears that rank 7 failed (from member 2)"
done
mesh_cmd 4 "bcast after-the-loss"
for i in 0 1 2; do
    mesh_wait "$i" '^bcast 4 2 after-the-loss' 30
    ok $? "member $i gets member 4's notify"
done
sleep 0 # (no fixed waits: the counts below are read after the waits above)
n=$(cat "$mesh_dir"/out0 "$mesh_dir"/out1 "$mesh_dir"/out4 | grep -c '^rankfailed 2 7 ')
is "$n" 3 "each survivor got the broadcast exactly once"

mesh_stop
for i in $survivors; do
    grep -q '^exit 0' "$mesh_dir/out$i"
    ok $? "member $i ended cleanly"
done
for i in $survivors; do
    ! grep -q 'fencing itself' "$mesh_dir/err$i"
    ok $? "member $i never fenced itself"
done
done_testing
