#!/usr/bin/env bash
# tsan-check.sh - elastic-exec under ThreadSanitizer through its tests
#
#   scripts/tsan-check.sh [TESTS]   (default: every t2*.sh and t5010-t5015)
#
# Configures a build in ./build-tsan (the normal build's configure
# arguments), builds everything as usual and then src/exec again with
# -fsanitize=thread (the agent and PMIx's threads share its state; the
# ranks and libelastic are ordinary builds), runs the tests with
# TSAN_OPTIONS pointing at tests/tsan.supp (every entry explained there),
# and prints the number of reports.  The test programs link the runtime
# too (LDFLAGS): those that link libmesh.la get its instrumented objects.
# Exit status: 0 when the tests passed and ThreadSanitizer reported nothing
# that the suppressions do not explain.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build-tsan
reports=$build/tsan-reports
mkdir -p "$build" && cd "$build" || exit 1
if [ ! -f config.status ]; then
    "$top/configure" ${ELASTIC_CONFIGURE_ARGS:-} > configure.out 2>&1 || {
        tail -n 30 configure.out
        exit 1
    }
fi
make -j"$(nproc)" > make.out 2>&1 || {
    tail -n 30 make.out
    exit 1
}
# src/exec again, with ThreadSanitizer
make -C src/exec clean > /dev/null
make -C src/exec -j"$(nproc)" CFLAGS="-g -O1 -fsanitize=thread" LDFLAGS="-fsanitize=thread" \
    > make-tsan.out 2>&1 || {
    tail -n 30 make-tsan.out
    exit 1
}
tests=${1:-$(cd "$top/tests" && ls t2*.sh t501[0-5]-*.sh | tr '\n' ' ')}
rm -rf "$reports" && mkdir -p "$reports"
rc=0
TSAN_OPTIONS="suppressions=$top/tests/tsan.supp halt_on_error=0 history_size=7 log_path=$reports/report second_deadlock_stack=1" \
    make -C tests check TESTS="$tests" LDFLAGS="-fsanitize=thread" > check.out 2>&1 || rc=$?
n=$(cat "$reports"/report.* 2> /dev/null | grep -c 'WARNING: ThreadSanitizer' || true)
sed -n 's/^# \(TOTAL\|PASS\|FAIL\|ERROR\|SKIP\):/tsan-check: \1:/p' tests/test-suite.log
echo "tsan-check: $n ThreadSanitizer report(s) not explained by tests/tsan.supp (in $reports)"
[ "$rc" -eq 0 ] && [ "$n" -eq 0 ]
