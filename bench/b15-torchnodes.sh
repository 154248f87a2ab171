#!/bin/bash
# b15-torchnodes.sh - B15: a node lost under multi-node PyTorch training:
# elastic-exec's elastic rendezvous over the mesh against torchrun's c10d
# rendezvous, the same script, the same machine.
#
# Three "nodes" on this machine (each a process group: its agent and its
# worker), `--nnodes 2:3 --nproc-per-node 1`, the endpoint 127.0.0.1:PORT,
# training tests/exec/ddp_train.py (gloo, a checkpoint every 5 steps, a
# step every 0.1 s; rank 0 logs each step with its time).  Once the
# training passed step 15, one node's process group is SIGKILLed:
#   node      node 2 (not the endpoint's host)
#   endpoint  node 0: the host of the rendezvous endpoint (torchrun: the
#             agent that hosts the c10d store; elastic-exec: the member
#             that served the bootstrap) and the master (group rank 0)
# Metric: recover_s = the first step done at world size 2 - the kill (the
# survivors' workers training again: detection, rendezvous, restart,
# import and init_process_group, checkpoint load, one step); a run whose
# survivors never train again within 180 s is a `failed` row with their
# exit codes in the log.  Its phases: begin_s, the kill -> rank 0's new
# process began (detection, rendezvous, the old workers stopped, the new
# one started); init_s, that -> init_process_group done (import torch, the
# store, gloo).  elastic-exec also: rdzv_ms, the survivors' node_lost
# event -> their next rendezvous event (the round alone).
# Variants: elastic-exec (--max-restarts 0: a lost node costs none);
# torchrun (Debian's 1.13 through bench/torchrun_patched.py, c10d,
# --max-restarts 3, --monitor-interval 0.1; rdzv defaults).
# Quick: 1 run of each variant and victim.  Full: 3 (--trials N).
# Rows: torchnodes,3,,VARIANT-VICTIM,RUN,recover_s|begin_s|init_s|rdzv_ms,V,s|ms
# Also OUT/torchnodes.md: medians, ranges and the ratio torchrun /
# elastic-exec.  Only with bench/run.sh --only B15 (about 5 minutes quick,
# 15 full: torchrun takes tens of seconds per recovery).
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv torchnodes
bench_need_torch torchnodes
"$ELASTIC_EXEC" --help 2>&1 | grep -q -- '--rdzv-endpoint' || {
    bench_log "skipped: this elastic-exec has no mesh mode"
    row torchnodes 0 "" skipped 0 no_mesh 1 flag
    exit 0
}
TRAIN=$TOP_SRCDIR/tests/exec/ddp_train.py
runs=${TRIALS:-1}
[ "$MODE" = full ] && runs=${TRIALS:-3}
bench_log "$runs runs of elastic-exec and torchrun, victims node and endpoint"
export ELASTIC_MESH_SECRET=b15.$$

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run_one VARIANT VICTIM RUN
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
        row torchnodes 3 "" "$v-$victim" "$i" failed 1 flag
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
    "$PY" - "$v" "$victim" "$i" "$t0" "$d" "$vk" << 'PYEOF' >> "$CSV"
import json, os, sys
v, victim, run, t0, d, vk = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5], sys.argv[6]
p = "torchnodes,3,,%s-%s,%s," % (v, victim, run)
t1 = None
for line in open(os.path.join(d, "prog")):
    f = line.split()
    if len(f) == 5 and f[3] == "2" and f[4].startswith("t=") and float(f[4][2:]) > t0:
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
    for k in "012":
        if k == vk:
            continue
        evs = [json.loads(l) for l in open(os.path.join(d, "ev." + k))]
        lost = next((e for e in evs if e["event"] == "node_lost"), None)
        rdzv = [e for e in evs if e["event"] == "rendezvous"]
        if lost and len(rdzv) >= 2:
            print(p + "rdzv_ms,%.3f,ms" % ((rdzv[-1]["ts"] - lost["ts"]) * 1e3))
PYEOF
    rm -rf "$d"
}

for i in $(seq "$runs"); do
    for victim in node endpoint; do
        for v in elastic-exec torchrun; do
            bench_log "$v, $victim killed, run $i"
            run_one "$v" "$victim" "$i"
        done
    done
done

"$PY" - "$CSV" "$OUT/torchnodes.md" << 'PYEOF'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["bench"] == "torchnodes"]
def vals(var, metric):
    return [float(r["value"]) for r in rows if r["variant"] == var and r["metric"] == metric]
def failed(var):
    return sum(1 for r in rows if r["variant"] == var and r["metric"] == "failed")
out = ["# B15: a node lost under multi-node PyTorch training (3 nodes on one machine)", "",
       "| victim | elastic-exec recover (median, range, n) | torchrun c10d recover | ratio | elastic-exec round (node_lost -> rendezvous) | elastic-exec begin / init (medians) | torchrun begin / init |",
       "|---|---|---|---|---|---|---|"]
for victim in ("node", "endpoint"):
    e, t = vals("elastic-exec-" + victim, "recover_s"), vals("torchrun-" + victim, "recover_s")
    r = vals("elastic-exec-" + victim, "rdzv_ms")
    fmt = lambda x, n: ("%.2f s (%.2f-%.2f, %d)" % (statistics.median(x), min(x), max(x), len(x)) if x else "-") + ("; %d failed" % n if n else "")
    ratio = "%.1fx" % (statistics.median(t) / statistics.median(e)) if e and t else ("torchrun never recovered" if e and failed("torchrun-" + victim) else "-")
    rr = "%.1f ms (%.1f-%.1f)" % (statistics.median(r), min(r), max(r)) if r else "-"
    ph = lambda var: "%s / %s" % tuple(("%.2f s" % statistics.median(vals(var + "-" + victim, m))) if vals(var + "-" + victim, m) else "-" for m in ("begin_s", "init_s"))
    out.append("| %s | %s | %s | %s | %s | %s | %s |" % (victim, fmt(e, failed("elastic-exec-" + victim)), fmt(t, failed("torchrun-" + victim)), ratio, rr, ph("elastic-exec"), ph("torchrun")))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PYEOF
