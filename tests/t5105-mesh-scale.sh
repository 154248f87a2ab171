#!/bin/bash
# t5105-mesh-scale.sh - a larger mesh on this machine: 32 members, radix 4
#
# Join, fence times, a member killed (all 31 agree on the live set and
# epoch), a fence among the 31.  The numbers are diagnostics (a loaded
# 2-core machine runs all 32); MESH_SCALE_N chooses another size.
. "${srcdir:-.}/mesh/lib.sh"

n=${MESH_SCALE_N:-32}
t0=$(now_ms)
mesh_start "$n" --timeout 2 --radix 4
ok $? "$n members joined in $(($(now_ms) - t0)) ms" || diag "$(mesh_err 0)"
all=$(seq 0 $((n - 1)))
for f in 1 2 3; do
    t0=$(now_ms)
    mesh_fence $all
    ok $? "fence $f on all $n members: $(($(now_ms) - t0)) ms from the shell; member 0: $(mesh_line 0 "^fence $f " | sed 's/.* ms //') ms"
done
victim=$((n / 2 + 1))
t0=$(now_ms)
kill -KILL "$(mesh_pid $victim)"
good=0
for i in $all; do
    [ "$i" = "$victim" ] && continue
    mesh_wait "$i" "^lost $victim epoch 1 " 60 && good=$((good + 1))
done
is "$good" $((n - 1)) "all $((n - 1)) survivors saw member $victim lost, epoch 1 ($(($(now_ms) - t0)) ms until the last)"
rest=$(for i in $all; do [ "$i" = "$victim" ] || echo "$i"; done)
for i in $rest; do mesh_cmd "$i" live; done
want=$(echo $rest | tr ' ' ',')
same=0
for i in $rest; do
    mesh_wait "$i" '^live ' 30
    [ "$(mesh_line $i '^live ')" = "live $want epoch 1" ] && same=$((same + 1))
done
is "$same" $((n - 1)) "all survivors agree on the live set and the epoch"
mesh_fence $rest
ok $? "fence 4 among the $((n - 1)) survivors: member 0: $(mesh_line 0 '^fence 4 ' | sed 's/.* ms //') ms"
cnt=0
for i in $rest; do
    grep -q "^fence 4 ok epoch 1 members $want " "$mesh_dir/out$i" && cnt=$((cnt + 1))
done
is "$cnt" $((n - 1)) "every survivor's fence 4 holds exactly the survivors' blobs"
mesh_cmd 0 stats
mesh_wait 0 '^stats ' 30
diag "member 0: $(mesh_line 0 '^stats ')"
mesh_stop
done_testing
