#!/bin/bash
# t0003-configure-ulfm.sh - configure's ULFM detection, both ways:
# the bootstrap Open MPI 5 (ULFM: in-place mode) and Debian's Open MPI 4.1
# (no ULFM: relaunch-only mode).
. "${srcdir:-.}/lib/tap.sh"

top=$(cd "${srcdir:-.}/.." && pwd)
[ -x "$top/configure" ] || skip_all "no configure script in $top"
ulfm_mpicc=$(dirname "$MPIRUN")/mpicc
debian_mpicc=/usr/bin/mpicc.openmpi
[ -x "$debian_mpicc" ] || debian_mpicc=/usr/bin/mpicc

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A copy of the distributed configure inputs (the source tree may be configured
# in place, and then configure refuses to run for another build directory).
(cd "$top" && find . -path ./autom4te.cache -prune -o \
    \( -name configure -o -name '*.in' -o -path './build-aux/*' -o -path ./include/elastic.h \) -type f -print |
    grep -v '/_build/\|^./build/' | tar -cf - -T -) | tar -C "$tmp" -xf -

run_configure() {
    local dir=$tmp/build-$1 mpicc=$2
    mkdir -p "$dir"
    (cd "$dir" && "$tmp/configure" --with-mpi="$mpicc" --without-hdf5 --without-hwloc \
        --without-pmix --without-cuda --without-nccl --without-slurm \
        --without-jansson --without-microhttpd > configure.out 2>&1)
}

if [ "${HAVE_ULFM:-no}" = yes ]; then
    run_configure ulfm "$ulfm_mpicc"
    ok $? "configure with $ulfm_mpicc succeeds"
    grep -q 'ULFM (in-place) ...... yes' "$tmp/build-ulfm/configure.out"
    ok $? "ULFM found in the bootstrap Open MPI" || grep ULFM "$tmp/build-ulfm/configure.out" | sed 's/^/# /'
    grep -q '#define HAVE_ULFM 1' "$tmp/build-ulfm/config.h"
    ok $? "config.h defines HAVE_ULFM"
else
    skip "this build has no ULFM MPI"
    skip "this build has no ULFM MPI"
    skip "this build has no ULFM MPI"
fi

if [ -x "$debian_mpicc" ] && "$debian_mpicc" --showme:version 2>&1 | grep -q 'Open MPI 4'; then
    run_configure deb "$debian_mpicc"
    ok $? "configure with Debian's Open MPI 4.1 ($debian_mpicc) still succeeds"
    grep -q 'relaunch-only mode' "$tmp/build-deb/configure.out"
    ok $? "configure reports relaunch-only mode" || tail -n 25 "$tmp/build-deb/configure.out" | sed 's/^/# /'
    test -f "$tmp/build-deb/config.h" && ! grep -q '#define HAVE_ULFM 1' "$tmp/build-deb/config.h"
    ok $? "config.h exists and does not define HAVE_ULFM"
else
    skip "Debian's Open MPI 4.1 is not installed (apt-get install libopenmpi-dev)"
    skip "Debian's Open MPI 4.1 is not installed"
    skip "Debian's Open MPI 4.1 is not installed"
fi

bad=$tmp/build-bad
mkdir -p "$bad"
(cd "$bad" && "$tmp/configure" --with-mpi=/nonexistent/mpicc > configure.out 2>&1)
ok $((!$?)) "configure --with-mpi=/nonexistent/mpicc fails"
grep -q "no executable MPI compiler wrapper at '/nonexistent/mpicc'" "$bad/configure.out"
ok $? "and names the bad value and the bootstrap command" || tail -n 3 "$bad/configure.out" | sed 's/^/# /'
done_testing
