# tests/pmix/mesh.sh - start several mesh-pmix-node "nodes" on this machine
#
#   mn_start NAME NODES RANKS [NODE ARGS...] -- PROG [ARGS...]
#       starts NODES processes of pmix/mesh-pmix-node (node k: output in
#       $mn_dir/out.k, events in $mn_dir/ev.k, pid in mn_pid[k]); they meet
#       through port files in $mn_dir/ports (ports picked by the kernel)
#   mn_wait TIMEOUT    waits for every node; exit codes in mn_rc[k]
#   mn_kill_node K     SIGKILLs node K's process (its ranks die with it)
#   mn_out / mn_ev K   every node's output / node K's event log
#   mn_stop            SIGTERMs every node
#   mn_check_clean D [K...]  no rank of the job left, no server directory
# (sourced after pmix/lib.sh)

MESH_PMIX_NODE=${MESH_PMIX_NODE:-./pmix/mesh-pmix-node}
export ELASTIC_MESH_SECRET=${ELASTIC_MESH_SECRET:-t512x-mesh-pmix-secret-0123456789}
mn_seq=0
mn_pid=()
mn_rc=()
mn_dir=
mn_run_id=
mn_nodes=0

mn_job_procs() {
    local f
    for f in /proc/[0-9]*/environ; do
        { tr '\0' '\n' < "$f"; } 2> /dev/null | grep -q "^PMIX_NAMESPACE=elastic\.$mn_run_id\." &&
            basename "$(dirname "$f")"
    done
}

mn_kill_all() {
    local p
    for p in "${mn_pid[@]}"; do kill -KILL "$p" 2> /dev/null; done
    if [ -n "$mn_run_id" ]; then
        for p in $(mn_job_procs); do kill -KILL "$p" 2> /dev/null; done
    fi
    return 0
}
trap 'mn_kill_all; pl_cleanup' EXIT

mn_start() {
    local name=$1 k args=()
    mn_nodes=$2
    local ranks=$3
    shift 3
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        args+=("$1")
        shift
    done
    [ "$1" = "--" ] && shift
    mn_seq=$((mn_seq + 1))
    mn_dir=$pl_root/mesh-$mn_seq-$name
    mn_run_id="m$$-$mn_seq-$RANDOM"
    mkdir -p "$mn_dir/ports"
    mn_pid=()
    mn_rc=()
    for ((k = 0; k < mn_nodes; k++)); do
        mkdir -p "$mn_dir/tmp.$k"
        TMPDIR=$mn_dir/tmp.$k "$MESH_PMIX_NODE" --nodes "$mn_nodes" --node "$k" \
            --ranks "$ranks" --dir "$mn_dir/ports" --run-id "$mn_run_id" \
            --event-log "$mn_dir/ev.$k" "${args[@]}" -- "$@" > "$mn_dir/out.$k" 2>&1 &
        mn_pid[k]=$!
    done
}

mn_wait() {
    local timeout=${1:-120} k
    for ((k = 0; k < mn_nodes; k++)); do
        if ! wait_for_exit "${mn_pid[k]}" "$timeout"; then
            diag "node $k (pid ${mn_pid[k]}) still running after $timeout s; killing the job"
            mn_kill_all
        fi
        wait "${mn_pid[k]}" 2> /dev/null
        mn_rc[k]=$?
    done
}

mn_kill_node() { kill -KILL "${mn_pid[$1]}"; }
# SIGTERM every node (each stops its ranks and leaves cleanly)
mn_stop() { local p; for p in "${mn_pid[@]}"; do kill -TERM "$p" 2> /dev/null; done; }
mn_out() { cat "$mn_dir"/out.*; }
mn_ev() { cat "$mn_dir/ev.$1" 2> /dev/null; }
mn_count() { cat "$mn_dir"/out.* | grep -c -e "$1"; }

# first time (CLOCK_REALTIME seconds) of an event line matching PATTERN in node K's log
mn_ev_time() { grep -e "$2" "$mn_dir/ev.$1" 2> /dev/null | head -n 1 | cut -d' ' -f1; }

# milliseconds from time A to time B (seconds, fractional)
mn_ms() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "?"; else printf "%.1f", (b - a) * 1000 }'; }

# mn_check_clean DESC [NODES...]: no rank left; no server directory left by
# NODES (default: every node; a node SIGKILLed cannot clean up)
mn_check_clean() {
    local desc=$1 left k nodes
    shift
    left="$(mn_job_procs | tr '\n' ' ')"
    is "$(echo $left)" "" "$desc: no rank left"
    nodes=${*:-$(seq 0 $((mn_nodes - 1)))}
    left=
    for k in $nodes; do left="$left$(ls -A "$mn_dir/tmp.$k")"; done
    is "$left" "" "$desc: no server directory left by node(s)" $nodes
}
