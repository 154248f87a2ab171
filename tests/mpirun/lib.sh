# lib.sh - shared set-up of elastic-mpirun's shell tests (source it)
#
#   EM            the elastic-mpirun under test
#   LOOPAPP       the scriptable MPI test program (tests/mpirun/loopapp.c)
#   EM_MPI_ARGS   mpirun options suited to 2 loaded cores
#   tmp           a scratch directory, removed at exit
#   em_run OUT TIMEOUT ARGS...    run elastic-mpirun; sets EM_RC
#   em_start OUT ARGS...          start it in the background; sets em_pid
#   em_wait TIMEOUT               wait for it; sets EM_RC (124: killed)
#   checksum_of FILE              the "done ... checksum=C" of a loopapp run

. "${srcdir:-.}/lib/tap.sh"

EM=$(cd "${top_builddir:-..}/src/mpirun" && pwd)/elastic-mpirun
LOOPAPP=$(pwd)/mpirun/loopapp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1
# the sm/tcp transports only (no probing of absent networks)
EM_MPI_ARGS="--mca btl self,sm,tcp"
unset ELASTIC_RESUME ELASTIC_EVENT_LOG ELASTIC_RUN_DIR ELASTIC_MPIRUN SLURM_JOB_ID SLURM_JOB_NODELIST SLURM_NODELIST

tmp=$(mktemp -d)
# elastic-mpirun caches its probe of the MPI: keep it in the test's directory
export XDG_CACHE_HOME=$tmp/cache
em_pid=
em_cleanup() {
    if [ -n "$em_pid" ] && kill -0 "$em_pid" 2> /dev/null; then
        pkill -KILL -P "$em_pid" 2> /dev/null
        kill -KILL "$em_pid" 2> /dev/null
    fi
    rm -rf "$tmp"
}
trap em_cleanup EXIT

em_run() {
    local out=$1 t=$2
    shift 2
    EM_RC=0
    timeout --kill-after=10 "$t" "$EM" "$@" > "$out" 2>&1 || EM_RC=$?
}

em_start() {
    local out=$1
    shift
    "$EM" "$@" > "$out" 2>&1 &
    em_pid=$!
}

em_wait() {
    if ! wait_for_exit "$em_pid" "$1"; then
        diag "elastic-mpirun (pid $em_pid) still running after $1 s; killing it"
        pkill -KILL -P "$em_pid" 2> /dev/null
        kill -KILL "$em_pid" 2> /dev/null
        wait "$em_pid" 2> /dev/null
        EM_RC=124
        return 1
    fi
    EM_RC=0
    wait "$em_pid" || EM_RC=$?
    em_pid=
}

checksum_of() { sed -n 's/^done steps=[0-9]* checksum=\([0-9]*\) .*/\1/p' "$1" | tail -n 1; }
