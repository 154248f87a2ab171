# pmix/exec.sh - MPI jobs under `elastic-exec --nproc-per-node N`, which hosts
# their PMIx server (source it; sources exec/lib.sh)
#
# Each job runs in its own directory with its own TMPDIR (the agent's run
# directory and the PMIx server's directory go there), event log and run
# id, so what it leaves behind is told apart from anything else running.
#
#   ep_start NAME N [elastic-exec args] -- PROG ARGS...   start a job in the background
#   ep_wait TIMEOUT                      wait for it; sets EP_RC (124: hung, killed,
#                                        the live workers' stacks reported)
#   ep_ev EVENT [KEY=VALUE...]           count the job's events
#   ep_get EVENT KEY [N]                 a field of the N-th (default last) such event
#   ep_rank_pid RANK [ATTEMPT]           PID of a rank (default: the last attempt)
#   ep_out / ep_err / ep_log             stdout, stderr, the event log
#   ep_checksum                          the "checksum X" the job printed
#   ep_check_clean DESC                  no process, directory or /dev/shm
#                                        segment left (3 checks)
#   ep_kill_job                          SIGKILL the agent and its workers

. "${srcdir:-.}/exec/lib.sh"

HEAT2D=${top_builddir:-..}/examples/heat2d
SGD=${top_builddir:-..}/examples/sgd
FT_APP=${FT_APP:-./pmix/ft_app}
FIRST=${srcdir:-.}/pmix/first-attempt.sh
export OMPI_MCA_opal_cuda_support=0
# libelastic grows back into the slots of ranks lost in place by default;
# these tests check the shrunk world (growth is t5020's, which says at-once)
export ELASTIC_GROW_POLICY=${ELASTIC_GROW_POLICY:-never}

ep_root=$(mktemp -d "${TMPDIR:-/tmp}/t5-exec.XXXXXX")
ep_seq=0
ep_pid=
ep_dir=
EP_RC=

ep_cleanup() {
    ep_kill_job
    rm -rf "$ep_root"
}
trap ep_cleanup EXIT

ep_start() {
    local name=$1 n=$2 extra=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        extra+=("$1")
        shift
    done
    [ "$1" = "--" ] && shift
    ep_seq=$((ep_seq + 1))
    ep_dir=$ep_root/$ep_seq-$name
    mkdir -p "$ep_dir/tmp"
    TMPDIR=$ep_dir/tmp ELASTIC_TEST_MARK=$test_mark "$EXEC" --nproc-per-node "$n" \
        --run-id "t$$-$ep_seq" --event-log "$ep_dir/ev" "${extra[@]}" -- "$@" \
        > "$ep_dir/out" 2> "$ep_dir/err" &
    ep_pid=$!
}

ep_wait() {
    local timeout=${1:-120}
    if ! wait_for_exit "$ep_pid" "$timeout"; then
        diag "elastic-exec (pid $ep_pid) still running after $timeout s; killing the job"
        ep_backtraces
        ep_kill_job
        wait "$ep_pid" 2> /dev/null
        EP_RC=124
        return 124
    fi
    wait "$ep_pid"
    EP_RC=$?
    return 0
}

# ep_backtraces: the main-thread stack of every live worker of the job, as
# TAP comments (gdb, where installed): where a hung run hung
ep_backtraces() {
    local p
    command -v gdb > /dev/null || return 0
    for p in $("$PY" -c 'import json,sys; print(" ".join(str(e["pid"]) for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "worker_start"))' "$ep_dir/ev" 2> /dev/null); do
        kill -0 "$p" 2> /dev/null || continue
        diag "worker $p: $(tr '\0' ' ' 2> /dev/null < "/proc/$p/cmdline")" \
            "$(timeout 60 gdb -p "$p" -batch -ex 'thread apply 1 bt' 2> /dev/null | grep '^#')"
    done
}

ep_out() { cat "$ep_dir/out"; }
ep_err() { cat "$ep_dir/err"; }
ep_log() { cat "$ep_dir/ev" 2> /dev/null; }
ep_ev() { ev_count "$ep_dir/ev" "$@"; }
ep_get() { ev_get "$ep_dir/ev" "$@"; }
ep_checksum() { sed -n 's/^checksum \([0-9a-f]*\)$/\1/p' "$ep_dir/out" | tail -n 1; }

ep_rank_pid() {
    "$PY" - "$ep_dir/ev" "$1" "${2:--1}" << 'PYEOF'
import json, sys
rank, attempt = int(sys.argv[2]), int(sys.argv[3])
pids = [(e["attempt"], e["pid"]) for e in map(json.loads, open(sys.argv[1]))
        if e.get("event") == "worker_start" and e.get("rank") == rank]
pids = [p for a, p in pids if attempt < 0 or a == attempt]
print(pids[-1] if pids else "")
PYEOF
}

# ep_shm_files: the /dev/shm files under the prefixes the agent saw mapped
ep_shm_files() {
    "$PY" - "$ep_dir/ev" << 'PYEOF'
import json, os, sys
prefixes = set()
for e in map(json.loads, open(sys.argv[1])):
    if e.get("event") == "pmix_job_end":
        prefixes.update(e.get("shm", []))
for f in sorted(os.listdir("/dev/shm")):
    if any(f.startswith(p) for p in prefixes):
        print("/dev/shm/" + f)
PYEOF
}

ep_check_clean() {
    local desc=$1 left
    wait_no_marked 20
    left=$(mark_pids | tr '\n' ' ')
    is "$left" "" "$desc: no process left"
    is "$(ls -A "$ep_dir/tmp")" "" "$desc: no run or PMIx session directory left"
    # the namespace's cleanup removed Open MPI's segments (shm_leaked counts
    # what the agent itself had to remove afterwards: none), and none is there
    left="$(ep_shm_files | tr '\n' ' ')$("$PY" - "$ep_dir/ev" << 'PYEOF'
import json, sys
for e in map(json.loads, open(sys.argv[1])):
    if e.get("event") == "pmix_job_end" and e.get("shm_leaked"):
        print("(%s: %d leaked)" % (e["nspace"], e["shm_leaked"]))
PYEOF
)"
    is "$left" "" "$desc: no /dev/shm segment left ($(ep_get pmix_job_end shm_prefixes) prefix(es) seen)"
}

ep_kill_job() {
    [ -n "$ep_pid" ] && kill -KILL "$ep_pid" 2> /dev/null
    kill_marked
    return 0
}
