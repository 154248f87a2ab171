#!/bin/bash
# b2-restart.sh - B2: restart latency of a torchrun-contract PyTorch (gloo)
# program, N local workers, one crash, under elastic-exec and under Debian's
# torchrun, runs alternating.
#
#   bench/b2-restart.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# The program is tests/exec/torch_worker.py, unmodified torchrun-contract
# code: on the first attempt rank 1 exits 13 once every rank has joined the
# gloo group; the agent restarts the group and the second attempt
# completes.  The worker writes epoch timestamps: its crash, each new
# process's start (before `import torch`) and each rank's "ready" (after
# init_process_group and a barrier).  Per run:
#   respawn_ms  first process of attempt 1 running - crash
#   ready_ms    last rank of attempt 1 ready - crash
#   detect_ms   (elastic-exec only) its event log: exit seen -> new worker started
# Variants: elastic-exec (--max-restarts 1; exits are seen through pidfds),
# torchrun-default (Debian's torchrun 1.13, its default --monitor_interval,
# 5 s), torchrun-0.1s (--monitor_interval 0.1, the same polling period as
# elastic-exec's watchdog; full mode only).  Torch 1.13's torchrun needs one
# fix under Python 3.11, applied by bench/torchrun_patched.py.
# Quick: 2 workers, 1 run of elastic-exec and torchrun-default.
# Full: 4 workers, 5 runs of each variant.
# Rows: restart,N,,VARIANT,RUN,respawn_ms|ready_ms|detect_ms,MS,ms
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv restart
bench_need_torch restart
worker=$TOP_SRCDIR/tests/exec/torch_worker.py
if [ "$MODE" = quick ]; then
    nproc=2 runs=${TRIALS:-1} variants="elastic-exec torchrun-default"
else
    nproc=4 runs=${TRIALS:-5} variants="elastic-exec torchrun-default torchrun-0.1s"
fi
bench_log "$nproc workers, $runs runs of: $variants"

# measure VARIANT RUN DIR [EVENTLOG]: append this run's rows
measure() {
    "$PY" - "$@" << 'PYEOF' >> "$CSV"
import glob, json, os, sys
v, run, n, d = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rd = lambda p: float(open(p).read())
crash = rd(glob.glob(os.path.join(d, "crash.0.*"))[0])
starts = [rd(p) for p in glob.glob(os.path.join(d, "start.1.*"))]
ready = [rd(p) for p in glob.glob(os.path.join(d, "ready.1.*"))]
p = "restart,%s,,%s,%s," % (n, v, run)
print(p + "respawn_ms,%.3f,ms" % ((min(starts) - crash) * 1e3))
print(p + "ready_ms,%.3f,ms" % ((max(ready) - crash) * 1e3))
if len(sys.argv) > 5:
    evs = [json.loads(l) for l in open(sys.argv[5])]
    fail = next(e for e in evs if e["event"] == "worker_exit" and e.get("state") == "FAILED")
    start = next(e for e in evs if e["event"] == "worker_start" and e["attempt"] == 1)
    print(p + "detect_ms,%.3f,ms" % ((start["ts"] - fail["ts"]) * 1e3))
PYEOF
}

run_one() {
    local v=$1 i=$2 d=$OUT/scratch/b2/$1.$2 rc
    rm -rf "$d"
    mkdir -p "$d"
    case $v in
        elastic-exec)
            timeout 300 "$ELASTIC_EXEC" --nproc-per-node "$nproc" --max-restarts 1 --event-log "$d/ev" \
                "$PY" "$worker" "$d" 1 > "$LOGDIR/$v.$i.log" 2>&1 ;;
        torchrun-default)
            timeout 300 "$PY" "$BENCH_DIR/torchrun_patched.py" --standalone --nproc_per_node "$nproc" \
                --max_restarts 1 "$worker" "$d" 1 > "$LOGDIR/$v.$i.log" 2>&1 ;;
        torchrun-0.1s)
            timeout 300 "$PY" "$BENCH_DIR/torchrun_patched.py" --standalone --nproc_per_node "$nproc" \
                --max_restarts 1 --monitor_interval 0.1 "$worker" "$d" 1 > "$LOGDIR/$v.$i.log" 2>&1 ;;
    esac
    rc=$?
    if [ $rc -ne 0 ] || [ "$(ls "$d"/ready.1.* 2> /dev/null | wc -l)" -ne "$nproc" ]; then
        bench_log "$v run $i failed (exit $rc; see $LOGDIR/$v.$i.log)"
        row restart "$nproc" "" "$v" "$i" failed 1 flag
        return
    fi
    if [ "$v" = elastic-exec ]; then
        measure "$v" "$i" "$nproc" "$d" "$d/ev"
    else
        measure "$v" "$i" "$nproc" "$d"
    fi
    rm -rf "$d"
}

for i in $(seq "$runs"); do
    for v in $variants; do
        run_one "$v" "$i"
    done
done
