#!/bin/bash
# t5113-exec-mesh-torchrun.sh - torchrun's multi-node spelling without Slurm:
# `elastic-exec --nnodes 3 --node-rank K --rdzv-endpoint HOST:PORT
# --nproc-per-node 2 heat2d` started three times on this machine, each a
# "node" (mesh mode, src/exec/meshjob.c; the rendezvous is rdzv_tcp.c)
#
#   - the three meet at the endpoint (whichever binds it serves), form the
#     mesh, and run one MPI job of 6 ranks: the failure-free checksum, exit
#     0, the same summary line from each;
#   - a rank SIGKILLed on node 1: the survivors recover in place (6 -> 5),
#     the checksum, every member says 1 rank lost;
#   - node 1's elastic-exec SIGKILLed (its ranks die with it): the others
#     lose the member at once and recover in place (6 -> 4), the checksum;
#   - node 0, the rendezvous' host, SIGKILLed after the start: no single
#     point of failure, 6 -> 4 on the others;
#   - bad usage (--nnodes without --rdzv-endpoint, no secret, a wrong node
#     rank): one line and exit 2, nothing runs.
. "${srcdir:-.}/exec/lib.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
HEAT=${top_builddir:-..}/examples/heat2d
[ -x "$HEAT" ] || skip_all "heat2d is not built"
"$EXEC" --help 2>&1 | grep -q -- '--rdzv-endpoint' || skip_all "elastic-exec has no mesh mode in this build"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_opal_cuda_support=0
tmp=$(mktemp -d /tmp/t5113.XXXXXX)
cleanup() {
    local p
    for p in $(mark_pids); do kill -KILL "$p" 2> /dev/null; done
    [ "${tap_failed:-0}" -eq 0 ] && rm -rf "$tmp"
}
trap cleanup EXIT
HEAT_ARGS=(--nx 64 --ny 48)
ref=$("$HEAT" "${HEAT_ARGS[@]}" --steps 2000 2>&1 | sed -n 's/^checksum //p')
ref300=$("$HEAT" "${HEAT_ARGS[@]}" --steps 300 2>&1 | sed -n 's/^checksum //p')

# start NAME STEPS [HEAT ARGS...]: three nodes in the background; node K's
# output in $tmp/NAME.K, its status in $tmp/NAME.K.rc, its pid in pid[K]
pid=()
start() {
    local name=$1 steps=$2 port k
    shift 2
    port=$(free_port)
    for k in 2 1 0; do
        (
            rc=0
            ELASTIC_MESH_SECRET=t5113.$$ ELASTIC_TEST_MARK=$test_mark \
                timeout --kill-after=10 240 "$EXEC" --nnodes 3 --node-rank $k \
                --rdzv-endpoint 127.0.0.1:$port --nproc-per-node 2 --oversubscribe \
                --mpi-btl tcp --node-timeout 1 --event-log "$tmp/$name.ev.$k" \
                "$HEAT" "${HEAT_ARGS[@]}" --steps "$steps" "$@" > "$tmp/$name.$k" 2>&1 || rc=$?
            echo $rc > "$tmp/$name.$k.rc"
        ) &
    done
}
# the elastic-exec of node K of job NAME (from its event log's agent_pid)
agent_of() { ev_agent_pid "$tmp/$1.ev.$2"; }
done_all() {
    local name=$1 k
    for k in "${@:2}"; do wait_for_file "$tmp/$name.$k.rc" 240 || return 1; done
}
summary() { grep -h '^elastic-exec: job torchrun\.' "$tmp/$1".[0-9] | sort -u; }
out() { cat "$tmp/$1".[0-9]; }

# 1. a clean run
start clean 300
done_all clean 0 1 2
is "$(cat "$tmp"/clean.[012].rc | tr '\n' ' ')" "0 0 0 " "clean: the three nodes exit 0" || diag "$(tail -n 5 "$tmp"/clean.[012])"
is "$(out clean | sed -n 's/^checksum //p')" "$ref300" "clean: one MPI job of 6 ranks, the failure-free checksum"
summary clean | grep -q ': 6 ranks on 3 nodes; 0 nodes lost, 0 ranks lost; completed (exit 0)$' &&
    [ "$(summary clean | wc -l)" = 1 ]
ok $? "clean: the same summary line from every node" || diag "$(summary clean)"

# 2. a rank killed on node 1
start rank 2000 --progress 100 --sleep 1
wait_for_grep '^step 300$' "$tmp/rank.0" 120
ok $? "rank: the job computes" || diag "$(tail -n 5 "$tmp"/rank.[012])"
victim=$(pgrep -P "$(agent_of rank 1)" -x heat2d | head -n 1)
kill -KILL "$victim"
ok $? "rank: one of node 1's ranks (pid $victim) SIGKILLed"
done_all rank 0 1 2
is "$(out rank | sed -n 's/^checksum //p')" "$ref" "rank: the failure-free checksum"
out rank | grep -q '^resharded at step [0-9]*: world 6 -> 5$'
ok $? "rank: in place, 6 -> 5"
summary rank | grep -q '0 nodes lost, 1 rank lost; completed after in-place recovery (exit 0)$'
ok $? "rank: every node says 1 rank lost, completed" || diag "$(summary rank)"

# node_case NAME K: node K's elastic-exec SIGKILLed (its ranks with it)
node_case() {
    local name=$1 v=$2 k s=()
    start "$name" 2000 --progress 100 --sleep 1
    wait_for_grep '^step 300$' "$tmp/$name.0" 120 || wait_for_grep '^step 300$' "$tmp/$name.1" 5
    ok $? "$name: the job computes" || diag "$(tail -n 5 "$tmp/$name".[012])"
    kill -KILL "$(agent_of "$name" "$v")"
    ok $? "$name: node $v's elastic-exec SIGKILLed"
    for k in 0 1 2; do [ "$k" != "$v" ] && s+=("$k"); done
    done_all "$name" "${s[@]}"
    is "$(for k in "${s[@]}"; do cat "$tmp/$name.$k.rc"; done | tr '\n' ' ')" "0 0 " "$name: the other nodes exit 0" ||
        diag "$(tail -n 8 "$tmp/$name".[012])"
    is "$(out "$name" | sed -n 's/^checksum //p')" "$ref" "$name: the failure-free checksum"
    out "$name" | grep -q '^resharded at step [0-9]*: world 6 -> 4$'
    ok $? "$name: in place, 6 -> 4"
    summary "$name" | grep -q "1 node lost (127.0.0.1-$v), 2 ranks lost; completed after in-place recovery (exit 0)\$"
    ok $? "$name: the survivors' summary names the lost node" || diag "$(summary "$name")"
    wait_no_marked 30
    ok $? "$name: no process of the job is left" || diag "$(mark_pids)"
}
node_case node1 1
node_case node0 0

# 5. bad usage
rc=0
ELASTIC_MESH_SECRET=x "$EXEC" --nnodes 3 --node-rank 0 true > "$tmp/bad1" 2>&1 || rc=$?
is "$rc" 2 "bad usage: --nnodes without --rdzv-endpoint exits 2" && grep -q 'missing: --rdzv-endpoint' "$tmp/bad1"
ok $? "bad usage: the line names the missing flag" || diag "$(cat "$tmp/bad1")"
rc=0
(unset ELASTIC_MESH_SECRET ELASTIC_MESH_SECRET_FILE
    "$EXEC" --nnodes 2 --node-rank 0 --rdzv-endpoint 127.0.0.1:1 true > "$tmp/bad2" 2>&1) || rc=$?
is "$rc" 2 "bad usage: no secret exits 2" && grep -q 'ELASTIC_MESH_SECRET' "$tmp/bad2"
ok $? "bad usage: the line names ELASTIC_MESH_SECRET" || diag "$(cat "$tmp/bad2")"
rc=0
ELASTIC_MESH_SECRET=x "$EXEC" --nnodes 2 --node-rank 5 --rdzv-endpoint 127.0.0.1:1 true > "$tmp/bad3" 2>&1 || rc=$?
is "$rc" 2 "bad usage: --node-rank 5 of 2 exits 2" || diag "$(cat "$tmp/bad3")"
done_testing
