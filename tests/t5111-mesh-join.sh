#!/bin/bash
# t5111-mesh-join.sh - members joining a running mesh (mesh_admit)
#
# A mesh of 6 slots starts with 3 members (slots 3..5 absent).  Newcomers
# are admitted one at a time through different members (a leaf, the root,
# a newcomer itself); each gets the lowest absent slot, every member sees
# the join with the same epoch, the newcomer catches up with the fence
# sequence, and the next fence has exactly the live members' blobs.  A
# newcomer SIGKILLed is lost like any member and its slot is never given
# again; with --max-live 5 a sixth member is refused.
. "${srcdir:-.}/mesh/lib.sh"

args=(--timeout 1 --radix 2 --max-live 5)
mesh_start_some 6 3 "${args[@]}"
ok $? "3 of 6 member slots started and joined" || diag "$(mesh_err 0)"
mesh_fence 0 1 2
for i in 0 1 2; do
    grep -q '^fence 1 ok epoch 0 members 0,1,2 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 1 has the three blobs" || diag "$(mesh_out $i)"
done

# check_fence SEQ EPOCH MEMBERS I...: fence SEQ on each, the same result
check_fence() {
    local seq=$1 epoch=$2 members=$3 i
    shift 3
    mesh_fence "$@"
    for i in "$@"; do
        grep -q "^fence $seq ok epoch $epoch members $members " "$mesh_dir/out$i"
        ok $? "member $i: fence $seq, epoch $epoch, blobs of $members" ||
            diag "$(mesh_line $i '^fence ')" "$(tail -n 5 "$mesh_dir/err$i")"
    done
}

# admitted NAME SLOT ADMITTER EPOCH LIVE OTHERS...: newcomer NAME admitted
# through ADMITTER into SLOT at EPOCH (LIVE members then); every other
# member (OTHERS) sees it join
admitted() {
    local name=$1 slot=$2 by=$3 epoch=$4 live=$5 i
    shift 5
    mesh_join "$slot" "$name" "$by" "${args[@]}"
    ok $? "newcomer $name admitted through member $by and linked" ||
        diag "$(mesh_out "$by")" "$(mesh_err "$slot")"
    is "$(mesh_line "$by" '^admitted ')" "admitted $name slot $slot epoch $epoch" \
        "member $by gave $name slot $slot, epoch $epoch"
    for i in "$@"; do
        mesh_wait "$i" "^join $slot epoch $epoch live $live " 30
        ok $? "member $i sees member $slot join, epoch $epoch, $live live" || diag "$(mesh_out $i)"
    done
}

# newcomer A through member 1 (a leaf): slot 3
admitted A 3 1 1 4 0 2
check_fence 2 1 0,1,2,3 0 1 2 3

# newcomer B through the root: slot 4
admitted B 4 0 2 5 1 2 3
check_fence 3 2 0,1,2,3,4 0 1 2 3 4

# a full mesh (--max-live 5) refuses a sixth
echo 1 > "$mesh_dir/X.port"
mesh_cmd 2 "admit X"
mesh_wait 2 '^admit X ' 30
is "$(mesh_line 2 '^admit X ')" "admit X error No space left on device" \
    "with 5 of at most 5 live, member 2 refuses a newcomer"

# broadcasts reach newcomers and come from them
mesh_cmd 0 "bcast from-0"
mesh_cmd 4 "bcast from-4"
for i in 3 4; do
    mesh_wait "$i" '^bcast 0 2 from-0' 30
    ok $? "newcomer $i gets member 0's broadcast"
done
for i in 0 1 2 3; do
    mesh_wait "$i" '^bcast 4 2 from-4' 30
    ok $? "member $i gets newcomer 4's broadcast"
done

# newcomer A lost
kill -KILL "$(mesh_pid 3)"
for i in 0 1 2 4; do
    mesh_wait "$i" '^lost 3 epoch 3 live 4 ' 30
    ok $? "member $i sees member 3 lost, epoch 3, 4 live" || diag "$(mesh_out $i)"
done
check_fence 4 3 0,1,2,4 0 1 2 4

# newcomer C through newcomer B: slot 5 (slot 3 is lost, never given again)
admitted C 5 4 4 5 0 1 2
check_fence 5 4 0,1,2,4,5 0 1 2 4 5
for i in 0 1 2 4 5; do mesh_cmd "$i" live; done
for i in 0 1 2 4 5; do
    mesh_wait "$i" '^live ' 30
    is "$(mesh_line $i '^live ')" "live 0,1,2,4,5 epoch 4" "member $i: live set 0,1,2,4,5, epoch 4"
done

mesh_stop
for i in 0 1 2 4 5; do
    grep -q '^exit 0' "$mesh_dir/out$i"
    ok $? "member $i ended cleanly" || diag "$(tail -n 5 "$mesh_dir/err$i")"
    ! grep -q 'fencing itself' "$mesh_dir/err$i"
    ok $? "member $i never fenced itself"
done
done_testing
