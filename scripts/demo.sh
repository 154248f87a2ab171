#!/usr/bin/env bash
# demo.sh - the README's demo command: a real MPI job that loses a rank and
# keeps going.
#
# Installs what is missing (scripts/bootstrap.sh), builds, then runs the ULFM
# smoke demo: 4 ranks under Open MPI 5's `mpirun --with-ft ulfm`, one rank
# SIGKILLed from outside while the others wait in MPI_Barrier; the survivors
# get MPIX_ERR_PROC_FAILED, shrink the communicator and finish.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
T0=$(date +%s%3N)
say() { printf '[demo %6.2fs] %s\n' "$(echo "($(date +%s%3N) - $T0) / 1000" | bc -l)" "$*"; }

bash scripts/bootstrap.sh | sed 's/^/  /'
say "building (scripts/test.sh builds the same tree)"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then autoreconf -fi > /dev/null; fi
build=$top/build
[ -f config.status ] && build=$top
mkdir -p "$build"
(cd "$build" && { [ -f config.status ] || "$top/configure" > configure.out 2>&1; } && make -j"$(nproc)" > make.out 2>&1 &&
    make -C tests mpi/ulfm_smoke > /dev/null 2>&1) || {
    echo "build failed; see $build/configure.out and $build/make.out"
    exit 1
}
mpirun=$(sed -n "s/^MPIRUN = //p" "$build/tests/Makefile")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
say "starting 4 ranks: $mpirun --with-ft ulfm -n 4 tests/mpi/ulfm_smoke 2"
"$mpirun" --with-ft ulfm -n 4 --oversubscribe --mca pml ob1 --mca btl self,sm,tcp --mca coll ^han \
    --mca async_mpi_finalize 1 "$build/tests/mpi/ulfm_smoke" 2 > "$out" 2>&1 &
job=$!
for _ in $(seq 1 1200); do
    grep -q '^ready 2 ' "$out" && break
    sleep 0.05
done
victim=$(awk '/^ready 2 /{print $3}' "$out")
[ -n "$victim" ] || {
    cat "$out"
    echo "rank 2 never became ready"
    exit 1
}
say "all ranks ready; kill -9 rank 2 (pid $victim)"
kill -9 "$victim"
wait "$job" || true
sed -n 's/^/  /p' "$out" | grep -v '^  ready'
if grep -q 'ulfm-smoke: ok' "$out"; then
    say "RESULT: the 3 survivors detected the failure, shrank 4 -> 3 ranks and completed an allreduce"
else
    say "RESULT: recovery FAILED"
    exit 1
fi
