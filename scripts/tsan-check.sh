#!/usr/bin/env bash
# tsan-check.sh - elastic-exec under ThreadSanitizer through its tests
#
#   scripts/tsan-check.sh [TESTS]   (default: elastic-exec's tests, t2*,
#                                    t5010-t5018, and the mesh's, t5100-t5121)
#
# Configures a build in ./build-tsan (the normal build's configure
# arguments), builds everything as usual and then src/exec again with
# -fsanitize=thread (the agent, the mesh and PMIx's threads share its
# state; the ranks and libelastic are ordinary builds), and the test
# programs that link src/exec's libraries (the mesh's and the agent API's)
# the same way.  Every other program stays an ordinary build: an MPI rank
# linked with the ThreadSanitizer runtime crashes in Open MPI's PMIx client
# (pmix_gds_shmem2_fetch) before it does anything of ours.  Then it runs
# the tests with TSAN_OPTIONS pointing at tests/tsan.supp (every entry
# explained there) and prints the number of reports.
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
# src/exec may hold the instrumented objects of an earlier run
[ -f src/exec/Makefile ] && make -C src/exec clean > /dev/null
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
# the test programs that hold instrumented code, rebuilt the same way
tsan_progs="t2009-exec-api t5100-mesh-units t5112-rdzv-tcp mesh/mesh-member bench_mesh_scale"
grep -q '^#define HAVE_PMIX 1' config.h && tsan_progs="$tsan_progs pmix/mesh-pmix-node"
make -C tests clean > /dev/null
make -C tests -j"$(nproc)" $tsan_progs CFLAGS="-g -O1 -fsanitize=thread" \
    LDFLAGS="-fsanitize=thread" > make-tsan-tests.out 2>&1 || {
    tail -n 30 make-tsan-tests.out
    exit 1
}
tests=${1:-$(cd "$top/tests" && ls t2*.sh t501[0-8]-*.sh t510[1-9]-*.sh t511[3-9]-*.sh \
    t512[0-9]-*.sh | tr '\n' ' ')t2009-exec-api t5100-mesh-units t5112-rdzv-tcp}
rm -rf "$reports" && mkdir -p "$reports"
rc=0
# exitcode=0: the tests judge behaviour (a report would otherwise turn a
# program's exit status into 66), the reports are counted below
TSAN_OPTIONS="suppressions=$top/tests/tsan.supp halt_on_error=0 exitcode=0 history_size=7 log_path=$reports/report second_deadlock_stack=1" \
    make -C tests check TESTS="$tests" > check.out 2>&1 || rc=$?
# reports wholly inside libpmix are set aside by tsan-classify.py (entry 3
# of tests/tsan.supp says why they cannot be suppressed by name)
read -r n pmix <<< "$(python3 "$top/scripts/tsan-classify.py" /dev/null "$reports"/report.* 2> /dev/null || echo "? ?")"
sed -n 's/^# \(TOTAL\|PASS\|FAIL\|ERROR\|SKIP\):/tsan-check: \1:/p' tests/test-suite.log
echo "tsan-check: $n ThreadSanitizer report(s) not explained by tests/tsan.supp," \
    "$pmix inside libpmix alone (in $reports)"
[ "$rc" -eq 0 ] && [ "$n" = 0 ]
