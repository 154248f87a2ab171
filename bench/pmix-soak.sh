#!/bin/bash
# pmix-soak.sh - the long soak of tests/t5004-pmix-soak.sh (issue 18)
#
#   bench/pmix-soak.sh [--build DIR] [--runs N] [--cores DIR]
#
# Runs t5004 (4 ranks of ft_app in loop mode under pmix-launch, one random
# rank SIGKILLed at a random moment, from outside or by itself) N times
# (default 1000) through `make check`, so it gets the test suite's
# environment; make check runs the bounded version (20 runs).  A hung run
# is reported in DIR/tests/t5004-pmix-soak.sh.log with every rank's
# backtrace; with --cores, DIR/soakI/ also keeps a core of every rank
# (gcore) and the run's directory, to read the hang's state with gdb.
# Exit status: the test's (0 when every run recovered).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build
runs=1000
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --cores) mkdir -p "$2" && PL_CORE_DIR=$(cd "$2" && pwd) && export PL_CORE_DIR || exit 2; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "pmix-soak.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$runs" in
    '' | *[!0-9]* | 0) echo "pmix-soak.sh: --runs takes a positive integer, not '$runs'" >&2; exit 2 ;;
esac
[ -f "$build/tests/Makefile" ] || {
    echo "pmix-soak.sh: no configured build in '$build' (scripts/test.sh makes one in ./build)" >&2
    exit 2
}
rc=0
# the test suite's per-test limit (900 s) would end a long soak: a run
# takes 1-3 s, a hung one up to 90 s and its backtraces
PMIX_SOAK_RUNS=$runs ELASTIC_TEST_TIMEOUT=$((runs * 10 + 600)) make -C "$build/tests" check TESTS=t5004-pmix-soak.sh > /dev/null || rc=$?
grep -E '^# [0-9]+/[0-9]+ runs recovered|^not ok' "$build/tests/t5004-pmix-soak.sh.log"
exit $rc
