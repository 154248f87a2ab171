#!/bin/bash
# t2002-exec-restart.sh - a worker SIGKILLed from outside, one that
# segfaults and one that exits non-zero: the group restarts, the restart
# count increments, the next attempt succeeds, and the respawn is fast.
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT

# respawn_ms EVENTLOG: worker exit detected -> first worker of the next attempt started
respawn_ms() {
    "$PY" - "$1" << 'PYEOF'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
fail = next(e for e in evs if e["event"] == "worker_exit" and e.get("state") == "FAILED")
start = next(e for e in evs if e["event"] == "worker_start" and e["attempt"] == fail["attempt"] + 1)
print("%.1f" % ((start["ts"] - fail["ts"]) * 1e3))
PYEOF
}

# 1. SIGKILL from outside
d=$tmp/kill
mkdir -p "$d"
exec_start "$tmp/out" "$tmp/err" --nproc-per-node 4 --max-restarts 1 --event-log "$d/ev" \
    "$WORKER" "ready:$d" "crash:*:1:exit=0" hang
ok $(wait_until 60 test -f "$d/ready.2.0"; echo $?) "attempt 0: rank 2 is running"
victim=$(cat "$d/ready.2.0")
kill -KILL "$victim"
exec_wait 60
is "$EXEC_RC" 0 "after rank 2 was SIGKILLed the group restarted and succeeded" || diag "$(cat "$tmp/err")"
is "$(ev_count "$d/ev" worker_exit rank=2 attempt=0 signal=SIGKILL state=FAILED)" 1 \
    "the event log has rank 2's exit by SIGKILL"
is "$(ls "$d"/ready.*.1 | wc -l)" 4 "all 4 ranks started again with ELASTIC_RESTART_COUNT=1"
is "$(ev_count "$d/ev" restart attempt=1)" 1 "one restart"
ms=$(respawn_ms "$d/ev")
diag "SIGKILL -> respawn: $ms ms (4 workers)"
ok $(awk -v m="$ms" 'BEGIN { exit !(m < 1000) }'; echo $?) "respawned within 1 s on a loaded machine ($ms ms)"

# 2. segfault, 3. non-zero exit, 4. abort
for mode in segv exit=3 abort; do
    d=$tmp/$mode
    mkdir -p "$d"
    exec_start "$tmp/out" "$tmp/err" --nproc-per-node 3 --max-restarts 2 --event-log "$d/ev" \
        "$WORKER" "crash:1:0:$mode" "crash:*:0:hang" "ready:$d"
    exec_wait 60
    is "$EXEC_RC" 0 "$mode on attempt 0: restarted and succeeded" || diag "$(cat "$tmp/err")"
    is "$(ls "$d"/ready.*.1 2> /dev/null | wc -l)" 3 "$mode: attempt 1 ran every rank"
    is "$(ev_get "$d/ev" shutdown restarts)" 1 "$mode: exactly one restart"
    case $mode in
        segv) is "$(ev_get "$d/ev" worker_exit signal 0)" SIGSEGV "the exit was seen as SIGSEGV" ;;
        abort) is "$(ev_get "$d/ev" worker_exit signal 0)" SIGABRT "the exit was seen as SIGABRT" ;;
        *) is "$(ev_get "$d/ev" worker_exit exitcode 0)" 3 "the exit code 3 was seen" ;;
    esac
    diag "$mode -> respawn: $(respawn_ms "$d/ev") ms (3 workers)"
done

# the restart count increments across attempts
d=$tmp/count
mkdir -p "$d"
"$EXEC" --nproc-per-node 2 --max-restarts 3 "$WORKER" "env:$d" "crash:0:0:exit=1" "crash:0:1:exit=1" \
    "crash:*:0:hang" "crash:*:1:hang" 2> "$tmp/err"
is "$?" 0 "two failures, then success on attempt 2"
is "$(sed -n 's/^ELASTIC_RESTART_COUNT=//p' "$d/env.1.2") $(sed -n 's/^TORCHELASTIC_RESTART_COUNT=//p' "$d/env.1.2")" \
    "2 2" "attempt 2 sees ELASTIC_RESTART_COUNT=2 and TORCHELASTIC_RESTART_COUNT=2"
is "$(grep -c '^ELASTIC_RESUME' "$d/env.0.0")/$(sed -n 's/^ELASTIC_RESUME=//p' "$d/env.1.2")/$(sed -n 's/^ELASTIC_RESUME_FRESH_OK=//p' "$d/env.1.2")" \
    "0/1/2" "attempt 0 has no ELASTIC_RESUME, a restarted one resumes (or starts fresh when nothing was saved)"

wait_no_marked 20
ok $? "no worker process is left"
done_testing
