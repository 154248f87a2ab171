# pmix/lib.sh - MPI jobs under pmix-launch, the hosted PMIx server (source it)
#
# Each job runs with its own run id, event log and --tmpdir, so its ranks,
# namespaces, session directories and /dev/shm segments are told apart from
# anything else running on the machine (other tests use mpirun too).
#
#   pl_start NAME N [launcher args] -- PROG ARGS...   start a job in the background
#   pl_wait TIMEOUT                                   wait for it; sets PL_RC
#                                                     (124: hung, reported with
#                                                     the ranks' backtraces)
#   pl_rank_pid RANK                                  PID of a rank (last attempt)
#   pl_kill RANK... [-SIG]                            send a real signal (default KILL)
#   pl_out / pl_log                                   the job's output / event log
#   pl_check_clean DESC                               no process, session dir or
#                                                     /dev/shm segment left (3 checks)
#   pl_kill_job                                       SIGKILL launcher and ranks

. "${srcdir:-.}/lib/tap.sh"

PMIX_LAUNCH=${PMIX_LAUNCH:-./pmix/pmix-launch}
FT_APP=${FT_APP:-./pmix/ft_app}
export OMPI_MCA_opal_cuda_support=0

pl_root=$(mktemp -d "${TMPDIR:-/tmp}/t5-pmix.XXXXXX")
pl_seq=0
pl_pid=
pl_name=
pl_dir=
pl_run_id=
PL_RC=

pl_cleanup() {
    pl_kill_job
    rm -rf "$pl_root"
}
trap pl_cleanup EXIT

pl_start() {
    pl_name=$1
    local n=$2 extra=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        extra+=("$1")
        shift
    done
    [ "$1" = "--" ] && shift
    pl_seq=$((pl_seq + 1))
    pl_dir=$pl_root/$pl_seq-$pl_name
    mkdir -p "$pl_dir/tmp"
    pl_run_id="t$$-$pl_seq-$RANDOM"
    "$PMIX_LAUNCH" -n "$n" --run-id "$pl_run_id" --tmpdir "$pl_dir/tmp" \
        --event-log "$pl_dir/events" "${extra[@]}" -- "$@" > "$pl_dir/out" 2>&1 &
    pl_pid=$!
}

pl_wait() {
    local timeout=${1:-120}
    if ! wait_for_exit "$pl_pid" "$timeout"; then
        diag "pmix-launch (pid $pl_pid) still running after $timeout s; killing the job"
        pl_backtraces
        pl_kill_job
        wait "$pl_pid" 2> /dev/null
        PL_RC=124
        return 124
    fi
    wait "$pl_pid"
    PL_RC=$?
    return 0
}

# pl_backtraces: every live rank's main-thread stack, as TAP comments (gdb),
# and one line per rank ("PID FRAMES...") in $pl_dir/stacks
pl_backtraces() {
    local p
    command -v gdb > /dev/null || return 0
    # PL_CORE_DIR (bench/pmix-soak.sh --cores DIR): keep a core of every
    # rank and pmix-launch's directory, to read the hang's state afterwards
    if [ -n "${PL_CORE_DIR:-}" ]; then
        mkdir -p "$PL_CORE_DIR/$pl_name" && cp -r "$pl_dir/." "$PL_CORE_DIR/$pl_name/" 2> /dev/null
        for p in $(pl_job_procs); do
            timeout 120 gcore -o "$PL_CORE_DIR/$pl_name/core" "$p" > /dev/null 2>&1
        done
    fi
    : > "$pl_dir/stacks"
    for p in $(pl_job_procs); do
        timeout 60 gdb -p "$p" -batch -ex 'thread apply 1 bt' 2> /dev/null | grep '^#' > "$pl_dir/stack.$p"
        diag "rank process $p: $(tr '\0' ' ' 2> /dev/null < "/proc/$p/cmdline")" "$(cat "$pl_dir/stack.$p")"
        echo "$p $(tr '\n' ' ' < "$pl_dir/stack.$p")" >> "$pl_dir/stacks"
        rm -f "$pl_dir/stack.$p"
    done
}

pl_out() { cat "$pl_dir/out"; }
pl_log() { cat "$pl_dir/events"; }

pl_rank_pid() {
    sed -n "s/.* start rank=$1 pid=\([0-9]*\) .*/\1/p" "$pl_dir/events" 2> /dev/null | tail -n 1
}

pl_kill() {
    local sig=KILL pids=() r p
    for r in "$@"; do
        case $r in -*) sig=${r#-} ;; esac
    done
    for r in "$@"; do
        case $r in -*) continue ;; esac
        p=$(pl_rank_pid "$r")
        [ -n "$p" ] || {
            diag "pl_kill: no pid for rank $r"
            return 1
        }
        pids+=("$p")
    done
    kill -s "$sig" "${pids[@]}"
}

# pl_job_procs: PIDs of live processes whose environment names this job
pl_job_procs() {
    local f
    for f in /proc/[0-9]*/environ; do
        tr '\0' '\n' 2> /dev/null < "$f" | grep -q "^PMIX_NAMESPACE=elastic\.$pl_run_id\." &&
            basename "$(dirname "$f")"
    done
}

pl_check_clean() {
    local desc=$1 left p prefixes leaked=0 pfx
    # every rank the launcher started is gone, and nothing carries the job's namespace
    left=
    for p in $(sed -n 's/.* start rank=[0-9]* pid=\([0-9]*\) .*/\1/p' "$pl_dir/events"); do
        kill -0 "$p" 2> /dev/null && left="$left $p"
    done
    left="$left $(pl_job_procs | tr '\n' ' ')"
    is "$(echo $left)" "" "$desc: no process left"
    # the server's directory (PMIx rendezvous, session directories) is gone
    is "$(ls -A "$pl_dir/tmp")" "" "$desc: no session directory left"
    # the Open MPI segments the ranks mapped (logged by prefix) are gone
    prefixes=$(sed -n 's/.* shm prefix=\(.*\)$/\1/p' "$pl_dir/events")
    for pfx in $prefixes; do
        # shellcheck disable=SC2086
        leaked=$((leaked + $(ls -d ${pfx}* 2> /dev/null | wc -l)))
    done
    if grep -q ' shm_check .* leaked=[1-9]' "$pl_dir/events"; then
        leaked=$((leaked + 1000))
    fi
    is "$leaked" 0 "$desc: no /dev/shm segment left ($(echo $prefixes | wc -w) prefix(es) seen)"
}

pl_kill_job() {
    [ -n "$pl_pid" ] && kill -KILL "$pl_pid" 2> /dev/null
    local p
    if [ -n "$pl_run_id" ]; then
        for p in $(pl_job_procs); do kill -KILL "$p" 2> /dev/null; done
    fi
    return 0
}

# pl_count PATTERN: lines of the job's output matching PATTERN
pl_count() { grep -c -e "$1" "$pl_dir/out"; }
