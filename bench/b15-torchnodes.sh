#!/bin/bash
# b15-torchnodes.sh - B15: a node lost under multi-node PyTorch training:
# elastic-exec's elastic rendezvous over the mesh against torchrun's c10d
# rendezvous, the same script, the same machine.
#
#   bench/b15-torchnodes.sh [--cluster] [--quick|--full] [--build DIR]
#                           [--out DIR] [--trials N]
#
# Three "nodes", `--nnodes 2:3 --nproc-per-node 1`, training
# tests/exec/ddp_train.py (gloo, a checkpoint every 5 steps, a step every
# 0.1 s; rank 0 logs each step with its time).  Once the training passed
# step 15, every process of one node is SIGKILLed:
#   node      a node that is not the endpoint's host
#   endpoint  the host of the rendezvous endpoint (torchrun: the agent that
#             hosts the c10d store; elastic-exec: the member that served
#             the bootstrap, member 0) and the master (group rank 0)
# Where the nodes are:
#   (default)  on this machine, each a process group (its agent and its
#              worker), the endpoint 127.0.0.1:PORT; node = node 2,
#              endpoint = node 0.  Rows torchnodes, OUT/torchnodes.md.
#   --cluster  the emulated 3-node Slurm cluster (scripts/slurm-cluster.sh,
#              root: n1..n3, each its own network namespace, address and
#              host name), brought up once; both launchers started by
#              `srun --no-kill -N3 --ntasks-per-node=1`, one task per node,
#              GLOO_SOCKET_IFNAME=eth0; node = n3, endpoint = n1 (every
#              process of the node SIGKILLed: its slurmd, the launcher and
#              the worker; the node's slurmd restarted after the run).
#              elastic-exec takes the map from Slurm and authenticates
#              with munge (no --rdzv-endpoint: member 0, n1, serves the
#              bootstrap); torchrun's --rdzv-endpoint is n1's address.
#              Each task runs in a private mount namespace whose
#              /etc/hosts names n1..n3 (torch 1.13's c10d backend resolves
#              the node's host name, and its agents publish it as
#              MASTER_ADDR: without it torchrun cannot start here).
#              Rows torchcluster, OUT/torchcluster.md.
# Metric: recover_s = the first step done at world size 2 - the kill (the
# survivors' workers training again: detection, rendezvous, restart,
# import and init_process_group, checkpoint load, one step); a run whose
# survivors never train again within 180 s is a `failed` row (with their
# exit codes, and with --cluster their last error line, in the log).  Its
# phases: begin_s, the kill -> rank 0's new process began (detection,
# rendezvous, the old workers stopped, the new one started); init_s, that
# -> init_process_group done (import torch, the store, gloo).  elastic-exec
# also: rdzv_ms, the survivors' node_lost event -> their next rendezvous
# event (the round alone).
# Variants: elastic-exec (--max-restarts 0: a lost node costs none);
# torchrun (Debian's 1.13 through bench/torchrun_patched.py, c10d,
# --max-restarts 3, --monitor-interval 0.1; rdzv defaults).
# Quick: 1 run of each variant and victim.  Full: 3 (--trials N).
# Rows: NAME,3,,VARIANT-VICTIM,RUN,recover_s|begin_s|init_s|rdzv_ms,V,s|ms
# (--cluster also NAME,,,load,PHASE,loadavg1,L,load).  Also OUT/NAME.md:
# medians, ranges and the ratio torchrun / elastic-exec.  Only with
# bench/run.sh --only B15 or B15C (about 5 minutes quick, 15 full:
# torchrun takes tens of seconds per recovery).
. "$(dirname "$0")/lib.sh"
cluster=0
args=()
for a in "$@"; do
    if [ "$a" = --cluster ]; then cluster=1; else args+=("$a"); fi
done
bench_parse_args "${args[@]}"
NAME=torchnodes
[ $cluster = 1 ] && NAME=torchcluster
bench_csv $NAME
bench_need_torch $NAME
"$ELASTIC_EXEC" --help 2>&1 | grep -q -- '--rdzv-endpoint' || {
    bench_log "skipped: this elastic-exec has no mesh mode"
    row $NAME 0 "" skipped 0 no_mesh 1 flag
    exit 0
}
TRAIN=$TOP_SRCDIR/tests/exec/ddp_train.py
runs=${TRIALS:-1}
[ "$MODE" = full ] && runs=${TRIALS:-3}

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# measure VARIANT VICTIM RUN T0 DIR EVLOG...: the run's rows (DIR/prog:
# rank 0's progress; EVLOGs: the survivors' event logs, elastic-exec)
measure() {
    "$PY" - "$NAME" "$@" << 'PYEOF' >> "$CSV"
import json, os, sys
name, v, victim, run, t0, d = sys.argv[1:7]
t0 = float(t0)
p = "%s,3,,%s-%s,%s," % (name, v, victim, run)
t1 = None
for line in open(os.path.join(d, "prog")):
    f = line.split()
    if len(f) == 5 and f[3] == "2" and f[4].startswith("t=") and t0 < float(f[4][2:]) <= t0 + 180:
        t1 = float(f[4][2:])
        break
if t1 is None:
    print(p + "failed,1,flag")
    sys.exit(0)
print(p + "recover_s,%.3f,s" % (t1 - t0))
# the phases, from rank 0's lines of the new start: the kill -> its process
# began (detection, rendezvous, the old workers stopped, the new started),
# -> init_process_group done (import torch, the store, gloo's connections)
tb = ti = None
for line in open(os.path.join(d, "prog")):
    f = line.split()
    if len(f) == 4 and f[2] == "2" and f[3].startswith("t=") and float(f[3][2:]) > t0 - 60:
        t = float(f[3][2:])
        if f[0] == "begin" and t > t0:
            tb = t
        if f[0] == "init" and tb is not None and t >= tb:
            ti = t
if tb is not None and ti is not None:
    print(p + "begin_s,%.3f,s" % (tb - t0))
    print(p + "init_s,%.3f,s" % (ti - tb))
if v == "elastic-exec":
    for ev in sys.argv[7:]:
        if not os.path.exists(ev):
            continue
        evs = [json.loads(l) for l in open(ev)]
        lost = next((e for e in evs if e["event"] == "node_lost"), None)
        rdzv = [e for e in evs if e["event"] == "rendezvous"]
        if lost and len(rdzv) >= 2:
            print(p + "rdzv_ms,%.3f,ms" % ((rdzv[-1]["ts"] - lost["ts"]) * 1e3))
PYEOF
}

# run_one VARIANT VICTIM RUN: three process groups on this machine
run_one() {
    local v=$1 victim=$2 i=$3 d=$OUT/scratch/b15/$1.$2.$3 port k t0 pids=() vk
    rm -rf "$d"
    mkdir -p "$d/ck"
    port=$(free_port)
    for k in 0 1 2; do
        case $v in
            elastic-exec)
                setsid timeout 240 "$ELASTIC_EXEC" -v --nnodes 2:3 --node-rank $k \
                    --rdzv-endpoint 127.0.0.1:$port --nproc-per-node 1 --wireup none \
                    --max-restarts 0 --event-log "$d/ev.$k" \
                    "$PY" "$TRAIN" --steps 80 --ckpt "$d/ck" --step-delay 0.1 \
                    --progress "$d/prog" > "$LOGDIR/$v.$victim.$i.$k.log" 2>&1 &
                ;;
            torchrun)
                setsid timeout 240 "$PY" "$BENCH_DIR/torchrun_patched.py" --nnodes 2:3 \
                    --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:$port \
                    --rdzv_id b15.$$.$i --max_restarts 3 --monitor_interval 0.1 \
                    "$TRAIN" --steps 80 --ckpt "$d/ck" --step-delay 0.1 \
                    --progress "$d/prog" > "$LOGDIR/$v.$victim.$i.$k.log" 2>&1 &
                ;;
        esac
        pids+=($!)
        # node 0 first, so that it is the one that binds the endpoint
        [ $k = 0 ] && sleep 0.5
    done
    for _ in $(seq 1200); do
        grep -q '^step 1[5-9] ' "$d/prog" 2> /dev/null && break
        sleep 0.1
    done
    if ! grep -q '^step 1[5-9] ' "$d/prog" 2> /dev/null; then
        bench_log "$v $victim run $i: never trained (see $LOGDIR/$v.$victim.$i.*.log)"
        for k in 0 1 2; do kill -KILL -- -"${pids[$k]}" 2> /dev/null; done
        wait
        row $NAME 3 "" "$v-$victim" "$i" failed 1 flag
        return
    fi
    vk=2
    [ "$victim" = endpoint ] && vk=0
    t0=$(now)
    kill -KILL -- -"${pids[$vk]}"
    for k in 0 1 2; do
        [ $k = $vk ] && continue
        wait "${pids[$k]}"
        echo "node $k exit $?" >> "$LOGDIR/$v.$victim.$i.exits"
    done
    wait "${pids[$vk]}" 2> /dev/null
    local evs=()
    for k in 0 1 2; do [ $k = $vk ] || evs+=("$d/ev.$k"); done
    measure "$v" "$victim" "$i" "$t0" "$d" "${evs[@]}"
    rm -rf "$d"
}

# --- the emulated cluster (--cluster) -----------------------------------
SLURM_CLUSTER_SH=$TOP_SRCDIR/scripts/slurm-cluster.sh
CLUSTER_DIR=
# cluster_start: up (3 nodes, 4 CPUs each; netns mode), or exit with a
# `skipped` row
cluster_start() {
    local c
    cluster_skip() {
        bench_log "skipped: $1"
        row $NAME 0 "" skipped 0 "$2" 1 flag
        exit 0
    }
    for c in slurmctld slurmd srun scontrol munged unshare nsenter; do
        command -v "$c" > /dev/null 2>&1 || cluster_skip "$c not found (no Slurm)" no_slurm
    done
    [ "$(id -u)" -eq 0 ] || cluster_skip "the emulated cluster needs root" no_root
    CLUSTER_DIR=$(mktemp -d /tmp/b15c.XXXXXX)
    trap cluster_stop EXIT
    trap 'exit 143' TERM INT HUP
    "$SLURM_CLUSTER_SH" up "$CLUSTER_DIR" --nodes 3 --cpus 4 > "$LOGDIR/up.log" 2>&1 ||
        { tail -n 20 "$LOGDIR/up.log" >&2; bench_die "the emulated cluster did not come up (see $LOGDIR/up.log)"; }
    [ "$(sed -n 's/^MODE=//p' "$CLUSTER_DIR/cluster.env")" = netns ] ||
        cluster_skip "the cluster runs in local mode (every node on 127.0.0.1)" no_netns
    # n1's address (the endpoint), and /etc/hosts for the tasks: the nodes'
    # names and addresses, as slurm.conf gives them
    EP_ADDR=$(sed -n 's/^NodeName=n1 .*NodeAddr=\([^ ]*\).*/\1/p' "$CLUSTER_DIR/etc/slurm.conf")
    {
        echo "127.0.0.1 localhost"
        sed -n 's/^NodeName=\([^ ]*\) .*NodeAddr=\([^ ]*\).*/\2 \1/p' "$CLUSTER_DIR/etc/slurm.conf"
    } > "$CLUSTER_DIR/hosts"
}
# cluster_stop: everything of the cluster killed, its namespaces deleted
cluster_stop() {
    [ -n "$CLUSTER_DIR" ] || return 0
    "$SLURM_CLUSTER_SH" down "$CLUSTER_DIR" > "$LOGDIR/down.log" 2>&1 ||
        bench_log "cluster down: $(tail -n 3 "$LOGDIR/down.log")"
    rm -rf "$CLUSTER_DIR"
    CLUSTER_DIR=
}
ctl() { "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" "$@"; }
load_row() { row $NAME "" "" load "$1" loadavg1 "$(cut -d' ' -f1 /proc/loadavg)" load; }
node_state() { ctl scontrol -o show node "$1" 2> /dev/null | sed -n 's/.* State=\([A-Z_]*\).*/\1/p'; }
# all_idle: n1..n3 idle in Slurm (for at most 90 s)
all_idle() {
    local n
    for _ in $(seq 450); do
        for n in n1 n2 n3; do
            [ "$(node_state "$n")" = IDLE ] || break
            [ $n = n3 ] && return 0
        done
        sleep 0.2
    done
    return 1
}
# job_pids NODE: the job's processes left on NODE (launchers, workers)
job_pids() {
    local p
    for p in $("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" "$1"); do
        tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null |
            grep -Eq 'elastic-exec|torchrun|ddp_train|unshare' && echo "$p"
    done
}

# WRAP DIR LOG CMD...: each task's wrapper (srun starts one per node): a
# private mount namespace whose /etc/hosts is DIR/hosts; CMD's output in
# LOG.nK.log, its exit status and end time in DIR/rc.nK ("RC UNIXTIME");
# an argument @EV@ becomes DIR/ev.nK (the node's event log)
# shellcheck disable=SC2016 # expanded by the task's shell
WRAP=(unshare -m --propagation private sh -c 'd=$1 log=$2 n=$SLURMD_NODENAME
shift 2
for a; do
    shift
    [ "$a" = @EV@ ] && a=$d/ev.$n
    set -- "$@" "$a"
done
mount --bind "$d/hosts" /etc/hosts || exit 97
rc=0
"$@" > "$log.$n.log" 2>&1 || rc=$?
echo "$rc $(date +%s.%N)" > "$d/rc.$n.tmp" && mv "$d/rc.$n.tmp" "$d/rc.$n"
exit "$rc"' wrap)

# run_cluster VARIANT VICTIM RUN: srun -N3 on the cluster, VICTIM's node
# killed once training passed step 15
run_cluster() {
    local v=$1 victim=$2 i=$3 d=$OUT/scratch/b15c/$1.$2.$3 log=$LOGDIR/$1.$2.$3 vn=n3 t0='' pids n cmd rc te
    rm -rf "$d" "$log".*
    mkdir -p "$d/ck"
    cp "$CLUSTER_DIR/hosts" "$d/hosts"
    [ "$victim" = endpoint ] && vn=n1
    case $v in
        elastic-exec) cmd=("$ELASTIC_EXEC" -v --event-log @EV@ --nnodes 2:3 --nproc-per-node 1
            --wireup none --max-restarts 0 "$PY") ;;
        torchrun) cmd=("$PY" "$BENCH_DIR/torchrun_patched.py" --nnodes 2:3 --nproc_per_node 1
            --rdzv_backend c10d --rdzv_endpoint "$EP_ADDR:$((29400 + RANDOM % 500))"
            --rdzv_id "b15c.$$.$victim.$i" --max_restarts 3 --monitor_interval 0.1) ;;
    esac
    (
        rc=0
        timeout --kill-after=10 300 "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" srun --no-kill -N3 \
            --ntasks-per-node=1 "${WRAP[@]}" "$d" "$log" "${cmd[@]}" "$TRAIN" --steps 80 \
            --ckpt "$d/ck" --step-delay 0.1 --progress "$d/prog" > "$log.srun.log" 2>&1 || rc=$?
        echo "$rc" > "$d/srun.rc"
    ) &
    for _ in $(seq 1800); do
        grep -q '^step 1[5-9] ' "$d/prog" 2> /dev/null && break
        [ -e "$d/srun.rc" ] && break
        sleep 0.1
    done
    if ! grep -q '^step 1[5-9] ' "$d/prog" 2> /dev/null; then
        bench_log "$v $victim run $i: never trained (see $log.*.log)"
        row $NAME 3 "" "$v-$victim" "$i" failed 1 flag
        vn=
        for n in n1 n2 n3; do
            pids=$(job_pids "$n")
            # shellcheck disable=SC2086 # a list of pids
            [ -z "$pids" ] || kill -KILL $pids
        done
    else
        # one kill(1) of every process in the node's namespace (its slurmd,
        # slurmstepd, the launcher and the worker), then kill-node for any
        # that a fork added meanwhile
        pids=$("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" "$vn")
        t0=$(now)
        # shellcheck disable=SC2086 # a list of pids
        kill -KILL $pids
        "$SLURM_CLUSTER_SH" kill-node "$CLUSTER_DIR" "$vn"
    fi
    # srun ends once the survivors did (timeout 300 bounds it)
    for _ in $(seq 3000); do
        [ -e "$d/srun.rc" ] && break
        sleep 0.1
    done
    wait
    for n in n1 n2 n3; do
        [ "$n" = "$vn" ] && continue
        read -r rc te 2> /dev/null < "$d/rc.$n" || { rc=none te=; }
        if [ -n "$t0" ] && [ -n "$te" ]; then te="$(elapsed "$t0" "$te") s after the kill"; else te=; fi
        echo "$n exit $rc${te:+ $te}:" \
            "$(grep -a -E '^[A-Za-z_.]*(Error|Exception|error):' "$log.$n.log" 2> /dev/null | tail -n 1)"
    done > "$log.exits"
    echo "srun exit $(cat "$d/srun.rc" 2> /dev/null)" >> "$log.exits"
    [ -n "$vn" ] && measure "$v" "$victim" "$i" "$t0" "$d" "$d/ev.n1" "$d/ev.n2" "$d/ev.n3"
    grep -q "^$v-$victim,$i,failed," <(cut -d, -f4- "$CSV") && bench_log "$v $victim run $i failed: $(tr '\n' ';' < "$log.exits")"
    # nothing of the job left on the nodes, the victim back in Slurm
    for n in n1 n2 n3; do
        pids=$(job_pids "$n")
        # shellcheck disable=SC2086 # a list of pids
        [ -z "$pids" ] || { bench_log "killing what the run left on $n: $pids"; kill -KILL $pids; }
    done
    if [ -n "$vn" ]; then
        "$SLURM_CLUSTER_SH" start-node "$CLUSTER_DIR" "$vn" >> "$LOGDIR/nodes.log" 2>&1
        ctl scontrol update nodename="$vn" state=resume >> "$LOGDIR/nodes.log" 2>&1
    fi
    all_idle || bench_die "the nodes are not all idle 90 s after the run: $(ctl sinfo -h -N -o '%N %T' 2>&1 | tr '\n' ' ')"
    rm -rf "$d"
}

if [ $cluster = 1 ]; then
    cluster_start
    # munge authenticates elastic-exec's members (AuthInfo in the cluster's
    # slurm.conf): no secret; gloo binds to the address of this interface
    unset ELASTIC_MESH_SECRET ELASTIC_MESH_SECRET_FILE
    export GLOO_SOCKET_IFNAME=eth0
    bench_log "cluster $CLUSTER_DIR up (endpoint n1 = $EP_ADDR); $runs runs of elastic-exec and torchrun, victims n3 (node) and n1 (endpoint)"
    load_row start
else
    export ELASTIC_MESH_SECRET=b15.$$
    bench_log "$runs runs of elastic-exec and torchrun, victims node and endpoint"
fi
for i in $(seq "$runs"); do
    for victim in node endpoint; do
        for v in elastic-exec torchrun; do
            bench_log "$v, $victim killed, run $i"
            if [ $cluster = 1 ]; then run_cluster "$v" "$victim" "$i"; else run_one "$v" "$victim" "$i"; fi
        done
    done
done
[ $cluster = 1 ] && { load_row end; cluster_stop; }

"$PY" - "$CSV" "$OUT/$NAME.md" "$cluster" "$LOGDIR" << 'PYEOF'
import csv, os, statistics, sys
cluster = sys.argv[3] == "1"
name = "torchcluster" if cluster else "torchnodes"
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["bench"] == name]
def vals(var, metric):
    return [float(r["value"]) for r in rows if r["variant"] == var and r["metric"] == metric]
def failed(var):
    return sum(1 for r in rows if r["variant"] == var and r["metric"] == "failed")
where = "the emulated 3-node Slurm cluster" if cluster else "3 nodes on one machine"
victims = (("node", "n3"), ("endpoint", "n1 (endpoint host, master)")) if cluster else (("node", "node 2"), ("endpoint", "node 0 (endpoint host, master)"))
out = ["# B15: a node lost under multi-node PyTorch training (%s)" % where, "",
       "| victim | elastic-exec recover (median, range, n) | torchrun c10d recover | ratio | elastic-exec round (node_lost -> rendezvous) | elastic-exec begin / init (medians) | torchrun begin / init |",
       "|---|---|---|---|---|---|---|"]
for victim, label in victims:
    e, t = vals("elastic-exec-" + victim, "recover_s"), vals("torchrun-" + victim, "recover_s")
    r = vals("elastic-exec-" + victim, "rdzv_ms")
    fmt = lambda x, n: ("%.2f s (%.2f-%.2f, %d)" % (statistics.median(x), min(x), max(x), len(x)) if x else "-") + ("; %d failed" % n if n else "")
    ratio = "%.1fx" % (statistics.median(t) / statistics.median(e)) if e and t else ("torchrun never recovered" if e and failed("torchrun-" + victim) else "-")
    rr = "%.1f ms (%.1f-%.1f)" % (statistics.median(r), min(r), max(r)) if r else "-"
    ph = lambda var: "%s / %s" % tuple(("%.2f s" % statistics.median(vals(var + "-" + victim, m))) if vals(var + "-" + victim, m) else "-" for m in ("begin_s", "init_s"))
    out.append("| %s | %s | %s | %s | %s | %s | %s |" % (label if cluster else victim, fmt(e, failed("elastic-exec-" + victim)), fmt(t, failed("torchrun-" + victim)), ratio, rr, ph("elastic-exec"), ph("torchrun")))
load = [r for r in rows if r["variant"] == "load"]
if load:
    out += ["", "Load average (1 min): " + ", ".join("%s %s" % (r["trial"], r["value"]) for r in load) + "."]
fails = [r for r in rows if r["metric"] == "failed"]
if cluster and fails:
    out += ["", "Failed runs (the survivors' exit status, when they ended, their last error line):", ""]
    for r in fails:
        f = os.path.join(sys.argv[4], "%s.%s.exits" % (".".join(r["variant"].rsplit("-", 1)), r["trial"]))
        for line in (open(f).read().splitlines() if os.path.exists(f) else ["(no record)"]):
            out.append("- %s run %s: %s" % (r["variant"], r["trial"], line))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PYEOF
