#!/bin/bash
# t5114-exec-mesh-elastic.sh - torchrun's elastic rendezvous over the mesh
# (src/exec/rdzv_mesh.c): `elastic-exec --nnodes MIN:MAX --node-rank K
# --rdzv-endpoint HOST:PORT --nproc-per-node P --wireup none ddp_train.py`
# started once per "node" on this machine, the workers a real PyTorch DDP
# training (gloo, CPU; tests/exec/ddp_train.py: deterministic, its result
# independent of the world size, a checkpoint every 5 steps):
#
#   - 2 nodes x 2 workers: the parameters' checksum of a single-node run of
#     4 workers, exit 0 on both;
#   - 3 x 1 (--nnodes 2:3, --max-restarts 0): node 2's elastic-exec
#     SIGKILLed mid-training (its worker dies with it): the others log the
#     lost node, stop their workers and re-rendezvous at 2 without spending
#     a restart, resume from the last checkpoint at world size 2 and end
#     with the failure-free checksum, exit 0;
#   - the same with node 0 killed: the rendezvous endpoint's host and the
#     master (group rank 0) - no single point of failure;
#   - a worker SIGKILLed on node 1 (--max-restarts 1): node 1 spends its
#     restart, the others restart with it without spending one, world 3
#     again, the checksum;
#   - --nnodes 3 (MIN = 3) and a node killed: the survivors fail, exit 1,
#     with one line saying how many nodes are left;
#   - restarts spent on node 1 (--max-restarts 0, a worker killed): node 1
#     closes the rendezvous and the others end too (exit 1, the line names
#     node 1) instead of going on without it;
#   - --nnodes 2:3 with two nodes, no --node-rank: the job starts at 2
#     once the last call passed, the nodes placed by the rendezvous;
#   - a node joining the running job: --nnodes 2:3 started with two
#     nodes; a third comes mid-training with the same flags: the endpoint's
#     server admits it into the mesh (member 2), the two log node_joined,
#     stop their workers and re-rendezvous at 3 without spending a
#     restart, training resumes from the checkpoint at world size 3 and
#     ends with the failure-free checksum on all three, exit 0; a fourth
#     is refused (the job has the 3 nodes MAX allows): exit 2, one line;
#   - a node with another secret: its JOIN refused at the bootstrap (exit
#     2), no worker started; bad usage (MIN > MAX, a range with --wireup
#     pmix or --rdzv-backend static, an unknown backend or --rdzv-conf
#     key, static without --node-rank): exit 2 and one line.
. "${srcdir:-.}/exec/lib.sh"

"$PY" -c 'import torch.distributed' 2> /dev/null || skip_all "$PY cannot import torch (python3-torch)"
"$EXEC" --help 2>&1 | grep -q -- '--rdzv-endpoint' || skip_all "elastic-exec has no mesh mode in this build"
TRAIN=${srcdir:-.}/exec/ddp_train.py
tmp=$(mktemp -d /tmp/t5114.XXXXXX)
cleanup() {
    local p
    for p in $(mark_pids); do kill -KILL "$p" 2> /dev/null; done
    [ "${tap_failed:-0}" -eq 0 ] && rm -rf "$tmp"
}
trap cleanup EXIT
STEPS=40

# the reference: one node, 4 workers, no failure
mkdir -p "$tmp/ref.ck"
ELASTIC_TEST_MARK=$test_mark timeout --kill-after=10 180 "$EXEC" --nproc-per-node 4 \
    "$PY" "$TRAIN" --steps $STEPS --ckpt "$tmp/ref.ck" > "$tmp/ref" 2>&1
ok $? "reference: one node of 4 workers trains" || diag "$(tail -n 20 "$tmp/ref")"
ref=$(sed -n 's/^final .*checksum=//p' "$tmp/ref")
if [ -z "$ref" ]; then
    echo "Bail out! no reference checksum: $(tail -n 1 "$tmp/ref")"
    exit 1
fi

# start NAME NNODES SPEC NPROC [ELASTIC-EXEC ARGS...]: NNODES nodes in the
# background (--nnodes SPEC); node K's output in $tmp/NAME.K, status in
# $tmp/NAME.K.rc, event log $tmp/NAME.ev.K, progress in $tmp/NAME.prog
start() {
    local name=$1 n=$2 spec=$3 nproc=$4 k
    shift 4
    free_port > "$tmp/$name.port"
    mkdir -p "$tmp/$name.ck"
    for ((k = n - 1; k >= 0; k--)); do
        start_one "$name" "$k" "$spec" "$nproc" "$@"
    done
}
# start_one NAME K SPEC NPROC [ARGS...]: node K of NAME (its endpoint)
start_one() {
    local name=$1 k=$2 spec=$3 nproc=$4 port rank=(--node-rank "$2")
    shift 4
    port=$(cat "$tmp/$name.port")
    [ -n "${NO_NODE_RANK:-}" ] && rank=()
    (
        rc=0
        ELASTIC_MESH_SECRET=${SECRET:-t5114.$$} ELASTIC_TEST_MARK=$test_mark \
            timeout --kill-after=10 240 "$EXEC" -v --nnodes "$spec" "${rank[@]}" \
            --rdzv-endpoint 127.0.0.1:$port --nproc-per-node "$nproc" --wireup none \
            --node-timeout 1 --event-log "$tmp/$name.ev.$k" "$@" \
            "$PY" "$TRAIN" --steps $STEPS --ckpt "$tmp/$name.ck" --step-delay 0.1 \
            --progress "$tmp/$name.prog" > "$tmp/$name.$k" 2>&1 || rc=$?
        echo $rc > "$tmp/$name.$k.rc"
    ) &
}
agent_of() { ev_agent_pid "$tmp/$1.ev.$2"; }
done_all() {
    local name=$1 k
    for k in "${@:2}"; do wait_for_file "$tmp/$name.$k.rc" 240 || return 1; done
}
rcs() { for k in "${@:2}"; do cat "$tmp/$1.$k.rc"; done | tr '\n' ' '; }
final() { sed -n 's/^final .*checksum=//p' "$tmp/$1".[0-9]; }
# same CHECKSUM: equal to the reference within 1e-4 (the sum of the
# gradients' shares differs in float rounding between world sizes)
same() { awk -v a="$1" -v b="$ref" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-4) }'; }
# rdzv_ms EVENTLOG [EVENT]: ms from the (first) EVENT (node_lost) to the
# last rendezvous
rdzv_ms() {
    "$PY" -c '
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
lost = [e["ts"] for e in evs if e["event"] == sys.argv[2]]
rdzv = [e["ts"] for e in evs if e["event"] == "rendezvous"]
print("%.1f" % ((rdzv[-1] - lost[0]) * 1e3) if lost and rdzv else "?")' "$1" "${2:-node_lost}"
}
# wait until training passed step 10 (a checkpoint exists)
training() { wait_for_grep '^step 1[0-9] ' "$tmp/$1.prog" 120; }

# 1. two nodes of two workers (torchrun's habits: c10d, a join timeout)
start clean 2 2 2 --rdzv-backend c10d --rdzv-conf join_timeout=120,last_call_timeout=1
done_all clean 0 1
is "$(rcs clean 0 1)" "0 0 " "clean: both nodes exit 0" || diag "$(tail -n 8 "$tmp"/clean.[01])"
c=$(final clean)
same "$c"
ok $? "clean: 2 nodes x 2 workers end with the single-node checksum ($c, $ref)"
grep -q '^start world=4 step=0 restart=0$' "$tmp/clean.0"
ok $? "clean: one group of 4 workers"
is "$(ev_get "$tmp/clean.ev.1" rendezvous group_rank)" 1 "clean: node 1 is group rank 1"

# node_case NAME K: node K's elastic-exec SIGKILLed mid-training
node_case() {
    local name=$1 v=$2 k s=()
    start "$name" 3 2:3 1 --max-restarts 0
    training "$name"
    ok $? "$name: the group trains" || diag "$(tail -n 5 "$tmp/$name".[012])"
    kill -KILL "$(agent_of "$name" "$v")"
    ok $? "$name: node $v's elastic-exec SIGKILLed"
    for k in 0 1 2; do [ "$k" != "$v" ] && s+=("$k"); done
    done_all "$name" "${s[@]}"
    is "$(rcs "$name" "${s[@]}")" "0 0 " "$name: the other nodes exit 0" ||
        diag "$(tail -n 12 "$tmp/$name".[012])"
    grep -q '^start world=2 step=[1-9][0-9]* restart=0$' "$tmp/$name".[0-9]
    ok $? "$name: resumed from a checkpoint at world size 2, no restart spent" ||
        diag "$(grep -h '^start' "$tmp/$name".[012])"
    c=$(final "$name")
    same "$c"
    ok $? "$name: the failure-free checksum ($c, $ref)"
    for k in "${s[@]}"; do
        is "$(ev_count "$tmp/$name.ev.$k" node_lost member="$v")" 1 "$name: node $k logged node $v lost"
        is "$(ev_get "$tmp/$name.ev.$k" rendezvous group_world_size)" 2 "$name: node $k's last round has 2 nodes"
        diag "$name: node $k: node_lost -> round 2 made: $(rdzv_ms "$tmp/$name.ev.$k") ms"
    done
    wait_no_marked 30
    ok $? "$name: no process of the job is left" || diag "$(mark_pids)"
}
node_case node2 2
node_case node0 0

# 4. a worker killed: a group restart across the nodes
start worker 3 3 1 --max-restarts 1
training worker
ok $? "worker: the group trains"
victim=$(pgrep -P "$(agent_of worker 1)" -x "$(basename "$PY")" | head -n 1)
kill -KILL "$victim"
ok $? "worker: node 1's worker (pid $victim) SIGKILLed"
done_all worker 0 1 2
is "$(rcs worker 0 1 2)" "0 0 0 " "worker: the three nodes exit 0" || diag "$(tail -n 12 "$tmp"/worker.[012])"
grep -q '^start world=3 step=[1-9][0-9]* restart=[01]$' "$tmp/worker.0"
ok $? "worker: the group restarted from a checkpoint at world size 3" ||
    diag "$(grep -h '^start' "$tmp"/worker.[012])"
# node 1 sees its worker die first and spends its restart; a node whose
# worker failed (gloo: the peer is gone) before node 1's new round reached
# it spends one of its own, a node that hears the round first none
is "$(ev_count "$tmp/worker.ev.1" restart)" 1 "worker: node 1 spent its restart"
n=$(($(ev_count "$tmp/worker.ev.0" rendezvous) + $(ev_count "$tmp/worker.ev.2" rendezvous)))
is "$n" 4 "worker: nodes 0 and 2 took part in both rounds"
c=$(final worker)
same "$c"
ok $? "worker: the failure-free checksum ($c, $ref)"

# 5. fewer nodes than MIN
start min 3 3 1 --max-restarts 0
training min
ok $? "min: the group trains"
kill -KILL "$(agent_of min 2)"
done_all min 0 1
is "$(rcs min 0 1)" "1 1 " "min: the survivors exit 1" || diag "$(tail -n 8 "$tmp"/min.[01])"
grep -q '2 nodes left, fewer than the 3 --nnodes asks for' "$tmp/min.0" &&
    grep -q '2 nodes left, fewer than the 3 --nnodes asks for' "$tmp/min.1"
ok $? "min: both say how many nodes are left" || diag "$(grep -h 'rendezvous' "$tmp"/min.[01] | tail -n 4)"
wait_no_marked 30
ok $? "min: no process of the job is left" || diag "$(mark_pids)"

# 6. restarts spent on one node: it closes the rendezvous
start closed 3 2:3 1 --max-restarts 0
training closed
ok $? "closed: the group trains"
kill -KILL "$(pgrep -P "$(agent_of closed 1)" -x "$(basename "$PY")" | head -n 1)"
done_all closed 0 1 2
is "$(rcs closed 0 1 2)" "1 137 1 " "closed: node 1 exits with its worker's status (SIGKILL), the others 1" || diag "$(tail -n 8 "$tmp"/closed.[012])"
grep -q 'node 127.0.0.1-1 (member 1) closed the rendezvous' "$tmp/closed.0" &&
    grep -q 'node 127.0.0.1-1 (member 1) closed the rendezvous' "$tmp/closed.2"
ok $? "closed: the others name node 1 as the one that closed it" ||
    diag "$(grep -h 'rendezvous' "$tmp"/closed.[02] | tail -n 4)"
wait_no_marked 30
ok $? "closed: no process of the job is left" || diag "$(mark_pids)"

# 7. a range that starts with fewer than MAX: --nnodes 2:3, two nodes
# come, neither with --node-rank (torchrun's c10d habit); the job starts
# at 2 once the last call (1 s) passed
NO_NODE_RANK=1 start fewer 2 2:3 1 --rdzv-conf last_call_timeout=1
done_all fewer 0 1
is "$(rcs fewer 0 1)" "0 0 " "fewer: both nodes exit 0" || diag "$(tail -n 8 "$tmp"/fewer.[01])"
grep -q '^start world=2 step=0 restart=0$' "$tmp"/fewer.[01]
ok $? "fewer: one group of 2 workers" || diag "$(grep -h '^start' "$tmp"/fewer.[01])"
c=$(final fewer)
same "$c"
ok $? "fewer: the single-node checksum ($c, $ref)"
grep -q 'the job started with 2 of at most 3 nodes' "$tmp/fewer.0" &&
    grep -q 'the job started with 2 of at most 3 nodes' "$tmp/fewer.1"
ok $? "fewer: both say the job started with 2 of at most 3 nodes" ||
    diag "$(grep -h 'rendezvous\|started' "$tmp"/fewer.[01] | head -n 6)"
is "$(for k in 0 1; do ev_get "$tmp/fewer.ev.$k" rendezvous group_rank; done | sort | tr '\n' ' ')" \
    "0 1 " "fewer: the rendezvous placed them at group ranks 0 and 1"

# 8. a node joining the running job (and a fourth one refused)
# joined_seen NAME K: node K of NAME logged member 2 joining
joined_seen() {
    [ -f "$tmp/$1.ev.$2" ] && [ "$(ev_count "$tmp/$1.ev.$2" node_joined member=2)" = 1 ]
}
start join 2 2:3 1 --rdzv-conf last_call_timeout=1
training join
ok $? "join: two nodes train" || diag "$(tail -n 5 "$tmp"/join.[01])"
NO_NODE_RANK=1 start_one join 2 2:3 1
for k in 0 1; do
    wait_until 60 joined_seen join "$k"
    ok $? "join: node $k logged node_joined for member 2" || diag "$(tail -n 6 "$tmp/join.$k")"
done
done_all join 0 1 2
is "$(rcs join 0 1 2)" "0 0 0 " "join: the three nodes exit 0" || diag "$(tail -n 12 "$tmp"/join.[012])"
grep -q 'joined the running job as node 2' "$tmp/join.2"
ok $? "join: the newcomer says it joined the running job as node 2" || diag "$(head -n 12 "$tmp/join.2")"
grep -q '^start world=3 step=[1-9][0-9]* restart=0$' "$tmp"/join.[012]
ok $? "join: training resumed from a checkpoint at world size 3, no restart spent" ||
    diag "$(grep -h '^start' "$tmp"/join.[012])"
for k in 0 1 2; do
    is "$(ev_get "$tmp/join.ev.$k" rendezvous group_world_size)" 3 "join: node $k's last round has 3 nodes"
    is "$(ev_count "$tmp/join.ev.$k" restart)" 0 "join: node $k spent no restart"
done
for k in 0 1; do
    diag "join: node $k: node_joined -> round of 3 made: $(rdzv_ms "$tmp/join.ev.$k" node_joined) ms"
done
c=$(final join)
same "$c"
ok $? "join: the failure-free checksum ($c, $ref)"
start join2 2 2:3 1 --rdzv-conf last_call_timeout=1
training join2
NO_NODE_RANK=1 start_one join2 2 2:3 1
wait_until 60 joined_seen join2 0
ok $? "full: the third node joins"
NO_NODE_RANK=1 start_one join2 3 2:3 1
wait_for_file "$tmp/join2.3.rc" 120
is "$(cat "$tmp/join2.3.rc")" 2 "full: a fourth node exits 2" &&
    grep -q 'the job has 3 nodes, the most --nnodes 2:3 allows: no room for another' "$tmp/join2.3"
ok $? "full: its line says the job has the 3 nodes --nnodes 2:3 allows" || diag "$(tail -n 4 "$tmp/join2.3")"
! grep -q '^start world' "$tmp/join2.3"
ok $? "full: the fourth node started no worker"
done_all join2 0 1 2
is "$(rcs join2 0 1 2)" "0 0 0 " "full: the three nodes exit 0" || diag "$(tail -n 8 "$tmp"/join2.[012])"
wait_no_marked 30
ok $? "join: no process of the job is left" || diag "$(mark_pids)"

# 9. another secret: the bootstrap refuses the stranger at once (the other
# node, which serves or waits for its peer, is killed after)
port=$(free_port)
for k in 0 1; do
    (
        rc=0
        ELASTIC_MESH_SECRET=t5114.$$.$k ELASTIC_TEST_MARK=$test_mark timeout 120 "$EXEC" \
            --nnodes 2 --node-rank $k --rdzv-endpoint 127.0.0.1:$port --nproc-per-node 1 \
            --wireup none "$PY" "$TRAIN" --steps 2 --ckpt "$tmp" > "$tmp/secret.$k" 2>&1 || rc=$?
        echo $rc > "$tmp/secret.$k.rc"
    ) &
done
wait_until 60 eval "[ -f $tmp/secret.0.rc ] || [ -f $tmp/secret.1.rc ]"
ok $? "secret: one of two nodes with different secrets ends"
stranger=0
[ -f "$tmp/secret.1.rc" ] && stranger=1
is "$(cat "$tmp/secret.$stranger.rc")" 2 "secret: it exits 2, as any bootstrap refusal"
grep -q "the JOIN's MAC does not verify" "$tmp/secret.$stranger"
ok $? "secret: the rendezvous refused its JOIN" || diag "$(cat "$tmp/secret.$stranger")"
for p in $(mark_pids); do kill -TERM "$p" 2> /dev/null; done
wait_no_marked 30
ok $? "secret: the other node stops on SIGTERM" || diag "$(mark_pids)"
! grep -q '^start world' "$tmp"/secret.[01]
ok $? "secret: no worker trained"
rc=0
ELASTIC_MESH_SECRET=x "$EXEC" --nnodes 3:2 --node-rank 0 --rdzv-endpoint 127.0.0.1:1 true > "$tmp/bad1" 2>&1 || rc=$?
is "$rc" 2 "bad usage: --nnodes 3:2 exits 2" && grep -q "MIN 3 is larger than MAX 2" "$tmp/bad1"
ok $? "bad usage: the line names MIN and MAX" || diag "$(cat "$tmp/bad1")"
rc=0
ELASTIC_MESH_SECRET=x "$EXEC" --nnodes 2:3 --node-rank 0 --rdzv-endpoint 127.0.0.1:1 --wireup pmix true > "$tmp/bad2" 2>&1 || rc=$?
is "$rc" 2 "bad usage: a range with --wireup pmix exits 2" && grep -q "wireup none" "$tmp/bad2"
ok $? "bad usage: the line says a range is for --wireup none" || diag "$(cat "$tmp/bad2")"
rc=0
"$EXEC" --nnodes 2 --rdzv-backend etcd true > "$tmp/bad3" 2>&1 || rc=$?
is "$rc" 2 "bad usage: --rdzv-backend etcd exits 2" && grep -q "'etcd' is not a rendezvous backend (elastic, c10d or static)" "$tmp/bad3"
ok $? "bad usage: the line names the backends" || diag "$(cat "$tmp/bad3")"
rc=0
"$EXEC" --nnodes 2 --rdzv-conf join_timeout=1,foo=2 true > "$tmp/bad4" 2>&1 || rc=$?
is "$rc" 2 "bad usage: --rdzv-conf foo=2 exits 2" && grep -q "'foo' is not a rendezvous setting" "$tmp/bad4"
ok $? "bad usage: the line names the key" || diag "$(cat "$tmp/bad4")"
rc=0
ELASTIC_MESH_SECRET=x "$EXEC" --nnodes 2:3 --rdzv-backend static --node-rank 0 --rdzv-endpoint 127.0.0.1:1 true > "$tmp/bad5" 2>&1 || rc=$?
is "$rc" 2 "bad usage: a range with --rdzv-backend static exits 2" && grep -q "static takes a fixed --nnodes N" "$tmp/bad5"
ok $? "bad usage: the line says static takes a fixed N" || diag "$(cat "$tmp/bad5")"
rc=0
ELASTIC_MESH_SECRET=x "$EXEC" --nnodes 2 --rdzv-backend static --rdzv-endpoint 127.0.0.1:1 true > "$tmp/bad6" 2>&1 || rc=$?
is "$rc" 2 "bad usage: --rdzv-backend static without --node-rank exits 2" &&
    grep -q "missing: --node-rank" "$tmp/bad6"
ok $? "bad usage: the line names --node-rank" || diag "$(cat "$tmp/bad6")"
done_testing
