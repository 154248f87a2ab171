#!/bin/bash
# t2003-exec-failure.sh - restarts exhausted: the failure report (root cause
# first, exit code or signal, message, time), the exit status, the error
# file written through libelastic or in torchelastic's plain shape, and the
# agent's own error file for an enclosing agent.
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT

# 1. a rank that fails on every attempt
exec_start "$tmp/out" "$tmp/err" --nproc-per-node 3 --max-restarts 2 --event-log "$tmp/ev1" \
    "$WORKER" "crash:1:*:exit=7" "crash:*:*:hang"
exec_wait 60
is "$EXEC_RC" 7 "restarts exhausted: elastic-exec exits with the root cause's code"
grep -q "Root Cause (first observed failure)" "$tmp/err"
ok $? "the report names the root cause" || diag "$(cat "$tmp/err")"
grep -q "rank      : 1 (local_rank: 1)" "$tmp/err" && grep -q "exitcode  : 7 (pid: [0-9]*)" "$tmp/err"
ok $? "the report shows rank 1 and exit code 7"
grep -q "exited with code 7" "$tmp/err"
ok $? "without an error file the message says how it exited"
grep -q "2 restarts of 2 allowed" "$tmp/err"
ok $? "the report counts the restarts"
is "$(ev_count "$tmp/ev1" restart)" 2 "two restarts in the event log"
is "$(ev_get "$tmp/ev1" shutdown state)" FAILED "the run ended FAILED"
wait_no_marked 20
ok $? "no worker is left after the failure"

# 2. killed by a signal: the signal name, 128+signal
exec_start "$tmp/out" "$tmp/err" --nproc-per-node 2 "$WORKER" "crash:0:*:segv" "crash:*:*:hang"
exec_wait 60
is "$EXEC_RC" 139 "a SIGSEGV root cause exits 128+11"
grep -q "message   : Signal 11 (SIGSEGV) received by PID [0-9]*" "$tmp/err" && grep -q "signal    : SIGSEGV" "$tmp/err"
ok $? "the report names the signal" || diag "$(cat "$tmp/err")"

# 3. torchelastic's plain error-file shape, written by any program
exec_start "$tmp/out" "$tmp/err" --nproc-per-node 1 sh -c \
    'printf "{\"message\": \"plain message\", \"timestamp\": 1700000000}" > "$TORCHELASTIC_ERROR_FILE"; exit 4'
exec_wait 60
is "$EXEC_RC" 4 "a worker that wrote an error file and exited 4"
grep -q "message   : plain message" "$tmp/err" && grep -q "time      : 2023-11-14T22:13:20" "$tmp/err"
ok $? "the report shows the error file's message and timestamp" || diag "$(cat "$tmp/err")"

# 4. an unreadable error file: a warning, and the exit is still reported
exec_start "$tmp/out" "$tmp/err" sh -c 'echo garbage > "$ELASTIC_ERROR_FILE"; exit 5'
exec_wait 60
is "$EXEC_RC" 5 "a garbage error file does not hide the failure"
grep -q "not torchelastic's JSON format" "$tmp/err" && grep -q "exited with code 5" "$tmp/err"
ok $? "it is named as unreadable and the exit code is reported" || diag "$(cat "$tmp/err")"

# 5. through libelastic's elastic_record_error
if [ -x "$LIBWORKER" ]; then
    before=$(date +%s)
    exec_start "$tmp/out" "$tmp/err" --nproc-per-node 2 --log-dir "$tmp/logs" --run-id errf \
        "$LIBWORKER" "crash:1:*:hang" "error:disk on fire" "exit:3"
    exec_wait 60
    is "$EXEC_RC" 3 "libelastic worker: exit 3"
    grep -q "message   : disk on fire" "$tmp/err" && grep -q "rank      : 0 (local_rank: 0)" "$tmp/err"
    ok $? "the report carries the message recorded by elastic_record_error" || diag "$(cat "$tmp/err")"
    ef=$tmp/logs/errf/attempt_0/0/error.json
    grep -q "error_file: $ef" "$tmp/err"
    ok $? "the report names the error file"
    "$PY" - "$ef" "$before" << 'PYEOF'
import json, sys, time
d = json.load(open(sys.argv[1]))
assert d["message"]["message"] == "disk on fire", d
ts = int(d["message"]["extraInfo"]["timestamp"])
assert int(sys.argv[2]) <= ts <= time.time() + 1, ts
PYEOF
    ok $? "the error file is torchelastic's JSON with message and timestamp"
else
    skip "libelastic is not built (no MPI): elastic_record_error not tested"
    skip "libelastic is not built"
    skip "libelastic is not built"
    skip "libelastic is not built"
fi

# 6. an enclosing agent's error file gets our root cause
ELASTIC_ERROR_FILE=$tmp/outer.json "$EXEC" --nproc-per-node 2 "$WORKER" "crash:1:*:exit=9" "crash:*:*:hang" 2> "$tmp/err"
is "$?" 9 "nested: exit 9"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["message"]["message"]; assert m.startswith("rank 1: exited with code 9"), m' "$tmp/outer.json"
ok $? "the agent's own ELASTIC_ERROR_FILE names the root cause for the enclosing agent"
done_testing
