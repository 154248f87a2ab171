#!/bin/bash
# t6022-slurm-mesh-elastic.sh - torchrun's elastic rendezvous over the mesh
# (src/exec/rdzv_mesh.c, doc/mesh.md) under srun on the emulated 3-node
# cluster: `srun --no-kill -N3 --ntasks-per-node=1 elastic-exec --nnodes 2:3
# --nproc-per-node 2 --wireup none ddp_train.py`, no --node-rank and no
# --rdzv-endpoint (the map is Slurm's), a real PyTorch DDP training (gloo,
# CPU; tests/exec/ddp_train.py: a checkpoint every 5 steps, its result
# independent of the world size), the nodes authenticated with munge:
#
#   1. clean: one group of 6 workers on n1..n3, srun exit 0, the checksum
#      of a single-node run of 4 workers (outside the cluster);
#   2. bad: --nnodes 4:5 on a 3-node step: exit 2 on every task, with one
#      line naming the step's node count, before any worker starts;
#   3. node lost: every process of n3 SIGKILLed (its slurmd, elastic-exec
#      and workers) once training passed step 10: n1's and n2's
#      elastic-exec log node_lost for n3, re-rendezvous at 2 nodes
#      (world 4) without spending a restart, resume from the checkpoint and
#      end with the reference checksum; each survivor's own exit status is
#      0 (a wrapper records it: srun's is the largest of its tasks', and
#      n3's task is Slurm's to report).
#
# The workers' gloo binds to the address of the node's host name, which
# the emulated nodes cannot resolve (gloo would fall back to 127.0.0.1 and
# the other nodes could not reach it): GLOO_SOCKET_IFNAME names the nodes'
# interface (eth0 in every node's namespace; srun passes the environment).
# (exec/lib.sh unsets ELASTIC_*: keep the fixture's mode, lib/slurm.sh's)
mode=${ELASTIC_SLURM_MODE:-}
. "${srcdir:-.}/exec/lib.sh"
[ -z "$mode" ] || export ELASTIC_SLURM_MODE=$mode
. "${srcdir:-.}/lib/slurm.sh"
. "${srcdir:-.}/lib/slurm-mesh.sh"

slurm_require
build=$(cd "${top_builddir:-..}" && pwd)
EXEC=$build/src/exec/elastic-exec
TRAIN=$(cd "${srcdir:-.}/exec" && pwd)/ddp_train.py
[ -x "$EXEC" ] || skip_all "elastic-exec is not built ($EXEC)"
"$EXEC" --help 2>&1 | grep -q -- '--nnodes V .*MIN:MAX' ||
    skip_all "elastic-exec has no elastic rendezvous over the mesh in this build (libsodium, PMIx)"
"$PY" -c 'import torch.distributed' 2> /dev/null || skip_all "$PY cannot import torch (python3-torch)"
tmp=$(mktemp -d /tmp/t6022.XXXXXX)
trap 'kill_marked; rm -rf "$tmp"' EXIT
# munge authenticates the members (the cluster's munged, through AuthInfo
# in $SLURM_CONF): no secret
unset ELASTIC_MESH_SECRET ELASTIC_MESH_SECRET_FILE
export GLOO_SOCKET_IFNAME=eth0
STEPS=40

# the reference: one node of 4 workers, outside the cluster
mkdir -p "$tmp/ref.ck"
ELASTIC_TEST_MARK=$test_mark timeout --kill-after=10 240 "$EXEC" --nproc-per-node 4 \
    "$PY" "$TRAIN" --steps $STEPS --ckpt "$tmp/ref.ck" > "$tmp/ref" 2>&1
ok $? "reference: one node of 4 workers trains (outside the cluster)" || diag "$(tail -n 20 "$tmp/ref")"
ref=$(sed -n 's/^final .*checksum=//p' "$tmp/ref")
[ -n "$ref" ] || {
    echo "Bail out! no reference checksum: $(tail -n 1 "$tmp/ref")"
    exit 1
}
wait_no_marked 30 || kill_marked

mesh_cluster_up 3

# same CHECKSUM: the reference's within 1e-4 (the gradients' shares are
# summed in another order at another world size)
same() { awk -v a="$1" -v b="$ref" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-4) }'; }
final() { tr -d '\0' < "$tmp/$1.out" | sed -n 's/^final .*checksum=//p'; }
# WRAP: each task records its node's event log ($tmp/NAME.ev.nK) and its
# elastic-exec's exit status ($tmp/NAME.rc.nK)
# shellcheck disable=SC2016 # expanded by the task's shell
WRAP=(sh -c 'p=$1 x=$2 rc=0
shift 2
"$x" --event-log "$p.ev.$SLURMD_NODENAME" "$@" || rc=$?
echo "$rc" > "$p.rc.$SLURMD_NODENAME"
exit "$rc"' wrap)
# job NAME ARGS...: the training's srun arguments, NAME's files under $tmp
job() {
    local name=$1
    shift
    mkdir -p "$tmp/$name.ck"
    JOB=(-N3 --ntasks-per-node=1 "${WRAP[@]}" "$tmp/$name" "$EXEC" -v "$@" --nproc-per-node 2
        --wireup none --node-timeout 1 "$PY" "$TRAIN" --steps "$STEPS" --ckpt "$tmp/$name.ck"
        --step-delay 0.1 --progress "$tmp/$name.prog")
}
# ev_n / ev_last: exec/lib.sh's ev_count / ev_get, nothing where a node
# wrote no event log
ev_n() { [ -f "$1" ] && ev_count "$@"; }
ev_last() { [ -f "$1" ] && ev_get "$@"; }
rcs() { for n in "${@:2}"; do cat "$tmp/$1.rc.$n" 2> /dev/null || echo none; done | tr '\n' ' '; }
node_summary() { grep -a "^elastic-exec: job slurm\.[0-9]*\.[0-9]*: node $2: " "$tmp/$1.out"; }
# no process of the job left on the nodes NODES...
no_job_on() {
    local n
    for n in "$@"; do
        [ -z "$(task_pids "$n" 'elastic-exec|ddp_train')" ] || return 1
    done
}

# 1. clean
job clean --nnodes 2:3
srun_fg clean "${JOB[@]}"
is "$SRUN_RC" 0 "clean: srun -N3 elastic-exec --nnodes 2:3 --nproc-per-node 2 ddp_train.py: exit 0" ||
    diag "$(show clean 40)"
is "$(rcs clean n1 n2 n3)" "0 0 0 " "clean: the three elastic-exec exit 0"
grep -aq '^start world=6 step=0 restart=0$' "$tmp/clean.out"
ok $? "clean: one group of 6 workers from step 0" || diag "$(grep -a '^start' "$tmp/clean.out")"
c=$(final clean)
same "$c"
ok $? "clean: the single-node checksum ($c, $ref)"
for n in n1 n2 n3; do
    is "$(ev_last "$tmp/clean.ev.$n" rendezvous group_world_size)" 3 "clean: $n's rendezvous has 3 nodes"
    node_summary clean $n | grep -q ': completed (exit 0)$'
    ok $? "clean: $n's elastic-exec says completed (exit 0)" || diag "$(node_summary clean $n)"
done
is "$(cat "$tmp"/clean.ev.n[123] 2> /dev/null | grep -c '"event":"node_lost"')" 0 "clean: no node lost"
wait_until 30 no_job_on n1 n2 n3
ok $? "clean: no process of the job is left on the nodes"

# 2. bad: more nodes asked for than the step has
job bad --nnodes 4:5
srun_fg bad "${JOB[@]}"
is "$SRUN_RC" 2 "bad: --nnodes 4:5 on a 3-node step: srun exit 2" || diag "$(show bad)"
is "$(rcs bad n1 n2 n3)" "2 2 2 " "bad: each elastic-exec exits 2"
is "$(grep -ac -e '--nnodes 4:5: the Slurm step has 3 nodes$' "$tmp/bad.out")" 3 \
    "bad: each says the Slurm step has 3 nodes" || diag "$(show bad)"
! grep -aq '^start world' "$tmp/bad.out" && ! [ -e "$tmp/bad.prog" ]
ok $? "bad: no worker started"

# 3. node lost: every process of n3 SIGKILLed mid-training
# (after step 10: a checkpoint exists, ckpt.pt at step 10 or later)
training() { grep -q '^step [1-4][0-9] world 6\( \|$\)' "$tmp/lost.prog" 2> /dev/null; }
training_or_end() { training || [ -e "$tmp/lost.rc" ]; }
lost_logged() {
    local n
    for n in n1 n2; do
        grep '"event":"node_lost"' "$tmp/lost.ev.$n" 2> /dev/null | grep -q '"node":"n3"' || return 1
    done
}
lost_case() {
    local n c t0
    job lost --nnodes 2:3
    srun_bg lost "${JOB[@]}"
    wait_until 180 training_or_end
    training
    ok $? "lost: the group of 6 trains past step 10" || {
        diag "$(show lost 30)"
        return 1
    }
    t0=$(now_ms)
    kill_node n3
    ok $? "lost: every process of n3 SIGKILLed (slurmd, elastic-exec, workers)"
    wait_until 60 lost_logged
    ok $? "lost: n1's and n2's elastic-exec logged node_lost for n3" ||
        diag "$(grep -h node_lost "$tmp"/lost.ev.* 2>&1)" "$(show lost 30)"
    diag "lost: n3 killed -> both survivors logged node_lost: $(($(now_ms) - t0)) ms (--node-timeout 1)"
    wait_for_file "$tmp/lost.rc.n1" 240 && wait_for_file "$tmp/lost.rc.n2" 240
    is "$(rcs lost n1 n2)" "0 0 " "lost: n1's and n2's elastic-exec exit 0" || diag "$(show lost 40)"
    grep -aq '^start world=4 step=[1-9][0-9]* restart=0$' "$tmp/lost.out"
    ok $? "lost: resumed from a checkpoint at world size 4 (2 nodes), no restart spent" ||
        diag "$(grep -a '^start' "$tmp/lost.out")"
    grep -aq "^final steps=$STEPS world=4 " "$tmp/lost.out"
    ok $? "lost: the 4 workers finished the $STEPS steps" || diag "$(grep -a '^final' "$tmp/lost.out")"
    c=$(final lost)
    same "$c"
    ok $? "lost: the single-node checksum ($c, $ref)"
    for n in n1 n2; do
        is "$(ev_n "$tmp/lost.ev.$n" node_lost node=n3)" 1 "lost: $n logged n3 lost once"
        is "$(ev_last "$tmp/lost.ev.$n" rendezvous group_world_size)" 2 "lost: $n's last round has 2 nodes"
        is "$(ev_n "$tmp/lost.ev.$n" restart)" 0 "lost: $n spent no restart"
        node_summary lost $n | grep -q ': completed (exit 0)$'
        ok $? "lost: $n's elastic-exec says completed (exit 0)" || diag "$(node_summary lost $n)"
    done
    [ ! -e "$tmp/lost.rc.n3" ]
    ok $? "lost: n3's task recorded nothing (killed with its node)"
    wait_for_file "$tmp/lost.rc" 120
    ok $? "lost: srun --no-kill ends after the survivors"
    # srun's own status is not the job's: it says "Node failure on n3" and
    # exits with the largest status it saw of its tasks (doc/slurm.md)
    diag "lost: srun exit $(cat "$tmp/lost.rc" 2> /dev/null); what it said of the tasks:" \
        "$(grep -a '^srun: ' "$tmp/lost.out")"
    wait_until 30 no_job_on n1 n2
    ok $? "lost: no process of the job is left on n1 and n2"
}
lost_case
done_testing
