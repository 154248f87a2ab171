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
#   3. cut: n3's network cut (its veth on the cluster's bridge down, as
#      t6020 cuts n2's) once training passed step 10: no connection
#      closes, so n1's and n2's elastic-exec log node_lost for n3 (member
#      2) once it is silent for --node-timeout (1 s; the delay from the
#      cut is printed), re-rendezvous at 2 nodes (world 4) without
#      spending a restart, resume from the checkpoint and end with the
#      reference checksum, exit 0; n3, the minority side, is fenced by its
#      mesh ("cut off from the mesh, fencing itself"), its rendezvous
#      fails ("this node is cut off from the mesh"), it stops its workers
#      and exits 1, leaving no process of the job; srun ends once Slurm
#      declares n3 down; then the link comes back (and n3 into Slurm),
#      whatever happened in the case.  It
#      runs before case 4, which leaves the cluster without n3;
#   4. node lost: every process of n3 SIGKILLed (its slurmd, elastic-exec
#      and workers) once training passed step 10: n1's and n2's
#      elastic-exec log node_lost for n3, re-rendezvous at 2 nodes
#      (world 4) without spending a restart, resume from the checkpoint and
#      end with the reference checksum; each survivor's own exit status is
#      0 (a wrapper records it: srun's is the largest of its tasks', and
#      n3's task is Slurm's to report);
#   5. a node joins, then the endpoint's host is lost: torchrun's flags
#      under srun (--rdzv-endpoint on n1's address), a first job step on
#      n1 and n2 trains at 2 nodes (world 4); a second step on n3 with the
#      same flags joins it (admitted through n1's server: n1 and n2 log
#      node_joined, the three go on at world 6 without a restart); then
#      every process of n1 - the endpoint's host, the rendezvous' first
#      server and the master - is SIGKILLed: n2 and n3 go on at world 4
#      from the checkpoint and end with the single-node checksum, exit 0.
#
# A wrapper runs each task's elastic-exec: it records the node's event log,
# the exit status and a copy of the stderr (what a node cut off from srun
# says) in per-node files.
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
# WRAP: each task records its node's event log ($tmp/NAME.ev.nK), its
# elastic-exec's exit status ($tmp/NAME.rc.nK, written whole: a rename) and
# a copy of its stderr ($tmp/NAME.err.nK: what a node cut off from srun
# says; srun gets it too)
# shellcheck disable=SC2016 # expanded by the task's shell
WRAP=(sh -c 'p=$1 x=$2 n=$SLURMD_NODENAME
shift 2
{ {
    rc=0
    "$x" --event-log "$p.ev.$n" "$@" 2>&1 >&3 3>&- || rc=$?
    echo "$rc" > "$p.rc.$n.tmp" && mv "$p.rc.$n.tmp" "$p.rc.$n"
} | tee "$p.err.$n" >&2 3>&-; } 3>&1
exit "$(cat "$p.rc.$n")"' wrap)
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

# training NAME: NAME's group of 6 trains after step 10 (a checkpoint
# exists, ckpt.pt at step 10 or later); training_or_end: or its srun ended
training() { grep -q '^step [1-4][0-9] world 6\( \|$\)' "$tmp/$1.prog" 2> /dev/null; }
training_or_end() { training "$1" || [ -e "$tmp/$1.rc" ]; }
# lost_logged NAME: n1's and n2's event logs have node_lost for n3
lost_logged() {
    local n
    for n in n1 n2; do
        grep '"event":"node_lost"' "$tmp/$1.ev.$n" 2> /dev/null | grep -q '"node":"n3"' || return 1
    done
}

# survivors NAME WHO FIELD=VALUE...: n1 and n2, the majority, went on at 2
# nodes from the checkpoint, each having logged node_lost (with FIELDs,
# WHO in the line) once, and ended with the single-node checksum
survivors() {
    local name=$1 who=$2 n c
    shift 2
    wait_for_file "$tmp/$name.rc.n1" 240 && wait_for_file "$tmp/$name.rc.n2" 240
    is "$(rcs "$name" n1 n2)" "0 0 " "$name: n1's and n2's elastic-exec exit 0" || diag "$(show "$name" 40)"
    grep -aq '^start world=4 step=[1-9][0-9]* restart=0$' "$tmp/$name.out"
    ok $? "$name: resumed from a checkpoint at world size 4 (2 nodes), no restart spent" ||
        diag "$(grep -a '^start' "$tmp/$name.out")"
    grep -aq "^final steps=$STEPS world=4 " "$tmp/$name.out"
    ok $? "$name: the 4 workers finished the $STEPS steps" || diag "$(grep -a '^final' "$tmp/$name.out")"
    c=$(final "$name")
    same "$c"
    ok $? "$name: the single-node checksum ($c, $ref)"
    for n in n1 n2; do
        is "$(ev_n "$tmp/$name.ev.$n" node_lost "$@")" 1 "$name: $n logged $who lost once"
        is "$(ev_last "$tmp/$name.ev.$n" rendezvous group_world_size)" 2 "$name: $n's last round has 2 nodes"
        is "$(ev_n "$tmp/$name.ev.$n" restart)" 0 "$name: $n spent no restart"
        node_summary "$name" $n | grep -q ': completed (exit 0)$'
        ok $? "$name: $n's elastic-exec says completed (exit 0)" || diag "$(node_summary "$name" $n)"
    done
}

# 3. cut: n3's network cut mid-training (its veth on the cluster's bridge
# down, as t6020 cuts n2's), before the node-lost case (which leaves the
# cluster without n3's slurmd); the link comes back after the case,
# whatever happened in it
prefix=$(sed -n 's/^PREFIX=//p' "$CLUSTER_DIR/cluster.env")
link_n3() { ip -n "$prefix-ctl" link set veth3 "$1"; }
# since_ms T0 T: (T - T0) in ms, T and T0 Unix seconds (nothing without T)
since_ms() { [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }
cut_case() {
    local n c t_cut d
    job cut --nnodes 2:3
    srun_bg cut "${JOB[@]}"
    wait_until 180 training_or_end cut
    training cut
    ok $? "cut: the group of 6 trains past step 10" || {
        diag "$(show cut 30)"
        return 1
    }
    t_cut=$(date +%s.%N)
    link_n3 down
    ok $? "cut: n3's link cut (veth3 down)" || return 1
    wait_until 60 lost_logged cut
    ok $? "cut: n1's and n2's elastic-exec logged node_lost for n3" ||
        diag "$(grep -h node_lost "$tmp"/cut.ev.* 2>&1)" "$(show cut 30)"
    # no connection closes: n3 is lost once silent for the node timeout,
    # counted from the last heartbeat it sent before the cut (they go every
    # 0.2 s, a fifth of it): so 0.8 s at least (less the loop's ticks),
    # where a closed connection takes ~0.15 s (the node-lost case)
    for n in n1 n2; do
        d=$(since_ms "$t_cut" "$(ev_last "$tmp/cut.ev.$n" node_lost ts)")
        diag "cut: n3's link cut -> $n's node_lost: ${d:-?} ms (--node-timeout 1)"
        [ -n "$d" ] && [ "$d" -ge 600 ]
        ok $? "cut: $n lost n3 to its silence, not at once (${d:-?} ms)"
    done
    # n1 (member 0) is n3's tree parent: it sees the silence, n2 is told
    grep -aq 'mesh 0: member 2 lost (silent)' "$tmp/cut.err.n1"
    ok $? "cut: n1's mesh lost member 2 (n3) as silent" || diag "$(grep -a 'mesh 0' "$tmp/cut.err.n1")"
    # n3, the minority side: its mesh fences it, it stops its workers
    wait_for_grep 'mesh 2: cut off from the mesh, fencing itself' "$tmp/cut.err.n3" 60
    ok $? "cut: n3's mesh fenced itself (cut off from the mesh)" ||
        diag "$(tail -n 20 "$tmp/cut.err.n3" 2>&1)"
    wait_for_file "$tmp/cut.rc.n3" 120
    is "$(rcs cut n3)" "1 " "cut: n3's elastic-exec exits 1" || diag "$(tail -n 20 "$tmp/cut.err.n3" 2>&1)"
    diag "cut: n3's link cut -> its elastic-exec exited: $(since_ms "$t_cut" "$(stat -c %.3Y "$tmp/cut.rc.n3" 2> /dev/null)") ms" \
        "(its workers stopped in $(ev_last "$tmp/cut.ev.n3" workers_stopped duration_ms) ms); it said:" \
        "$(grep -a -e ' lost' -e 'fencing itself' -e 'error:' "$tmp/cut.err.n3" | cut -d' ' -f3-)"
    grep -aq 'rendezvous closed: this node is cut off from the mesh' "$tmp/cut.err.n3"
    ok $? "cut: n3's rendezvous says this node is cut off from the mesh" ||
        diag "$(tail -n 20 "$tmp/cut.err.n3" 2>&1)"
    is "$(ev_n "$tmp/cut.ev.n3" self_fence)" 1 "cut: n3's event log records its self_fence"
    is "$(ev_n "$tmp/cut.ev.n3" rendezvous)" 1 "cut: n3 made no group of its own (its first rendezvous only)"
    wait_until 60 no_job_on n3
    ok $? "cut: no process of the job is left on n3" ||
        diag "$(for p in $(task_pids n3 'elastic-exec|ddp_train'); do tr '\0' ' ' < "/proc/$p/cmdline"; echo; done)"
    # n1 and n2, the majority: 2 nodes from the checkpoint
    survivors cut "n3 (member 2)" node=n3 member=2
}
cut_case
# srun ends once Slurm declares the cut-off n3 down (SlurmdTimeout), as in
# t6020: with the link back before that, n3's slurmstepd may already have
# given up telling srun its task's end, and srun waits for it for ever
# (a CI preview: no end within 120 s of the link's return)
wait_for_file "$tmp/cut.rc" 120
ok $? "cut: srun --no-kill ends (n3 still cut off)" || diag "$(show cut 20)"
diag "cut: srun exit $(cat "$tmp/cut.rc" 2> /dev/null); what it said of the tasks:" \
    "$(grep -a '^srun: ' "$tmp/cut.out")"
link_n3 up
ok $? "cut: n3's link restored (veth3 up)"
wait_until 30 no_job_on n1 n2
ok $? "cut: no process of the job is left on n1 and n2"
node_back n3
ok $? "cut: n3 is back in Slurm (its link up, resumed)"

# 4. node lost: every process of n3 SIGKILLed mid-training
lost_case() {
    local n c t0
    job lost --nnodes 2:3
    srun_bg lost "${JOB[@]}"
    wait_until 180 training_or_end lost
    training lost
    ok $? "lost: the group of 6 trains past step 10" || {
        diag "$(show lost 30)"
        return 1
    }
    t0=$(now_ms)
    kill_node n3
    ok $? "lost: every process of n3 SIGKILLed (slurmd, elastic-exec, workers)"
    wait_until 60 lost_logged lost
    ok $? "lost: n1's and n2's elastic-exec logged node_lost for n3" ||
        diag "$(grep -h node_lost "$tmp"/lost.ev.* 2>&1)" "$(show lost 30)"
    diag "lost: n3 killed -> both survivors logged node_lost: $(($(now_ms) - t0)) ms (--node-timeout 1)"
    survivors lost n3 node=n3
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

# 5. a node joins (a second job step), then the endpoint's host is lost
join_case() {
    local a1 port=29517 n c
    node_back n3
    ok $? "join: n3 is back in Slurm"
    a1=$(on_node n1 ip -4 -o addr show eth0 | sed -n 's|.* inet \([0-9.]*\)/.*|\1|p' | head -n 1)
    [ -n "$a1" ]
    ok $? "join: n1's address is ${a1:-?}" || return 1
    # the reference of this case's longer training
    mkdir -p "$tmp/ref80.ck"
    ELASTIC_TEST_MARK=$test_mark timeout --kill-after=10 240 "$EXEC" --nproc-per-node 4 \
        "$PY" "$TRAIN" --steps 80 --ckpt "$tmp/ref80.ck" > "$tmp/ref80" 2>&1
    ref=$(sed -n 's/^final .*checksum=//p' "$tmp/ref80")
    [ -n "$ref" ]
    ok $? "join: the reference of 80 steps (one node of 4 workers): $ref" || return 1
    mkdir -p "$tmp/join.ck"
    # torchrun's flags: the mesh is authenticated by a secret, not munge
    export ELASTIC_MESH_SECRET=t6022.join.$$.$RANDOM
    JOB=(--ntasks-per-node=1 "${WRAP[@]}" "$tmp/join" "$EXEC" -v --nnodes 2:3
        --rdzv-endpoint "$a1:$port" --rdzv-conf last_call_timeout=1 --nproc-per-node 2
        --wireup none --node-timeout 1 "$PY" "$TRAIN" --steps 80 --ckpt "$tmp/join.ck"
        --step-delay 0.1 --progress "$tmp/join.prog")
    srun_bg joinA -N2 -w n1,n2 "${JOB[@]}"
    wait_until 180 eval "grep -q '^step [1-7][0-9] world 4\( \|\$\)' $tmp/join.prog 2> /dev/null || [ -e $tmp/joinA.rc ]"
    grep -q '^step [1-7][0-9] world 4\( \|$\)' "$tmp/join.prog" 2> /dev/null
    ok $? "join: the first step (n1, n2) trains at world 4 past step 10" || {
        diag "$(show joinA 30)"
        return 1
    }
    srun_bg joinB -N1 -w n3 "${JOB[@]}"
    for n in n1 n2; do
        wait_until 120 eval "[ \"\$(ev_n $tmp/join.ev.$n node_joined member=2)\" = 1 ]"
        ok $? "join: $n logged node_joined for member 2 (n3)" || diag "$(show joinB 20)"
    done
    wait_until 120 eval "grep -q '^step [0-9]* world 6\( \|\$\)' $tmp/join.prog 2> /dev/null || [ -e $tmp/joinA.rc ]"
    grep -q '^step [0-9]* world 6\( \|$\)' "$tmp/join.prog"
    ok $? "join: the three nodes train at world 6" || {
        diag "$(show joinA 20)" "$(show joinB 20)"
        return 1
    }
    for n in n1 n2 n3; do
        is "$(ev_n "$tmp/join.ev.$n" restart)" 0 "join: $n spent no restart"
    done
    kill_node n1
    ok $? "join: every process of n1 (the endpoint's host and the master) SIGKILLed"
    wait_for_file "$tmp/join.rc.n2" 240 && wait_for_file "$tmp/join.rc.n3" 240
    is "$(rcs join n2 n3)" "0 0 " "join: n2's and n3's elastic-exec exit 0" ||
        diag "$(show joinA 30)" "$(show joinB 30)"
    tr -d '\0' < "$tmp/joinA.out" | cat - "$tmp/joinB.out" | grep -aq '^start world=4 step=[1-9][0-9]* restart=0$'
    ok $? "join: after n1's loss, resumed from a checkpoint at world size 4" ||
        diag "$(cat "$tmp/joinA.out" "$tmp/joinB.out" | grep -a '^start')"
    c=$(cat "$tmp/joinA.out" "$tmp/joinB.out" | tr -d '\0' | sed -n 's/^final .*checksum=//p' | head -n 1)
    same "$c"
    ok $? "join: the single-node checksum ($c, $ref)"
    for n in n2 n3; do
        # (members are numbered in the order the nodes reached the endpoint:
        # n1 is not always member 0; the node is named by its address)
        is "$(ev_n "$tmp/join.ev.$n" node_lost node="$a1")" 1 "join: $n logged n1 ($a1) lost" ||
            diag "$(cut -c1-200 "$tmp/join.ev.$n" | grep -v '"heartbeat\|"worker_' | tail -n 40)" \
                "$(grep -a 'rendezvous\|mesh' "$tmp/join$([ $n = n3 ] && echo B || echo A).out" | tail -n 30)"
        is "$(ev_last "$tmp/join.ev.$n" rendezvous group_world_size)" 2 "join: $n's last round has 2 nodes"
    done
    wait_until 30 no_job_on n2 n3
    ok $? "join: no process of the job is left on n2 and n3"
}
join_case
done_testing
