#!/bin/bash
# t5108-mesh-munge.sh - the mesh authenticated by munge (MESH_AUTH_MUNGE)
#
# A private munged (its own key and socket in a temporary directory, as
# scripts/slurm-cluster.sh starts it) stands for the site's.  Five members
# started with --munge and no secret join, fence and see a loss; then
# peers that are not good members, each refused by the member it calls
# and named in its log, the members unaffected:
#   - a right credential: the member's proof verifies under the key in the
#     credential (the positive path, seen from outside);
#   - the very same HELLO again (a replayed credential): munged's replay
#     cache refuses it;
#   - a credential made for another member (taken from another HELLO);
#   - a credential of another job (of the same user);
#   - not a credential at all;
#   - a credential made by another uid (nobody), and one that only that
#     uid may decode;
#   - a HELLO without a credential (a member that uses a secret).
# Skips when this build has no libmunge or munged cannot be started.
. "${srcdir:-.}/mesh/lib.sh"

command -v munged > /dev/null && command -v munge > /dev/null ||
    skip_all "munged or munge not installed (apt-get install munge)"
grep -q '^#define HAVE_MUNGE 1' "${top_builddir:-..}/config.h" 2> /dev/null ||
    skip_all "this build has no libmunge (apt-get install libmunge-dev, then configure)"
# munge's socket path must be short: a directory of its own under /tmp
mdir=$(mktemp -d /tmp/t5108.XXXXXX)
chmod 755 "$mdir" # other uids reach the socket (the nobody probe below)
sock=$mdir/munge.sock
cleanup_munged() {
    [ -f "$mdir/munged.pid" ] && kill "$(cat "$mdir/munged.pid")" 2> /dev/null
    [ -n "${munged_pid:-}" ] && kill "$munged_pid" 2> /dev/null
    mesh_cleanup
    rm -rf "$mdir"
}
trap cleanup_munged EXIT
dd if=/dev/urandom of="$mdir/munge.key" bs=1024 count=1 2> /dev/null && chmod 400 "$mdir/munge.key"
munged -F --force --socket="$sock" --key-file="$mdir/munge.key" --pid-file="$mdir/munged.pid" \
    --log-file="$mdir/munged.log" --seed-file="$mdir/munged.seed" --num-threads=2 \
    > "$mdir/munged.out" 2>&1 < /dev/null &
munged_pid=$!
wait_until 20 sh -c "munge -n -S '$sock' | unmunge -S '$sock' > /dev/null 2>&1" ||
    skip_all "munged did not start: $(tail -n 2 "$mdir/munged.log" "$mdir/munged.out" 2> /dev/null | tr '\n' ' ')"

unset ELASTIC_MESH_SECRET # the members need none
mesh_start 5 --timeout 1 --munge "$sock"
ok $? "5 members authenticated by munge joined" || diag "$(mesh_err 0)" "$(mesh_err 1)"
mesh_fence 0 1 2 3 4
for i in 0 1 2 3 4; do
    grep -q '^fence 1 ok epoch 0 members 0,1,2,3,4 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 1 with all five" || diag "$(mesh_out $i)"
done

port=$(sed -n 's/^ready 1 port //p' "$mesh_dir/out1")
probe() { # probe DESC LOG-RE [env ...] ARGS... (a --as 3 peer calling member 1)
    local desc=$1 re=$2 out rc
    shift 2
    out=$("$@" 2>&1)
    rc=$?
    diag "$out"
    ok $rc "$desc: refused by the member" || diag "$out"
    if [ -n "$re" ]; then
        wait_for_grep "$re" "$mesh_dir/err1" 30
        ok $? "$desc: logged" || diag "$(mesh_err 1)"
    fi
}
P=("$MESH_MEMBER" --probe "$port" --to 1 --as 3 --members 5 --munge "$sock")
out=$("${P[@]}" 2>&1)
ok $? "a right credential: the member answers, its proof verifies under the credential's key" || diag "$out"
probe "a replayed credential" 'munge credential: replayed' "${P[@]}" --cred-replay
probe "a credential made for member 2" 'munge credential: made by member 3 for member 2 of 5' \
    "${P[@]}" --cred-bind
probe "a credential of another job" "munge credential: for job 'other-job' (this is job 'mesh-test')" \
    "${P[@]}" --cred-uid --job other-job
probe "not a credential" 'dropped connection .*munge credential: ' "${P[@]}" --cred-garbage
if command -v runuser > /dev/null && runuser -u nobody -- test -x "$MESH_MEMBER" 2> /dev/null; then
    # a credential anybody can decode, made by nobody: the member's uid check
    cred=$(runuser -u nobody -- munge -n -S "$sock")
    probe "a credential of uid 65534 (nobody)" 'munge credential: made by uid 65534 ' \
        "${P[@]}" --cred "$cred"
    # nobody's own probe: a right payload, restricted to nobody: munged refuses
    probe "a credential only uid 65534 may decode" 'munge credential: Unauthorized credential' \
        runuser -u nobody -- "${P[@]}" --cred-uid
else
    for t in 1 2 3 4; do
        skip "runuser or a build readable by nobody is missing: no other-uid probe"
    done
fi
probe "a hello without a credential" 'without a munge credential' \
    env ELASTIC_MESH_SECRET=some-secret "$MESH_MEMBER" --probe "$port" --to 1 --as 3 --members 5

# the members are unaffected; then a real loss is seen and survived
mesh_fence 0 1 2 3 4
for i in 0 1 2 3 4; do
    ! mesh_grep "$i" '^lost ' && grep -q '^fence 2 ok epoch 0 members 0,1,2,3,4 ' "$mesh_dir/out$i"
    ok $? "member $i: lost nobody, fence 2 with all five" || diag "$(mesh_out $i)"
done
kill -KILL "$(mesh_pid 4)"
for i in 0 1 2 3; do
    mesh_wait "$i" '^lost 4 epoch 1 live 4 ' 30
    ok $? "member $i: lost member 4" || diag "$(mesh_out $i)"
done
mesh_fence 0 1 2 3
for i in 0 1 2 3; do
    grep -q '^fence 3 ok epoch 1 members 0,1,2,3 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 3 over the survivors" || diag "$(mesh_out $i)"
done
mesh_stop
done_testing
