#!/bin/bash
# t2007-exec-health.sh - the health server: /healthz 200 while the agent's
# loop runs and 503 while it is stalled (its console is a full pipe), with
# the transitions in the event log; /metrics checked by a strict parser and
# prometheus_client's; restarts, worker states, the last failure and the
# steps reported by libelastic; garbage and slow clients; 127.0.0.1 only;
# a port in use is a usage error.
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'exec 3>&- ; kill_marked; rm -rf "$tmp"' EXIT
HTTP="$PY ${srcdir:-.}/exec/httpcheck.py"

# health_port EVENTLOG: the port the agent listens on
health_port() { wait_for_grep '"event":"agent_start"' "$1" 30 && ev_get "$1" agent_start health_port; }

# 1. metrics through a restart, with libelastic's heartbeat when built
W=$WORKER
[ -x "$LIBWORKER" ] && W=$LIBWORKER
d=$tmp/m
mkdir -p "$d/p"
prog=()
[ -x "$LIBWORKER" ] && prog=("progress:7:1" "snapshot:5")
exec_start "$d/out" "$d/err" --nproc-per-node 2 --max-restarts 1 --health-port 0 --event-log "$d/ev" \
    "$W" trap:TERM:75 "ready:$d" "waitfor:$d/ready.0.0" "crash:1:0:exit=3" "${prog[@]}" "ready:$d/p" hang
port=$(health_port "$d/ev")
ok $([[ $port =~ ^[1-9][0-9]*$ ]]; echo $?) "the agent reports its health port ($port) in agent_start"
wait_until 60 eval "[ -f $d/p/ready.0.1 ] && [ -f $d/p/ready.1.1 ]"
ok $? "the group restarted after rank 1 exited 3, and reported its progress"
addr=$(ss -Hltn "sport = :$port" | awk '{print $4}')
is "$addr" "127.0.0.1:$port" "the server listens on 127.0.0.1 only"
is "$($HTTP get "$port" /healthz | head -n 1)" 200 "/healthz: 200"
$HTTP metrics "$port" > "$d/metrics" 2> "$d/metrics.err"
ok $? "/metrics passes the strict format checks and prometheus_client's parser" ||
    diag "$(cat "$d/metrics" "$d/metrics.err")"
grep -q '^# prometheus_client parsed' "$d/metrics.err" || diag "(prometheus_client not installed)"
m() { grep -F "$1" "$d/metrics" | awk '{print $NF}'; }
is "$(m 'elastic_agent_restarts_total ')" 1 "restarts_total 1"
is "$(m 'elastic_agent_workers{role="default",state="HEALTHY"}')" 2 "2 workers HEALTHY"
is "$(m 'elastic_agent_group_state{role="default",state="HEALTHY"}')" 1 "group state HEALTHY"
is "$(m 'elastic_agent_up ')" 1 "up 1"
grep -q '^elastic_agent_last_failure_info{role="default",rank="1",local_rank="1",exitcode="3",signal="",message="exited with code 3 (no error file)"} 1$' "$d/metrics"
ok $? "the last failure: rank 1, exit code 3"
ok $(awk '/^elastic_agent_uptime_seconds / { exit !($2 > 0) }' "$d/metrics"; echo $?) "uptime > 0"
if [ -x "$LIBWORKER" ]; then
    is "$(m 'elastic_agent_worker_progress_step{role="default",rank="1",local_rank="1"}')" 7 "rank 1 reported step 7"
    is "$(m 'elastic_agent_last_snapshot_step ')" 5 "the last snapshot step is 5"
else
    skip "libelastic not built"
    skip "libelastic not built"
fi

# 2. garbage, oversized and slow clients never block the agent
$HTTP abuse "$port" > "$d/abuse" 2>&1
ok $? "garbage, a 100 KB header, POST, unknown paths and 8 slow clients" || diag "$(cat "$d/abuse")"
diag "$(cat "$d/abuse")"
is "$($HTTP get "$port" /healthz | head -n 1)" 200 "/healthz still 200 afterwards"
kill -TERM "$exec_pid"
exec_wait 60
is "$EXEC_RC" 75 "the agent and its workers are intact and suspend on SIGTERM"

# 3. a stalled agent: its console is a pipe nobody reads
d=$tmp/stall
mkdir -p "$d"
mkfifo "$d/console"
exec 3<> "$d/console" # holds the pipe open without reading it
exec_start "$d/console" "$d/err" --tee 1 --health-port 0 --health-timeout 1 --event-log "$d/ev" \
    "$WORKER" print:20000:................................................................
port=$(health_port "$d/ev")
wait_until 60 eval "[ \"\$($HTTP get $port /healthz 2> /dev/null | head -n 1)\" = 503 ]"
ok $? "/healthz turns 503 while the agent is blocked on its console"
$HTTP metrics "$port" > "$d/metrics" 2>&1
is "$(grep '^elastic_agent_up ' "$d/metrics")" "elastic_agent_up 0" "/metrics still answers, with up 0"
cat "$d/console" > /dev/null &
reader=$!
exec_wait 120
is "$EXEC_RC" 0 "once the console drains the agent finishes"
kill "$reader" 2> /dev/null
exec 3>&-
ok $([ "$(ev_count "$d/ev" health to=unhealthy)" -ge 1 ]; echo $?) "the event log has the healthy -> unhealthy transition"
ok $([ "$(ev_count "$d/ev" health to=healthy)" -ge 1 ]; echo $?) "and the way back"
is "$(ev_get "$d/ev" health to)" healthy "the last transition is back to healthy"

# 4. a port in use is a usage error; TORCHELASTIC_HEALTH_CHECK_PORT works too
$PY -c 'import socket,time,sys; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' > "$tmp/busy" &
busy=$!
wait_until 10 test -s "$tmp/busy"
bport=$(cat "$tmp/busy")
"$EXEC" --health-port "$bport" "$WORKER" 2> "$tmp/err"
is "$?" 2 "--health-port $bport (in use): exit 2"
is "$(wc -l < "$tmp/err")" 1 "one line" || diag "$(cat "$tmp/err")"
grep -q "health-port: cannot listen on 127.0.0.1:$bport: Address already in use" "$tmp/err"
ok $? "naming the address and why"
TORCHELASTIC_HEALTH_CHECK_PORT=$bport "$EXEC" "$WORKER" 2> "$tmp/err"
is "$?" 2 "TORCHELASTIC_HEALTH_CHECK_PORT sets the same server"
kill "$busy"
done_testing
