#!/bin/bash
# t5104-mesh-intruder.sh - peers that are not members are dropped, logged
#
# A connection that says nothing, one that sends garbage, one that speaks
# another protocol version, and one that knows the protocol but not the
# secret (it cannot verify the member's proof, and its own is refused):
# each is closed by the member and named in its log; the members are not
# affected (no loss, a fence completes).  A member started with a wrong
# secret never joins the others.
. "${srcdir:-.}/mesh/lib.sh"

mesh_start 3 --timeout 1
ok $? "3 members joined" || diag "$(mesh_err 0)"
port=$(sed -n 's/^ready 1 port //p' "$mesh_dir/out1")

probe() { # probe DESC LOG-RE ARGS...
    local desc=$1 re=$2 out
    shift 2
    out=$("$MESH_MEMBER" --probe "$port" --to 1 --members 3 "$@" 2>&1)
    ok $? "$desc: closed by the member" || diag "$out"
    diag "$out"
    wait_for_grep "$re" "$mesh_dir/err1" 30
    ok $? "$desc: logged" || diag "$(mesh_err 1)"
}
probe "silent peer" 'said nothing' --silent
probe "garbage" 'bad magic' --garbage
probe "protocol version 2" 'protocol version 2' --version --as 2
out=$(ELASTIC_MESH_SECRET=not-the-secret "$MESH_MEMBER" --probe "$port" --to 1 --members 3 --as 2 2>&1)
diag "$out"
ok $? "wrong secret: closed by the member" || diag "$out"
echo "$out" | grep -q "proof does not verify"
ok $? "wrong secret: the member's proof does not verify for the intruder"
wait_for_grep 'claimed member 2 failed authentication' "$mesh_dir/err1" 30
ok $? "wrong secret: logged as a failed authentication"

mesh_fence 0 1 2
for i in 0 1 2; do
    grep -q '^fence 1 ok epoch 0 members 0,1,2 ' "$mesh_dir/out$i"
    ok $? "member $i: unaffected, fence 1 with all three" || diag "$(mesh_out $i)"
    ! mesh_grep "$i" '^lost '
    ok $? "member $i lost nobody"
done
mesh_stop

# a mesh where member 1 has another secret: it and member 0 refuse each other
mesh_dir2=$(mktemp -d "${TMPDIR:-/tmp}/mesh-test2.XXXXXX")
mkfifo "$mesh_dir2/in"
exec {fd2}<> "$mesh_dir2/in"
"$MESH_MEMBER" --members 2 --self 0 --dir "$mesh_dir2" --timeout 1 --join-timeout 5 \
    < "$mesh_dir2/in" > "$mesh_dir2/out0" 2> "$mesh_dir2/err0" &
mesh_pids[a]=$!
ELASTIC_MESH_SECRET=other "$MESH_MEMBER" --members 2 --self 1 --dir "$mesh_dir2" \
    --timeout 1 --join-timeout 5 < "$mesh_dir2/in" > "$mesh_dir2/out1" 2> "$mesh_dir2/err1" &
mesh_pids[b]=$!
wait_for_grep 'server failed authentication' "$mesh_dir2/err1" 30
ok $? "the member with another secret cannot verify member 0's proof" || diag "$(cat "$mesh_dir2/err1")"
wait_for_grep 'dropped connection .*(not authenticated)' "$mesh_dir2/err0" 30
ok $? "member 0 drops its half-open connection" || diag "$(cat "$mesh_dir2/err0")"
! grep -q '^joined' "$mesh_dir2/out0" "$mesh_dir2/out1"
ok $? "neither joins"
kill -KILL "${mesh_pids[a]}" "${mesh_pids[b]}" 2> /dev/null
wait "${mesh_pids[a]}" "${mesh_pids[b]}" 2> /dev/null
exec {fd2}>&-
rm -rf "$mesh_dir2"
done_testing
