#!/usr/bin/env bash
# test.sh - the README's test command: bootstrap, build, make check.
#
#   scripts/test.sh [make check arguments, e.g. TESTS=t0002-ulfm-smoke.sh]
#
# Installs what is missing (scripts/bootstrap.sh, idempotent and cached),
# builds in ./build (or in place if the tree was configured in place), and
# runs the test suite.  ELASTIC_CONFIGURE_ARGS adds configure arguments.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
T0=$(date +%s)
say() { printf '[test %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }

bash scripts/bootstrap.sh
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ -n "$(find m4 -newer configure -name '*.m4' 2> /dev/null)" ]; then
    say "autoreconf"
    autoreconf -fi > /dev/null
fi
if [ -f config.status ]; then
    build=$top
else
    build=$top/build
    mkdir -p "$build"
fi
cd "$build"
if [ ! -f config.status ] || [ config.status -ot "$top/configure" ]; then
    say "configure (in $build)"
    # shellcheck disable=SC2086
    "$top/configure" ${ELASTIC_CONFIGURE_ARGS:-} > configure.out 2>&1 || {
        tail -n 30 configure.out
        exit 1
    }
    sed -n '/configuration summary/,$p' configure.out
fi
say "make"
make -j"$(nproc)" > make.out 2>&1 || {
    tail -n 40 make.out
    exit 1
}
say "make check"
rc=0
make -j"$(nproc)" check "$@" || rc=$?
say "make check finished (exit $rc); results in $build/tests/test-suite.log"
exit $rc
