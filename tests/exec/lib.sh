# exec/lib.sh - helpers for elastic-exec's shell tests (source after tap.sh)
#
#   EXEC, WORKER, LIBWORKER       the programs under test
#   exec_start OUT ERR ARGS...    start elastic-exec in the background ($exec_pid)
#   exec_wait TIMEOUT             wait for it; sets EXEC_RC (124 on timeout)
#   ev_count FILE EVENT [K=V...]  count events (with matching fields)
#   ev_get FILE EVENT KEY [N]     field KEY of the N-th (default last) such event
#   mark_pids                     pids of every process carrying this test's mark
#   wait_no_marked TIMEOUT        wait until none is left
#   alive PID                     the process exists and is not a zombie
#   free_port                     a TCP port nobody listens on now
#   ev_agent_pid FILE             the agent's pid from its event log
#
# elastic-exec started by exec_start, and so its workers and their children,
# carry ELASTIC_TEST_MARK=<unique>: leftovers are found through /proc.

. "${srcdir:-.}/lib/tap.sh"

EXEC=${top_builddir:-..}/src/exec/elastic-exec
WORKER=${top_builddir:-..}/tests/exec/worker
LIBWORKER=${top_builddir:-..}/tests/exec/libworker
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
test_mark="elastic-exec-test-$$-$RANDOM"
# the agent's own settings must not leak in from the caller's environment
for v in $(env | sed -n 's/^\(ELASTIC_[A-Z_]*\)=.*/\1/p'); do
    case $v in ELASTIC_TEST_*) ;; *) unset "$v" ;; esac
done
unset TORCHELASTIC_ENABLE_FILE_TIMER TORCHELASTIC_TIMER_FILE TORCHELASTIC_HEALTH_CHECK_PORT
unset OMPI_COMM_WORLD_RANK PMIX_RANK SLURM_PROCID PMI_RANK OMP_NUM_THREADS

exec_pid=
EXEC_RC=

exec_start() {
    local out=$1 err=$2
    shift 2
    ELASTIC_TEST_MARK=$test_mark "$EXEC" "$@" > "$out" 2> "$err" &
    exec_pid=$!
}

exec_wait() {
    if ! wait_for_exit "$exec_pid" "${1:-120}"; then
        diag "elastic-exec (pid $exec_pid) still running after ${1:-120} s; killing it"
        kill -KILL "$exec_pid" 2> /dev/null
        wait "$exec_pid" 2> /dev/null
        EXEC_RC=124
        return 124
    fi
    wait "$exec_pid"
    EXEC_RC=$?
    return 0
}

ev_count() {
    "$PY" - "$@" << 'PYEOF'
import json, sys
path, event, conds = sys.argv[1], sys.argv[2], sys.argv[3:]
n = 0
for line in open(path):
    e = json.loads(line)
    if e.get("event") != event:
        continue
    if all(str(e.get(k)) == v for k, v in (c.split("=", 1) for c in conds)):
        n += 1
print(n)
PYEOF
}

ev_get() {
    "$PY" - "$@" << 'PYEOF'
import json, sys
path, event, key = sys.argv[1:4]
idx = int(sys.argv[4]) if len(sys.argv) > 4 else -1
evs = [json.loads(l) for l in open(path)]
evs = [e for e in evs if e.get("event") == event]
print(evs[idx].get(key, "") if evs else "")
PYEOF
}

mark_pids() {
    grep -lsx --null-data "ELASTIC_TEST_MARK=$test_mark" /proc/[0-9]*/environ 2> /dev/null |
        tr '\0' '\n' | sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p'
}

any_marked() { [ -n "$(mark_pids)" ]; }

# alive PID: the process exists and is not a zombie
alive() {
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

wait_no_marked() { wait_until "$1" eval '! any_marked'; }

kill_marked() {
    local p
    for p in $(mark_pids); do kill -KILL "$p" 2> /dev/null; done
    return 0
}

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

ev_agent_pid() { sed -n 's/.*"agent_pid":\([0-9]*\).*/\1/p' "$1" | head -n 1; }
