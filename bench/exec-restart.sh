#!/bin/bash
# exec-restart.sh - crash -> respawn and crash -> all workers ready, for N
# local PyTorch (gloo) workers, under elastic-exec and under Debian's
# torchrun, side by side in one run.
#
#   bench/exec-restart.sh [-n NPROC] [-r REPEATS] [-e ELASTIC_EXEC]
#
# The program is tests/exec/torch_worker.py (an unmodified torchrun-contract
# program): on the first attempt rank 1 exits 13 once every rank has joined
# the gloo group; the agent restarts the group and the second attempt
# completes.  The worker writes epoch timestamps: its crash, each new
# process's start (before `import torch`), and each rank's "ready" (after
# init_process_group and a barrier).  Measured, per run:
#   respawn  = first process of attempt 1 running - crash
#   ready    = last rank of attempt 1 ready - crash
#   detect   = (elastic-exec only) event log: exit detected -> new worker started
# torchrun runs twice: with its default --monitor_interval (5 s in 1.13) and
# with 0.1 s like elastic-exec.  Debian's torchrun 1.13 needs one fix under
# Python 3.11 (Std.from_str), applied at start-up by torchrun_patched.py.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
nproc=4
repeats=3
exec_bin=$(command -v elastic-exec || true)
while getopts "n:r:e:" o; do
    case $o in
        n) nproc=$OPTARG ;;
        r) repeats=$OPTARG ;;
        e) exec_bin=$OPTARG ;;
        *) echo "usage: $0 [-n NPROC] [-r REPEATS] [-e ELASTIC_EXEC]" >&2; exit 2 ;;
    esac
done
[ -x "$exec_bin" ] || { echo "$0: elastic-exec not found (use -e PATH)" >&2; exit 2; }
PY=/usr/bin/python3
"$PY" -c 'import torch.distributed' 2> /dev/null || { echo "$0: $PY cannot import torch" >&2; exit 2; }
worker=$top/tests/exec/torch_worker.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# measure DIR [EVENTLOG]: print "respawn_ms ready_s [detect_ms]"
measure() {
    "$PY" - "$@" << 'PYEOF'
import glob, json, os, sys
d = sys.argv[1]
rd = lambda p: float(open(p).read())
crash = rd(glob.glob(os.path.join(d, "crash.0.*"))[0])
starts = [rd(p) for p in glob.glob(os.path.join(d, "start.1.*"))]
ready = [rd(p) for p in glob.glob(os.path.join(d, "ready.1.*"))]
out = "%.1f %.3f" % ((min(starts) - crash) * 1e3, max(ready) - crash)
if len(sys.argv) > 2:
    evs = [json.loads(l) for l in open(sys.argv[2])]
    fail = next(e for e in evs if e["event"] == "worker_exit" and e.get("state") == "FAILED")
    start = next(e for e in evs if e["event"] == "worker_start" and e["attempt"] == 1)
    out += " %.1f" % ((start["ts"] - fail["ts"]) * 1e3)
print(out)
PYEOF
}

run_one() {
    local kind=$1 i=$2 d=$tmp/$1.$2
    mkdir -p "$d"
    case $kind in
        elastic-exec)
            "$exec_bin" --nproc-per-node "$nproc" --max-restarts 1 --event-log "$d/ev" \
                "$PY" "$worker" "$d" 1 > "$d/log" 2>&1 ;;
        torchrun-default)
            "$PY" "$here/torchrun_patched.py" --standalone --nproc_per_node "$nproc" --max_restarts 1 \
                "$worker" "$d" 1 > "$d/log" 2>&1 ;;
        torchrun-0.1s)
            "$PY" "$here/torchrun_patched.py" --standalone --nproc_per_node "$nproc" --max_restarts 1 \
                --monitor_interval 0.1 "$worker" "$d" 1 > "$d/log" 2>&1 ;;
    esac
    local rc=$?
    if [ $rc -ne 0 ] || [ "$(ls "$d"/ready.1.* 2> /dev/null | wc -l)" -ne "$nproc" ]; then
        echo "$kind run $i failed (exit $rc); log:" >&2
        tail -n 20 "$d/log" >&2
        return 1
    fi
    if [ "$kind" = elastic-exec ]; then
        measure "$d" "$d/ev"
    else
        measure "$d"
    fi
}

echo "# $nproc local PyTorch $("$PY" -c 'import torch; print(torch.__version__)') gloo workers, $(nproc) cores, $repeats runs each, interleaved"
printf "%-18s %4s %12s %12s %14s\n" agent run respawn_ms ready_s detect_ms
for i in $(seq 1 "$repeats"); do
    for kind in elastic-exec torchrun-default torchrun-0.1s; do
        if r=$(run_one "$kind" "$i"); then
            set -- $r
            printf "%-18s %4d %12s %12s %14s\n" "$kind" "$i" "$1" "$2" "${3:--}"
            echo "$kind $r" >> "$tmp/all"
        fi
    done
done
echo "# medians"
"$PY" - "$tmp/all" << 'PYEOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, *v = line.split()
    rows.setdefault(k, []).append([float(x) for x in v])
for k, vs in rows.items():
    cols = list(zip(*vs))
    med = [statistics.median(c) for c in cols]
    print("%-18s respawn %8.1f ms   all ready %6.3f s%s" % (k, med[0], med[1],
          ("   detect->start %.1f ms" % med[2]) if len(med) > 2 else ""))
PYEOF
