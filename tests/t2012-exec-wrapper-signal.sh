#!/bin/bash
# t2012-exec-wrapper-signal.sh - wrapper mode: when the worker dies by a
# signal, elastic-exec dies by the same signal (after its report and event
# log), so that the launcher sees a death by signal.
#
# Under `mpirun --with-ft ulfm -n 4 elastic-exec ./app` PRRTE tells the other
# ranks only about a process that died by a signal: had elastic-exec exited
# 128+9, the ULFM survivors would wait forever.  Here a rank's worker is
# SIGKILLed from outside and the survivors must shrink and finish; heat2d
# under the same wrappers must end with its failure-free checksum.  Without
# mpirun: the re-raise leaves no core file, and agent mode still exits 128+N.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; kill_marked; rm -rf "$tmp"' EXIT
EXEC_ABS=$(cd "$(dirname "$EXEC")" && pwd)/$(basename "$EXEC")
WORKER_ABS=$(cd "$(dirname "$WORKER")" && pwd)/$(basename "$WORKER")

# status CMD...: how CMD ended, as Python sees it ("exit N" or "signal N"),
# run with core dumps allowed
status() {
    "$PY" - "$@" << 'PYEOF'
import resource, subprocess, sys
def allow_core():
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    preexec_fn=allow_core).returncode
print("signal %d" % -rc if rc < 0 else "exit %d" % rc)
PYEOF
}

# 1. without a launcher: the re-raise itself (the worker dumps no core, so
# a core file here would be elastic-exec's)
mkdir -p "$tmp/core" && cd "$tmp/core" || exit 1
is "$(status env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 ELASTIC_EVENT_LOG="$tmp/ev1" \
    ELASTIC_TEST_MARK=$test_mark "$EXEC_ABS" sh -c "ulimit -c 0; exec $WORKER_ABS crash:0:0:segv")" \
    "signal 11" "wrapper mode: the worker's SIGSEGV kills elastic-exec with SIGSEGV"
is "$(ls -A "$tmp/core")" "" "no core file from the re-raise"
is "$(ev_get "$tmp/ev1" shutdown state)/$(ev_get "$tmp/ev1" worker_exit signal)" "FAILED/SIGSEGV" \
    "the event log was written first"
is "$(status env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 ELASTIC_TEST_MARK=$test_mark \
    "$EXEC_ABS" "$WORKER_ABS" crash:0:0:exit=7)" "exit 7" \
    "wrapper mode: a worker's exit code is still an exit code"
is "$(status env ELASTIC_TEST_MARK=$test_mark "$EXEC_ABS" --nproc-per-node 1 "$WORKER_ABS" crash:0:0:segv)" \
    "exit 139" "agent mode: 128+11, no re-raise"
cd - > /dev/null || exit 1

[ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || {
    done_testing
    exit 0
}
mpi_have_ulfm || {
    skip "no ULFM: survivors cannot recover"
    done_testing
    exit 0
}

# 2. mpirun --with-ft ulfm -n 4 elastic-exec ft_app: rank 2's worker killed
FT_APP_ABS=$(cd pmix 2> /dev/null && pwd)/ft_app
if [ -x "$FT_APP_ABS" ]; then
    d=$tmp/ft
    mkdir -p "$d"
    mpi_start "$d/out" 4 -x ELASTIC_TEST_MARK=$test_mark -- "$EXEC_ABS" --event-log "$d/ev" "$FT_APP_ABS" -v 2
    # the worker prints its own pid (its elastic-exec has the same rank variables)
    pid=
    wait_for_grep 'ready 1 2 ' "$d/out" 120 && pid=$(sed -n 's/.*ready 1 2 \([0-9]*\).*/\1/p' "$d/out")
    ok $([ -n "$pid" ] && kill -KILL "$pid"; echo $?) "rank 2's worker (pid $pid) was SIGKILLed"
    mpi_wait 120
    ok $([ "$MPI_RC" != 124 ]; echo $?) "mpirun ended on its own (exit $MPI_RC), no hang"
    grep -q 'ft-app: ok size 4 -> 3' "$d/out"
    ok $? "the three survivors were told, shrank and checked their sum" || diag "$(tail -n 30 "$d/out")"
    is "$(ev_count "$d/ev" worker_exit rank=2 signal=SIGKILL state=FAILED)" 1 "rank 2's elastic-exec logged the death"
else
    skip "pmix/ft_app is not built"
    skip "pmix/ft_app is not built"
    skip "pmix/ft_app is not built"
    skip "pmix/ft_app is not built"
fi

# 3. heat2d under the wrappers: rank 1 kills itself; the failure-free checksum
HEAT2D_ABS=$(cd "${top_builddir:-..}/examples" 2> /dev/null && pwd)/heat2d
if [ -x "$HEAT2D_ABS" ]; then
    d=$tmp/heat
    mkdir -p "$d"
    mpi_run "$d/ref" 4 "$HEAT2D_ABS" --nx 64 --ny 64 --steps 60
    ref=$(tr -d '\0' < "$d/ref" | sed -n 's/.*checksum \([0-9a-f]*\)$/\1/p')
    is "$MPI_RC" 0 "heat2d, no failure: exit 0 (checksum $ref)"
    mpi_start "$d/out" 4 -x ELASTIC_TEST_MARK=$test_mark -- "$EXEC_ABS" --event-log "$d/ev" \
        "$HEAT2D_ABS" --nx 64 --ny 64 --steps 60 --fail 1:20
    mpi_wait 120
    ok $([ "$MPI_RC" != 124 ]; echo $?) "heat2d, rank 1 killed: mpirun ended on its own (exit $MPI_RC)"
    is "$(tr -d '\0' < "$d/out" | sed -n 's/.*checksum \([0-9a-f]*\)$/\1/p')" "$ref" \
        "heat2d, rank 1 killed: the survivors ended with the failure-free checksum" || diag "$(tail -n 30 "$d/out")"
    is "$(ev_count "$d/ev" worker_exit rank=1 signal=SIGKILL)" 1 "heat2d: rank 1's elastic-exec logged the death"
else
    skip "heat2d is not built"
    skip "heat2d is not built"
    skip "heat2d is not built"
    skip "heat2d is not built"
fi
wait_no_marked 30
ok $? "no process is left"
done_testing
