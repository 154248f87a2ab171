#!/bin/bash
# t2010-exec-torch.sh - real torchrun-contract programs from Debian's
# python3-torch under elastic-exec: a gloo job whose rank 1 dies on the
# first attempt and completes on the second, and torchelastic's own
# FileTimerClient killing a hung step through elastic-exec's FIFO.
. "${srcdir:-.}/exec/lib.sh"

PYSYS=/usr/bin/python3
"$PYSYS" -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' 2> /dev/null ||
    skip_all "Debian's python3-torch with gloo cannot be imported by $PYSYS"
tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT

# 1. gloo all-reduce, rank 1 crashes once every rank is ready
d=$tmp/gloo
mkdir -p "$d"
exec_start "$d/out" "$d/err" --nproc-per-node 2 --max-restarts 1 --event-log "$d/ev" \
    "$PYSYS" "${srcdir:-.}/exec/torch_worker.py" "$d" 1
exec_wait 300
is "$EXEC_RC" 0 "the PyTorch job restarted and completed" || diag "$(tail -n 30 "$d/err")"
is "$(cat "$d/done.1.0" "$d/done.1.1" 2> /dev/null | tr '\n' ' ')" "3.000000 3.000000 " \
    "attempt 1: both ranks all-reduced 1+2 = 3 over gloo"
is "$(ev_count "$d/ev" worker_exit attempt=0 rank=1 exitcode=13 state=FAILED)" 1 "rank 1's exit 13 was the failure"
is "$(ev_get "$d/ev" shutdown restarts)" 1 "one restart"
"$PY" - "$d" << 'PYEOF' | while read -r line; do diag "$line"; done
import glob, json, os, sys
d = sys.argv[1]
rd = lambda p: float(open(p).read())
crash = rd(os.path.join(d, "crash.0.1"))
starts = [rd(p) for p in glob.glob(os.path.join(d, "start.1.*"))]
ready = [rd(p) for p in glob.glob(os.path.join(d, "ready.1.*"))]
evs = [json.loads(l) for l in open(os.path.join(d, "ev"))]
fail = next(e for e in evs if e["event"] == "worker_exit" and e.get("state") == "FAILED")
start = next(e for e in evs if e["event"] == "worker_start" and e["attempt"] == 1)
print("crash -> exit detected -> respawn (event log): %.1f ms" % ((start["ts"] - fail["ts"]) * 1e3))
print("crash -> first new process running: %.1f ms" % ((min(starts) - crash) * 1e3))
print("crash -> all 2 workers ready again: %.2f s" % (max(ready) - crash))
PYEOF

# 2. torchelastic's FileTimerClient: a hung step is killed, the retry finishes
d=$tmp/timer
mkdir -p "$d"
exec_start "$d/out" "$d/err" --max-restarts 1 --enable-file-timer --event-log "$d/ev" \
    "$PYSYS" "${srcdir:-.}/exec/torch_timer.py" 2
exec_wait 300
is "$EXEC_RC" 0 "the hung step was killed and the retry finished" || diag "$(tail -n 30 "$d/err")"
is "$(ev_count "$d/ev" watchdog_fire kind=file_timer scope=train_step signal=SIGKILL)" 1 \
    "FileTimerClient's request (scope train_step, SIGKILL) fired once"
grep -q "attempt 1 finished in time" "$d/out"
ok $? "attempt 1 ran to completion"
done_testing
