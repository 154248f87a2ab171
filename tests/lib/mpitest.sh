# mpitest.sh - multi-process MPI tests under mpirun --with-ft ulfm (source it)
#
# Needs MPIRUN (set by `make check`).  Defaults suit 2 cores: oversubscribed,
# the fault-tolerant ob1 PML, no HAN collectives (an MPIX_Comm_agree
# deadlock), Open MPI's run-as-root variables.  Each job gets an id that is
# exported to its ranks, so a rank's PID is found from /proc without help
# from the program.
#
#   (MPI_NO_FT=1: start without --with-ft ulfm, for the ULFM-off tests)
#   mpi_start OUT N [mpirun args --] PROG ARGS...   start a job in the background
#   mpi_wait TIMEOUT                               wait for it; sets MPI_RC
#   mpi_run OUT N [mpirun args --] PROG ARGS...    start and wait (300 s)
#   mpi_rank_pid RANK                              PID of a rank of the job
#   kill_rank RANK [SIGNAL]                        send a real signal (default KILL)
#   kill_rank_at RANK PATTERN TIMEOUT [SIGNAL]     ... once PATTERN is in OUT
#   rank_output RANK                               that rank's lines of OUT

. "${srcdir:-.}/lib/tap.sh"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# async_mpi_finalize: Open MPI 5.0.7's MPI_Finalize starts with a PMIx fence
# that, after a rank died, hangs in about one run in three under mpirun
# (measured here: 4/12 hung without it, 0/12 with it).  Ranks that need their
# messages flushed agree/barrier before finalizing (libelastic does).
# Keep Open MPI from using the (shared) home directory or a GPU stack.
export OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1

MPI_DEFAULT_ARGS=${ELASTIC_TEST_MPIRUN_ARGS:---oversubscribe --bind-to none --mca pml ob1 --mca btl self,sm,tcp --mca coll ^han --mca async_mpi_finalize 1}

mpi_job_id=
mpi_pid=
mpi_out=
mpi_shm=
MPI_RC=

# Each job's Open MPI shared-memory segments in a directory of its own:
# their names hold a 16-bit hash of mpirun's namespace (prterun-HOST-PID)
# and a node rank only, so two concurrent jobs whose hashes collide share
# segments.  In a CI run two tests' jobs did (mpirun pids 5375 and 5452:
# one crashed in mca_btl_sm_poll_handle_frag, the other's MPI_Init found
# its segment gone).
mpi_shm_new() {
    mpi_shm_done
    mpi_shm=$(mktemp -d /dev/shm/elastic-test.XXXXXX 2> /dev/null) || mpi_shm=
}
mpi_shm_done() {
    [ -n "$mpi_shm" ] && rm -rf "$mpi_shm"
    mpi_shm=
}

# mpi_have_ulfm: true if this build found ULFM
mpi_have_ulfm() { [ "${HAVE_ULFM:-no}" = yes ]; }

mpi_start() {
    mpi_out=$1
    local n=$2 extra=()
    shift 2
    if printf '%s\n' "$@" | grep -qx -- '--'; then
        while [ "$1" != "--" ]; do
            extra+=("$1")
            shift
        done
        shift
    fi
    mpi_job_id="elastic-test-$$-$RANDOM"
    local ft=() sm=()
    mpi_shm_new
    [ -n "$mpi_shm" ] && sm=(--mca btl_sm_backing_directory "$mpi_shm")
    # MPI_NO_FT=1: start the job without fault tolerance even with ULFM
    mpi_have_ulfm && [ -z "${MPI_NO_FT:-}" ] && ft=(--with-ft ulfm)
    # shellcheck disable=SC2086
    ELASTIC_TEST_JOB=$mpi_job_id "$MPIRUN" "${ft[@]}" -n "$n" $MPI_DEFAULT_ARGS \
        "${sm[@]}" -x ELASTIC_TEST_JOB --output tag "${extra[@]}" "$@" > "$mpi_out" 2>&1 &
    mpi_pid=$!
}

mpi_wait() {
    local timeout=${1:-300}
    if ! wait_for_exit "$mpi_pid" "$timeout"; then
        diag "mpirun (pid $mpi_pid) still running after $timeout s; killing the job"
        mpi_kill_job
        wait "$mpi_pid" 2> /dev/null
        MPI_RC=124
        mpi_shm_done
        return 124
    fi
    wait "$mpi_pid"
    MPI_RC=$?
    mpi_shm_done
    return 0
}

mpi_run() {
    mpi_start "$@"
    mpi_wait 300
}

# mpi_job_pids: the PIDs of every process carrying this job's id
mpi_job_pids() {
    local f
    for f in /proc/[0-9]*/environ; do
        { tr '\0' '\n' < "$f"; } 2> /dev/null | grep -qx "ELASTIC_TEST_JOB=$mpi_job_id" &&
            basename "$(dirname "$f")"
    done
}

mpi_rank_pid() {
    local p
    for p in $(mpi_job_pids); do
        if { tr '\0' '\n' < "/proc/$p/environ"; } 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

kill_rank() {
    local pid
    pid=$(mpi_rank_pid "$1") || {
        diag "kill_rank: no process for rank $1 of job $mpi_job_id"
        return 1
    }
    kill -s "${2:-KILL}" "$pid"
}

kill_rank_at() {
    wait_for_grep "$2" "$mpi_out" "$3" || {
        diag "kill_rank_at: '$2' did not appear in $mpi_out within $3 s"
        return 1
    }
    kill_rank "$1" "${4:-KILL}"
}

# mpi_kill_job: SIGKILL mpirun and every rank of the job (test teardown)
mpi_kill_job() {
    [ -n "$mpi_pid" ] && kill -KILL "$mpi_pid" 2> /dev/null
    local p
    for p in $(mpi_job_pids); do kill -KILL "$p" 2> /dev/null; done
    mpi_shm_done
    return 0
}

rank_output() { sed -n "s/^\[[0-9]*,$1\]<std[a-z]*>: //p" "$mpi_out"; }
