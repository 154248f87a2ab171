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
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
SOAK_CORES=1 soak_args 1000 "$@"
build=$SOAK_BUILD runs=$SOAK_RUNS
rc=0
# the test suite's per-test limit (900 s) would end a long soak: a run
# takes 1-3 s, a hung one up to 90 s and its backtraces
PMIX_SOAK_RUNS=$runs ELASTIC_TEST_TIMEOUT=$((runs * 10 + 600)) make -C "$build/tests" check TESTS=t5004-pmix-soak.sh > /dev/null || rc=$?
grep -E '^# [0-9]+/[0-9]+ runs recovered|^not ok' "$build/tests/t5004-pmix-soak.sh.log"
exit $rc
