#!/bin/bash
# t2013-exec-restart-background.sh - a restart does not wait for the old
# workers' exits when the stop signal ends them by its default action: the
# next attempt starts at once, the old workers (and what they spawned in
# their process groups) are still stopped and reaped, each reported with
# its attempt; a worker that handles the stop signal, or a fixed
# --master-port, makes the restart wait for the old workers as before.
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT

# old_alive DIR: the attempt-0 processes (workers and their children) still alive
old_alive() {
    local f p n=0
    for f in "$1"/ready.*.0 "$1"/child.*.0; do
        [ -f "$f" ] || continue
        p=$(cat "$f")
        alive "$p" && n=$((n + 1))
    done
    echo "$n"
}

# first_ts LOG EVENT KEY=VALUE...: time stamp of the first matching event
first_ts() {
    "$PY" - "$@" << 'PYEOF'
import json, sys
path, event, conds = sys.argv[1], sys.argv[2], sys.argv[3:]
for line in open(path):
    e = json.loads(line)
    if e.get("event") == event and all(str(e.get(k)) == v for k, v in (c.split("=", 1) for c in conds)):
        print("%.6f" % e["ts"])
        break
PYEOF
}

# 1. survivors that do not handle SIGTERM, each with a child in its group:
#    stopped in the background
d=$tmp/bg
mkdir -p "$d"
exec_start "$tmp/out" "$tmp/err" --nproc-per-node 3 --max-restarts 1 --event-log "$d/ev" \
    "$WORKER" "ready:$d" "spawn:$d" "waitfor:$d/child.0.0" "waitfor:$d/child.2.0" \
    "crash:1:0:exit=3" "crash:*:0:hang"
exec_wait 60
is "$EXEC_RC" 0 "rank 1 failed, the group restarted and succeeded" || diag "$(cat "$tmp/err")"
is "$(ls "$d"/ready.*.1 2> /dev/null | wc -l)" 3 "attempt 1 ran every rank"
is "$(ev_get "$d/ev" restarted stopping_in_background)" 2 \
    "the restart left the 2 survivors to exit in the background"
is "$(ev_count "$d/ev" worker_exit attempt=0 state=STOPPED background=True signal=SIGTERM)" 2 \
    "both were reaped afterwards, each reported with its attempt and SIGTERM"
is "$(old_alive "$d")" 0 "no process of attempt 0 is left (workers and the children in their groups)"
stop_ms=$(ev_get "$d/ev" restarted stop_ms)
ok $(awk -v m="$stop_ms" 'BEGIN { exit !(m != "" && m >= 0) }'; echo $?) \
    "the restarted event still reports the stop time ($stop_ms ms)"
t_start=$(first_ts "$d/ev" worker_start attempt=1)
t_reaped=$(first_ts "$d/ev" worker_exit attempt=0 background=True)
diag "the first old worker was reaped $(awk -v a="$t_start" -v b="$t_reaped" 'BEGIN { printf "%.1f", (b - a) * 1e3 }') ms after attempt 1 started"

# 2. survivors that handle SIGTERM (exit 0 from their handler): the restart
#    waits for them, so a new attempt never overlaps code still running
d=$tmp/handled
mkdir -p "$d"
exec_start "$tmp/out" "$tmp/err" --nproc-per-node 3 --max-restarts 1 --event-log "$d/ev" \
    "$WORKER" "trap:TERM:0" "ready:$d" "waitfor:$d/ready.0.0" "waitfor:$d/ready.2.0" \
    "crash:1:0:exit=3" "crash:*:0:hang"
exec_wait 60
is "$EXEC_RC" 0 "handled SIGTERM: restarted and succeeded" || diag "$(cat "$tmp/err")"
is "$(ev_get "$d/ev" restarted stopping_in_background)" 0 "nothing was left to the background"
is "$(ev_count "$d/ev" worker_exit attempt=0 exitcode=0)" 2 "both survivors ran their handler (exit 0)"
t_start=$(first_ts "$d/ev" worker_start attempt=1)
n_before=$("$PY" - "$d/ev" "$t_start" << 'PYEOF'
import json, sys
t = float(sys.argv[2])
print(sum(1 for l in open(sys.argv[1]) for e in [json.loads(l)]
          if e["event"] == "worker_exit" and e["attempt"] == 0 and e["exitcode"] == 0 and e["ts"] <= t))
PYEOF
)
is "$n_before" 2 "both exited before attempt 1 started"

# 3. a fixed --master-port: the next attempt reuses it, so it waits
d=$tmp/port
mkdir -p "$d"
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
exec_start "$tmp/out" "$tmp/err" --nproc-per-node 3 --max-restarts 1 --master-port "$port" \
    --event-log "$d/ev" "$WORKER" "ready:$d" "waitfor:$d/ready.0.0" "waitfor:$d/ready.2.0" \
    "crash:1:0:exit=3" "crash:*:0:hang"
exec_wait 60
is "$EXEC_RC" 0 "--master-port $port: restarted and succeeded" || diag "$(cat "$tmp/err")"
is "$(ev_get "$d/ev" restarted stopping_in_background)" 0 "with a fixed port nothing was left to the background"
is "$(ev_count "$d/ev" worker_exit attempt=0 state=STOPPED background=True)" 0 "no background exit reported"

ok $(wait_no_marked 20; echo $?) "no worker process left"
done_testing
