# slurm.sh - an emulated multi-node Slurm cluster for shell tests (source it)
#
#   slurm_require                 skip_all unless Slurm, munge and root are here
#   cluster_up N [up options]     start N nodes (scripts/slurm-cluster.sh up);
#                                 sets CLUSTER_DIR, CLUSTER_MODE (netns or
#                                 local), CLUSTER_UP_MS; cluster_down runs at exit
#   cluster_down                  stop everything; 1 if anything was left
#   run_in_ctl CMD...             a client command (srun, sbatch, scontrol...)
#                                 in the controller's namespace with SLURM_CONF
#   on_node nK CMD...             a command on node nK (its namespaces)
#   kill_node nK                  SIGKILL every process of node nK (its slurmd
#                                 and all its job processes)
#   start_node nK                 start node nK's slurmd again
#   kill_task nK PATTERN [SIG]    signal node nK's processes whose command
#                                 line matches the ERE PATTERN (default KILL);
#                                 1 if none matched
#   mark_down nK [REASON]         scontrol update state=down (instant failure)
#   node_state nK / job_state J   the state, upper case, without flags
#   release_job JOBID [TIMEOUT]   start a requeued job in 2 s: Slurm holds it
#                                 pending until BeginTime (cred_expire + 1 s)
#   wait_node_state nK STATE TIMEOUT
#   wait_job_state JOBID STATE TIMEOUT
#                                 poll until the state matches the ERE STATE
#                                 (e.g. DOWN, 'COMPLETED|FAILED'); 1 on timeout
#   wait_job_restarts JOBID N TIMEOUT
#                                 poll until Slurm counts N restarts (requeues)
#   task_pids nK PATTERN [VAR=VALUE]
#                                 node nK's processes whose command line
#                                 matches the ERE PATTERN (and whose
#                                 environment has VAR=VALUE)
#   slurm_mpi_env                 export what MPI programs need on the
#                                 cluster: Open MPI's run-as-root variables,
#                                 the TCP transport between nodes, $MPIRUN's
#                                 bin directory first in PATH
#   slurm_has_pmix                true if srun has Slurm's pmix plugin
#
# Nothing here sleeps a fixed time: every wait polls for a state with a
# timeout.  SLURM_CLUSTER_SH names the fixture (default: the source tree's);
# ELASTIC_SLURM_MODE=local forces the fixture's no-namespace fallback.
. "${srcdir:-.}/lib/tap.sh"

SLURM_CLUSTER_SH=${SLURM_CLUSTER_SH:-$(cd "${srcdir:-.}/.." && pwd)/scripts/slurm-cluster.sh}
CLUSTER_DIR=""
# shellcheck disable=SC2034 # for the tests
CLUSTER_MODE=""
# shellcheck disable=SC2034 # for the tests
CLUSTER_UP_MS=""

slurm_require() {
    local c
    for c in slurmctld slurmd srun sbatch scontrol sinfo munged munge setsid nsenter; do
        command -v "$c" > /dev/null 2>&1 \
            || skip_all "$c not found: no Slurm here (Debian: apt-get install slurmctld slurmd slurm-client munge)"
    done
    [ "$(id -u)" -eq 0 ] || skip_all "the emulated cluster needs root (namespaces, SlurmUser=root)"
    [ -x "$SLURM_CLUSTER_SH" ] || skip_all "$SLURM_CLUSTER_SH not found"
}

cluster_up() {
    local n=$1 log
    shift
    CLUSTER_DIR=$(mktemp -d /tmp/esl.XXXXXX) || return 1
    log=$CLUSTER_DIR.up.log
    trap 'cluster_down > /dev/null' EXIT
    trap 'exit 143' TERM INT HUP
    if ! "$SLURM_CLUSTER_SH" up "$CLUSTER_DIR" --nodes "$n" --mode "${ELASTIC_SLURM_MODE:-auto}" "$@" \
        > "$log" 2>&1; then
        diag "cluster up failed:" "$(cat "$log")"
        return 1
    fi
    CLUSTER_MODE=$(sed -n 's/^MODE=//p' "$CLUSTER_DIR/cluster.env")
    CLUSTER_UP_MS=$(sed -n 's/^UP_MS=//p' "$CLUSTER_DIR/cluster.env")
    grep -q 'fallback' "$log" && diag "$(grep fallback "$log")"
    return 0
}

# cluster_down: tear down; keep the directory (logs) when a test failed or
# ELASTIC_TEST_KEEP is set.
cluster_down() {
    local rc=0
    [ -n "$CLUSTER_DIR" ] || return 0
    "$SLURM_CLUSTER_SH" down "$CLUSTER_DIR" || rc=1
    if [ "${tap_failed:-0}" -eq 0 ] && [ -z "${ELASTIC_TEST_KEEP:-}" ] && [ $rc -eq 0 ]; then
        rm -rf "$CLUSTER_DIR" "$CLUSTER_DIR.up.log"
    else
        echo "# cluster files kept in $CLUSTER_DIR"
    fi
    CLUSTER_DIR=
    return $rc
}

run_in_ctl() { "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" "$@"; }
on_node() { "$SLURM_CLUSTER_SH" node "$CLUSTER_DIR" "$@"; }
kill_node() { "$SLURM_CLUSTER_SH" kill-node "$CLUSTER_DIR" "$1"; }
start_node() { "$SLURM_CLUSTER_SH" start-node "$CLUSTER_DIR" "$1"; }

kill_task() {
    local node=$1 pattern=$2 sig=${3:-KILL} p hit=1
    for p in $("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" "$node"); do
        if tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null | grep -Eq -e "$pattern"; then
            kill -s "$sig" "$p" 2> /dev/null && hit=0
        fi
    done
    return $hit
}

mark_down() {
    run_in_ctl scontrol update nodename="$1" state=down reason="${2:-elastic test}"
}

# The base state (IDLE, DOWN, ALLOCATED, MIXED, ...) without flags such as
# "*" (not responding) or "+DRAIN".
node_state() {
    run_in_ctl scontrol -o show node "$1" 2> /dev/null | sed -n 's/.* State=\([A-Z_]*\).*/\1/p'
}

job_state() {
    run_in_ctl scontrol -o show job "$1" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# _wait_state FN ID STATE TIMEOUT: poll every 0.2 s (each poll is an RPC
# to slurmctld; 2 loaded cores do not need more).
_wait_state() {
    local fn=$1 id=$2 want=$3 timeout=$4 deadline s
    deadline=$(($(now_ms) + timeout * 1000))
    while :; do
        s=$($fn "$id")
        if echo "$s" | grep -Eqx -e "$want"; then
            return 0
        fi
        if [ "$(now_ms)" -ge "$deadline" ]; then
            diag "$id is still '$s' after ${timeout}s (waited for $want)"
            return 1
        fi
        sleep 0.2
    done
}

wait_node_state() { _wait_state node_state "$1" "$2" "$3"; }
wait_job_state() { _wait_state job_state "$1" "$2" "$3"; }

release_job() {
    local j=$1 deadline
    deadline=$(($(now_ms) + ${2:-60} * 1000))
    while :; do
        # not "now": a job that starts again within the second of its
        # requeue can find its new credential revoked ("Killing
        # non-startable batch job: Job credential revoked")
        if [ "$(job_state "$j")" = PENDING ] \
            && run_in_ctl scontrol update jobid="$j" starttime=now+2 > /dev/null 2>&1; then
            return 0
        fi
        if [ "$(now_ms)" -ge "$deadline" ]; then
            diag "job $j could not be released (state '$(job_state "$j")')"
            return 1
        fi
        sleep 0.2
    done
}

wait_job_restarts() {
    local j=$1 n=$2 deadline
    deadline=$(($(now_ms) + $3 * 1000))
    until run_in_ctl scontrol -o show job "$j" 2> /dev/null | grep -q " Restarts=$n "; do
        if [ "$(now_ms)" -ge "$deadline" ]; then
            diag "job $j: not $n restarts after $3 s:" \
                "$(run_in_ctl scontrol -o show job "$j" 2>&1 | grep -o 'JobState=[^ ]*\|Restarts=[^ ]*\|Reason=[^ ]*')"
            return 1
        fi
        sleep 0.2
    done
}

task_pids() {
    local node=$1 pattern=$2 kv=${3:-} p
    for p in $("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" "$node"); do
        tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null | grep -Eq -e "$pattern" || continue
        [ -z "$kv" ] || grep -qzxF -e "$kv" "/proc/$p/environ" 2> /dev/null || continue
        echo "$p"
    done
}

# The nodes are network namespaces on this machine: they share its file
# system (the MPI installation, the build, snapshot directories), not its
# network, so ranks on different nodes talk TCP over the cluster's bridge.
slurm_mpi_env() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1
    export OMPI_MCA_btl=self,tcp OMPI_MCA_pml=ob1
    if [ -n "${MPIRUN:-}" ]; then
        PATH=$(dirname "$MPIRUN"):$PATH
        export PATH
    fi
}

slurm_has_pmix() { run_in_ctl srun --mpi=list 2>&1 | grep -q 'pmix'; }
