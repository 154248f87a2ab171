#!/bin/bash
# t2011-exec-mpirun.sh - wrapper mode: `mpirun -n 4 elastic-exec ./app`.
# Each task supervises one worker whose rank is the task's; rank 2 crashes
# on its first attempt and is restarted by its own elastic-exec while the
# others keep running, and mpirun succeeds.  A rank that keeps failing makes
# the job fail with its exit code.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/exec/lib.sh"

[ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || skip_all "no mpirun"
tmp=$(mktemp -d)
trap 'mpi_kill_job; kill_marked; rm -rf "$tmp"' EXIT
EXEC_ABS=$(cd "$(dirname "$EXEC")" && pwd)/$(basename "$EXEC")
WORKER_ABS=$(cd "$(dirname "$WORKER")" && pwd)/$(basename "$WORKER")

d=$tmp/ok
mkdir -p "$d"
mpi_start "$d/out" 4 -x ELASTIC_TEST_MARK=$test_mark -- "$EXEC_ABS" --max-restarts 1 --event-log "$d/ev" \
    "$WORKER_ABS" "env:$d" "ready:$d" "crash:2:0:segv" "waitfor:$d/ready.2.1"
mpi_wait 120
is "$MPI_RC" 0 "mpirun -n 4 elastic-exec: rank 2's segfault was absorbed" || diag "$(tail -n 30 "$d/out")"
for r in 0 1 2 3; do
    f=$d/env.$r.0
    got=$(for v in RANK OMPI_COMM_WORLD_RANK WORLD_SIZE LOCAL_RANK OMPI_COMM_WORLD_LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE; do
        sed -n "s/^$v=//p" "$f"
    done | tr '\n' ' ')
    is "$got" "$r $r 4 $r $r 4 $r 4 " "rank $r: RANK, LOCAL_RANK and sizes come from the launcher"
done
ok $([ -f "$d/env.2.1" ] && [ ! -f "$d/env.0.1" ] && [ ! -f "$d/env.3.1" ]; echo $?) \
    "only rank 2 was restarted (by its own elastic-exec)"
is "$(sed -n 's/^ELASTIC_RUN_ID=//p' "$d"/env.*.0 | sort -u | wc -l)" 1 "every rank shares one run id (the launcher's job)"
ok $(! grep -q '^MASTER_PORT=' "$d/env.0.0"; echo $?) "no MASTER_PORT unless one is given"
is "$(ev_count "$d/ev" agent_start)" 4 "four agents wrote to the shared event log"
is "$(ev_count "$d/ev" worker_exit rank=2 signal=SIGSEGV state=FAILED)" 1 "rank 2's segfault is in it"

d=$tmp/fail
mkdir -p "$d"
mpi_start "$d/out" 3 -x ELASTIC_TEST_MARK=$test_mark -- "$EXEC_ABS" --max-restarts 1 \
    "$WORKER_ABS" "crash:1:*:exit=7" "sleep:0.5"
mpi_wait 120
ok $([ "$MPI_RC" -ne 0 ] && [ "$MPI_RC" -ne 124 ]; echo $?) "a rank that fails every attempt fails the job (mpirun exit $MPI_RC)"
grep -q "exitcode  : 7" "$d/out"
ok $? "its elastic-exec reported exit code 7" || diag "$(tail -n 30 "$d/out")"
wait_no_marked 30
ok $? "no process is left"
done_testing
