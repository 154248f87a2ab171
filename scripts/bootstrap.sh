#!/usr/bin/env bash
# bootstrap.sh - install what elastic needs to build and test, idempotently.
#
#   scripts/bootstrap.sh            Debian packages + Open MPI 5 with ULFM
#   scripts/bootstrap.sh --print-prefix
#                                   print the Open MPI prefix and exit
#
# Open MPI 5.0.7 is built from Debian's own (trixie) source package, with a
# private apt configuration (the system's sources are never edited), into
#   ${ELASTIC_DEPS_DIR:-/opt/elastic-deps}/openmpi-5.0.7-ulfm
# A second run does nothing if that prefix exists and passes a ULFM smoke test
# (a rank is SIGKILLed, the survivors see MPIX_ERR_PROC_FAILED and shrink).
set -euo pipefail

OMPI_VERSION=5.0.7
DEPS_DIR=${ELASTIC_DEPS_DIR:-/opt/elastic-deps}
PREFIX=$DEPS_DIR/openmpi-$OMPI_VERSION-ulfm
WORK=$DEPS_DIR/work
LOGDIR=$DEPS_DIR/logs
# our fixes to the bundled sources (each patch says what and why); the
# build's stamp names them, so a changed set rebuilds
PATCH_DIR=$(cd "$(dirname "$0")" && pwd)/patches
PATCHES=("$PATCH_DIR"/openmpi-"$OMPI_VERSION"-*.patch)
BUILD_ID="$OMPI_VERSION $(cat "${PATCHES[@]}" | sha256sum | cut -c1-16)"

if [ "${1:-}" = "--print-prefix" ]; then
    echo "$PREFIX"
    exit 0
fi

T0=$(date +%s)
elapsed() { echo $(($(date +%s) - T0)); }
say() { printf '[bootstrap %4ss] %s\n' "$(elapsed)" "$*"; }
die() {
    say "ERROR: $*" >&2
    exit 1
}

# run_step NAME LOG CMD...: run a long step, log to LOG, show its duration,
# and on failure print the log's tail.
run_step() {
    local name=$1 log=$2
    shift 2
    local t=$(date +%s)
    say "$name (log: $log)"
    if ! "$@" > "$log" 2>&1; then
        say "ERROR: $name failed after $(($(date +%s) - t)) s; last lines of $log:" >&2
        tail -n 40 "$log" >&2
        exit 1
    fi
    say "$name done in $(($(date +%s) - t)) s"
}

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

PACKAGES=(
    build-essential autoconf automake libtool pkg-config patch
    xz-utils ca-certificates
    hwloc libhwloc-dev libevent-dev
    libpmix-dev
    libhdf5-openmpi-dev hdf5-tools
    openmpi-bin libopenmpi-dev
    libjansson-dev libmicrohttpd-dev zlib1g-dev libdeflate-dev libxxhash-dev libsodium-dev libmunge-dev
    python3 python3-dev python3-h5py python3-numpy python3-mpi4py python3-torch python3-prometheus-client
    procps psmisc iproute2 curl
    slurmctld slurmd slurm-client munge libslurm-dev
    gnuplot-nox hyperfine
    clang-14 libclang-rt-14-dev
)

install_packages() {
    local missing=()
    local p
    for p in "${PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        say "Debian packages: all ${#PACKAGES[@]} already installed"
        return
    fi
    say "Debian packages missing: ${missing[*]}"
    mkdir -p "$LOGDIR"
    # Try with the current package lists first; update them once if that fails.
    local install=(env DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}")
    if ! "${install[@]}" > "$LOGDIR/apt-install.log" 2>&1; then
        run_step "apt-get update" "$LOGDIR/apt-update.log" $SUDO apt-get update
        run_step "apt-get install (${#missing[@]} packages)" "$LOGDIR/apt-install.log" "${install[@]}"
    else
        say "installed ${#missing[@]} packages"
    fi
}

# The ULFM smoke test: 4 ranks, rank 2 SIGKILLs itself, the others must see
# MPIX_ERR_PROC_FAILED (or REVOKED), shrink to 3 and allreduce.
SMOKE_SRC='
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main (int argc, char **argv)
{
    int rank, size, rc, ec, n = 0, sum = 0;
    MPI_Comm shrunk;
    MPI_Init (&argc, &argv);
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    MPI_Comm_size (MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler (MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier (MPI_COMM_WORLD);
    if (rank == 2)
        raise (SIGKILL);
    rc = MPI_Barrier (MPI_COMM_WORLD);
    MPI_Error_class (rc, &ec);
    if (ec != MPIX_ERR_PROC_FAILED && ec != MPIX_ERR_REVOKED) {
        printf ("rank %d: expected MPIX_ERR_PROC_FAILED, got class %d\n", rank, ec);
        return 1;
    }
    MPIX_Comm_revoke (MPI_COMM_WORLD);
    if (MPIX_Comm_shrink (MPI_COMM_WORLD, &shrunk) != MPI_SUCCESS)
        return 1;
    MPI_Comm_size (shrunk, &n);
    MPI_Allreduce (&rank, &sum, 1, MPI_INT, MPI_SUM, shrunk);
    if (rank == 0)
        printf ("ulfm-smoke: ok, shrunk %d -> %d, sum %d\n", size, n, sum);
    MPI_Comm_free (&shrunk);
    MPI_Finalize ();
    return (n == size - 1 && sum == 0 + 1 + 3) ? 0 : 1;
}
'

ulfm_smoke() {
    local d
    d=$(mktemp -d)
    printf '%s' "$SMOKE_SRC" > "$d/smoke.c"
    "$PREFIX/bin/mpicc" -o "$d/smoke" "$d/smoke.c" || {
        rm -rf "$d"
        return 1
    }
    local out rc=0
    out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout 30 "$PREFIX/bin/mpirun" --with-ft ulfm -n 4 --oversubscribe \
        --mca pml ob1 --mca btl self,sm,tcp --mca coll ^han --mca async_mpi_finalize 1 "$d/smoke" 2>&1) || rc=$?
    rm -rf "$d"
    echo "$out" | grep -q 'ulfm-smoke: ok' || {
        echo "$out"
        return 1
    }
    # mpirun reports the killed rank with a non-zero status; that is expected.
    echo "$out" | grep 'ulfm-smoke'
    return 0
}

build_openmpi() {
    mkdir -p "$WORK" "$LOGDIR"
    local aptdir=$WORK/apt
    mkdir -p "$aptdir/lists/partial" "$aptdir/cache"
    echo "deb-src http://deb.debian.org/debian trixie main" > "$aptdir/sources.list"
    local aptopts=(-o "Dir::Etc::SourceList=$aptdir/sources.list"
        -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::State::Lists=$aptdir/lists"
        -o "Dir::Cache=$aptdir/cache")
    local tarball
    tarball=$(ls "$WORK"/openmpi_"$OMPI_VERSION"*.orig.tar.* 2> /dev/null | head -1 || true)
    if [ -z "$tarball" ]; then
        run_step "apt-get update (private deb-src list for trixie)" "$LOGDIR/apt-src-update.log" \
            apt-get "${aptopts[@]}" update
        (cd "$WORK" && run_step "apt-get source --download-only openmpi" "$LOGDIR/apt-source.log" \
            apt-get "${aptopts[@]}" source --download-only openmpi)
        tarball=$(ls "$WORK"/openmpi_"$OMPI_VERSION"*.orig.tar.* 2> /dev/null | head -1 || true)
        [ -n "$tarball" ] || die "the trixie source package does not have Open MPI $OMPI_VERSION (see $LOGDIR/apt-source.log)"
    else
        say "source tarball cached: $tarball"
    fi
    local src=$WORK/openmpi-$OMPI_VERSION
    rm -rf "$src"
    run_step "unpack $(basename "$tarball")" "$LOGDIR/unpack.log" tar -C "$WORK" -xf "$tarball"
    [ -d "$src" ] || die "unpacking $tarball did not create $src"
    local p
    for p in "${PATCHES[@]}"; do
        (cd "$src" && run_step "apply $(basename "$p")" "$LOGDIR/patch-$(basename "$p" .patch).log" \
            patch -p1 --forward --batch -i "$p")
    done
    rm -rf "$PREFIX"
    (cd "$src" && run_step "configure Open MPI $OMPI_VERSION (ULFM)" "$LOGDIR/ompi-configure.log" \
        ./configure --prefix="$PREFIX" --with-ft=ulfm \
        --with-pmix=internal --with-prrte=internal \
        --with-hwloc=external --with-libevent=external \
        --disable-mpi-fortran --disable-oshmem --disable-mpi-java \
        --enable-mca-no-build=btl-uct,pml-ucx,osc-ucx \
        --disable-dependency-tracking)
    (cd "$src" && run_step "make -j$(nproc) (about 10 minutes on 2 cores)" "$LOGDIR/ompi-make.log" \
        make -j"$(nproc)")
    (cd "$src" && run_step "make install into $PREFIX" "$LOGDIR/ompi-install.log" make install)
    rm -rf "$src"
    echo "$BUILD_ID" > "$PREFIX/.elastic-bootstrap-version"
}

main() {
    say "elastic bootstrap: packages, then Open MPI $OMPI_VERSION with ULFM in $PREFIX"
    install_packages
    if [ -x "$PREFIX/bin/mpicc" ] && [ "$(cat "$PREFIX/.elastic-bootstrap-version" 2> /dev/null)" = "$BUILD_ID" ]; then
        say "Open MPI $OMPI_VERSION found in $PREFIX; running the ULFM smoke test"
        if ulfm_smoke; then
            say "ULFM smoke test passed; nothing to build"
            say "done in $(elapsed) s"
            return 0
        fi
        say "ULFM smoke test failed on the cached build; rebuilding"
    elif [ -x "$PREFIX/bin/mpicc" ]; then
        say "the build in $PREFIX is not of this source and patch set ($BUILD_ID); rebuilding"
    fi
    build_openmpi
    say "running the ULFM smoke test on the new build"
    ulfm_smoke || die "the ULFM smoke test failed on the new Open MPI build"
    say "done in $(elapsed) s"
}

main "$@"
