#!/bin/bash
# preempt-signals.sh - issue 18, defect 2: does a preemption end with exit 75
# however the SIGTERM is sent?  Runs tests/t7008-mpirun-preempt-signals.sh
# at the issue's size (heat2d on 8 ranks, 256 x 256, under elastic-exec):
# RUNS runs each of SIGTERM to elastic-mpirun alone, to its process group,
# and through timeout(1); each must exit 75 and leave its snapshot and no
# process behind; one run of each way is resumed to the failure-free
# checksum.  Prints the per-way counts and the TAP totals.
#
#   bench/preempt-signals.sh [--build DIR] [--runs N] [--np N] [--grid N]
#                            [--ways "alone group timeout"] [--keep DIR]
#
# Defaults: ./build, 10 runs of each way, 8 ranks, 256.  --keep: where to
# keep the output of runs whose mpirun exit code was lost.  The signal goes
# after step 2000 of 20000 (no sleep between steps).
set -u
build=build runs=10 np=8 grid=256 ways="alone group timeout" keep=
while [ $# -gt 0 ]; do
    case $1 in
        --build) build=${2:?--build needs a directory}; shift ;;
        --runs) runs=${2:?--runs needs a number}; shift ;;
        --np) np=${2:?--np needs a number}; shift ;;
        --grid) grid=${2:?--grid needs a number}; shift ;;
        --ways) ways=${2:?--ways needs a list}; shift ;;
        --keep) keep=${2:?--keep needs a directory}; shift ;;
        -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "preempt-signals.sh: '$1' is invalid (expected --build DIR, --runs N, --np N, --grid N, --ways LIST, --keep DIR)" >&2; exit 2 ;;
    esac
    shift
done
for v in "$runs" "$np" "$grid"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "preempt-signals.sh: '$v' is not a positive integer" >&2; exit 2; }
done
src=$(cd "$(dirname "$0")/.." && pwd)
tests=$(cd "$build/tests" 2> /dev/null && pwd) || { echo "preempt-signals.sh: $build/tests: no build tree (configure and make first)" >&2; exit 2; }
[ -x "$tests/../examples/heat2d" ] || { echo "preempt-signals.sh: $build/examples/heat2d is not built" >&2; exit 2; }
log=$(mktemp)
t0=$(date +%s)
(cd "$tests" && srcdir=$src/tests top_builddir=.. T7008_ROUNDS=$runs T7008_NP=$np T7008_NX=$grid \
    T7008_NY=$grid T7008_STEPS=20000 T7008_SLEEP=0 T7008_AT=2000 T7008_WAYS=$ways T7008_KEEP=$keep ELASTIC_TEST_TIMEOUT=$((runs * 3 * 120 + 600)) \
    "$src/tests/lib/run-test" "$src/tests/t7008-mpirun-preempt-signals.sh") > "$log" 2>&1
rc=$?
grep -a '^# SIGTERM\|^not ok\|^# .*mpirun exited' "$log"
echo "tests: $(grep -c '^ok' "$log") ok, $(grep -c '^not ok' "$log") not ok, in $(($(date +%s) - t0)) s (log: $log)"
exit $rc
