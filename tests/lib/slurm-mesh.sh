# slurm-mesh.sh - what the mesh-mode tests on the emulated cluster share
# (t6020, t6021): sourced after lib/slurm.sh.
#
#   mesh_prelude NAME             skip unless elastic-exec has mesh mode and
#                                 heat2d is built; EXEC, HEAT, tmp (a fresh
#                                 /tmp/NAME.XXXXXX), ELASTIC_MESH_SECRET, MPI's
#                                 environment (the tcp BTL is the job's)
#   mesh_cluster_up N             an N-node cluster (4 CPUs each); exits the
#                                 test (done_testing) when it fails or is not
#                                 in netns mode (mesh mode needs an address
#                                 per node)
#   srun_fg NAME ARGS...          srun --no-kill ARGS to its end: output in
#                                 $tmp/NAME.out, exit status in $SRUN_RC
#   srun_bg NAME ARGS...          the same in the background; the status
#                                 appears in $tmp/NAME.rc
#   mesh_reference                ref: heat2d's failure-free checksum of
#                                 $HEAT_ARGS --steps $STEPS (exits the test
#                                 when heat2d does not run)
#   mesh_salloc NAME              an allocation of the 3 nodes, no shell
#                                 (salloc -N3 --no-shell): J, its steps
#                                 J.0, J.1, ...; cancelled at exit
#   show NAME [N]                 the last N lines of NAME's output (NULs out)
#   summaries NAME                the members' "elastic-exec: job ..." lines
#   kill_one_rank NODE            SIGKILL one heat2d process of NODE
#   no_heat_on NODE               true when NODE runs no heat2d
#   node_back NODE                NODE's slurmd again, resumed in Slurm
# The timeouts are generous (a loaded 2-core machine runs the whole cluster).
mesh_prelude() {
    slurm_require
    build=$(cd "${top_builddir:-..}" && pwd)
    EXEC=$build/src/exec/elastic-exec
    HEAT=$build/examples/heat2d
    [ -x "$EXEC" ] || skip_all "elastic-exec is not built ($EXEC)"
    [ -x "$HEAT" ] || skip_all "heat2d is not built: no MPI in this configuration ($HEAT)"
    "$EXEC" --help 2>&1 | grep -q -- '--node-timeout' ||
        skip_all "elastic-exec has no mesh mode in this build (libsodium, PMIx)"
    slurm_mpi_env
    unset OMPI_MCA_btl
    tmp=$(mktemp -d "/tmp/$1.XXXXXX")
    export ELASTIC_MESH_SECRET=$1.$$.$RANDOM
}

mesh_cluster_up() {
    local rc
    cluster_up "$1" --cpus 4
    rc=$?
    trap 'cluster_down > /dev/null; [ "$tap_failed" -eq 0 ] && [ -z "${ELASTIC_TEST_KEEP:-}" ] && rm -rf "$tmp"' EXIT
    ok $rc "$1-node cluster up (4 CPUs each)" || {
        done_testing
        exit 1
    }
    [ "$CLUSTER_MODE" = netns ] || {
        skip "mesh mode needs a distinct address per node (the cluster fell back to local mode: $CLUSTER_MODE)"
        done_testing
        exit 0
    }
}

mesh_reference() {
    ref=$("$HEAT" $HEAT_ARGS --steps $STEPS 2>&1 | sed -n 's/^checksum //p')
    [ -n "$ref" ] || {
        echo "not ok 1 - heat2d runs as a singleton"
        exit 1
    }
}

mesh_salloc() {
    run_in_ctl salloc -N3 --ntasks-per-node=2 --no-shell --job-name "$1" > "$tmp/salloc" 2>&1
    J=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' "$tmp/salloc")
    [ -n "$J" ]
    ok $? "salloc -N3 --no-shell: job ${J:-?}" || {
        diag "$(cat "$tmp/salloc")"
        done_testing
        exit 1
    }
    trap 'run_in_ctl scancel "$J" > /dev/null 2>&1; cluster_down > /dev/null; [ "$tap_failed" -eq 0 ] && [ -z "${ELASTIC_TEST_KEEP:-}" ] && rm -rf "$tmp"' EXIT
}

srun_fg() {
    local name=$1
    shift
    SRUN_RC=0
    timeout --kill-after=10 300 "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" srun --no-kill "$@" \
        > "$tmp/$name.out" 2>&1 || SRUN_RC=$?
}

srun_bg() {
    local name=$1
    shift
    (
        rc=0
        timeout --kill-after=10 300 "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" srun --no-kill "$@" \
            > "$tmp/$name.out" 2>&1 || rc=$?
        echo "$rc" > "$tmp/$name.rc"
    ) &
}

# ev_both NAME EVENT PATTERN: n1's and n2's members both logged EVENT
# matching PATTERN in $tmp/ev.NAME (the nodes share /tmp: one file)
ev_both() {
    local n
    for n in n1 n2; do
        grep "\"event\":\"$2\"" "$tmp/ev.$1" 2> /dev/null | grep "\"host\":\"$n\"" |
            grep -q "$3" || return 1
    done
}
show() { tr -d '\0' < "$tmp/$1.out" | tail -n "${2:-25}"; }
summaries() { grep -a '^elastic-exec: job slurm\.' "$tmp/$1.out"; }

kill_one_rank() {
    local p
    for p in $("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" "$1"); do
        if [ "$(cat "/proc/$p/comm" 2> /dev/null)" = heat2d ]; then
            kill -KILL "$p" && return 0
        fi
    done
    return 1
}

no_heat_on() {
    local p
    for p in $("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" "$1"); do
        [ "$(cat "/proc/$p/comm" 2> /dev/null)" = heat2d ] && return 1
    done
    return 0
}

node_back() {
    start_node "$1" > /dev/null 2>&1
    run_in_ctl scontrol update nodename="$1" state=resume > /dev/null 2>&1
    wait_node_state "$1" 'IDLE|MIXED' 90 > /dev/null
}
