#!/bin/bash
# gpu-bundle.sh - pack what bench/gpu-check.sh needs into one directory, to
# run it on a GPU machine that has neither this project's build nor its
# Debian packages (a cloud GPU node, a container with only the driver).
#
# usage: bench/gpu-bundle.sh [--build DIR] OUTDIR
#   --build DIR  the build tree configured with CUDA (default: ./build)
#   OUTDIR       created (or emptied): about 25 MiB
#
# OUTDIR holds:
#   ompi/     Open MPI (ULFM) as bootstrap.sh installed it, without its
#             documentation, man pages and headers
#   lib/      libelastic and every shared library the programs and Open MPI
#             need, less the C library's own (libc, libm, libpthread, libdl,
#             librt, ld.so), the C++ runtime (libstdc++, libgcc_s: the GPU
#             machine's are newer) and the driver's (libcuda, libnvidia-*);
#             libcudart, which libelastic loads on first use, is included;
#             libnccl (200 MiB) is not: run.sh finds the machine's own
#   build/    the programs gpu-check.sh runs (examples/heat2d,
#             examples/heat2d_cuda, tests/bench_gpu_snapshot_bw)
#   src/      bench/gpu-check.sh and the test helpers it sources
#   run.sh    installs ompi/ at the prefix it was built for when it is
#             missing there (as root), finds libnccl, and runs gpu-check.sh
#             with its arguments (--out DIR, --quick)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$top/build
while [ $# -gt 1 ]; do
    case $1 in
    --build) BUILD=$2; shift 2 ;;
    *) echo "gpu-bundle: unknown argument '$1' (usage: gpu-bundle.sh [--build DIR] OUTDIR)" >&2; exit 2 ;;
    esac
done
[ $# -eq 1 ] || { echo "gpu-bundle: usage: gpu-bundle.sh [--build DIR] OUTDIR" >&2; exit 2; }
OUTDIR=$1
BUILD=$(cd "$BUILD" && pwd)
PREFIX=$(bash "$top/scripts/bootstrap.sh" --print-prefix)
[ -x "$PREFIX/bin/mpirun" ] || { echo "gpu-bundle: no Open MPI in $PREFIX (run scripts/bootstrap.sh)" >&2; exit 1; }

# the real executable behind a libtool wrapper
real() {
    local f=$1 d b
    d=$(dirname "$f") b=$(basename "$f")
    if [ -x "$d/.libs/$b" ]; then echo "$d/.libs/$b"; elif [ -x "$d/.libs/lt-$b" ]; then echo "$d/.libs/lt-$b"; else echo "$f"; fi
}
progs=(examples/heat2d examples/heat2d_cuda tests/bench_gpu_snapshot_bw)
for p in "${progs[@]}"; do
    [ -x "$BUILD/$p" ] || { echo "gpu-bundle: $BUILD/$p is missing (configure found CUDA? make check TESTS= builds the test programs)" >&2; exit 1; }
done

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"/{lib,build/examples,build/tests,src/bench,src/tests/lib,src/tests/libelastic}
OUTDIR=$(cd "$OUTDIR" && pwd)

# Open MPI, trimmed
mkdir -p "$OUTDIR/ompi"
(cd "$PREFIX" && tar cf - --exclude=share/doc --exclude=share/man --exclude=include \
    --exclude='*.la' --exclude='*.a' .) | (cd "$OUTDIR/ompi" && tar xf -)
echo "$PREFIX" > "$OUTDIR/ompi/PREFIX"

for p in "${progs[@]}"; do
    cp "$(real "$BUILD/$p")" "$OUTDIR/build/$p"
done
cp -L "$BUILD"/src/libelastic/.libs/libelastic.so.0 "$OUTDIR/lib/"

# every shared library the programs, libelastic and Open MPI need
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libutil\.so|libresolv\.so|libstdc\+\+|libgcc_s|libcuda\.so|libnvidia|libnccl)'
deps() {
    LD_LIBRARY_PATH="$OUTDIR/lib:$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$1" 2> /dev/null |
        awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
}
objs=("$OUTDIR"/build/examples/* "$OUTDIR"/build/tests/* "$OUTDIR/lib/libelastic.so.0"
    "$PREFIX"/bin/prterun "$PREFIX"/bin/prted "$PREFIX"/lib/*.so.*)
for o in "${objs[@]}"; do
    [ -f "$o" ] || continue
    deps "$o" | while read -r name path; do
        [[ $name =~ $skip ]] && continue
        case $path in "$PREFIX"/*) continue ;; esac
        [ -e "$OUTDIR/lib/$name" ] || cp -L "$path" "$OUTDIR/lib/$name"
    done
done
# loaded with dlopen by libelastic's GPU part
for l in libcudart.so.13 libcudart.so.12; do
    for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
        [ -e "$d/$l" ] && [ ! -e "$OUTDIR/lib/$l" ] && cp -L "$d/$l" "$OUTDIR/lib/"
    done
done
strip --strip-unneeded "$OUTDIR"/lib/*.so* "$OUTDIR"/build/examples/* "$OUTDIR"/build/tests/* 2> /dev/null || true

cp "$top/bench/gpu-check.sh" "$OUTDIR/src/bench/"
cp -r "$top/tests/lib/." "$OUTDIR/src/tests/lib/"
cp "$top"/tests/libelastic/*.py "$top"/tests/libelastic/*.sh "$OUTDIR/src/tests/libelastic/" 2> /dev/null || true

cat > "$OUTDIR/run.sh" << 'EOF'
#!/bin/bash
# run.sh [gpu-check.sh arguments] - bench/gpu-check.sh from this bundle
set -u
here=$(cd "$(dirname "$0")" && pwd)
prefix=$(cat "$here/ompi/PREFIX")
if [ ! -x "$prefix/bin/mpirun" ]; then
    if mkdir -p "$prefix" 2> /dev/null && cp -a "$here/ompi/." "$prefix/"; then
        echo "run.sh: Open MPI installed in $prefix"
    else
        # not root: relocated (Open MPI 5 follows OPAL_PREFIX)
        prefix=$here/ompi
        export OPAL_PREFIX=$prefix PRTE_PREFIX=$prefix PMIX_PREFIX=$prefix
    fi
fi
libs=$here/lib:$prefix/lib
# libnccl: the machine's own (a CUDA install, the nvidia-nccl wheel, the
# system's), the first with ncclCommRevoke (NCCL >= 2.28, which libelastic
# needs); else the first found (the NCCL checks then fail, saying why)
nccl=
for d in $(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2> /dev/null) \
    /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/libnccl.so.2" ] || continue
    if grep -q ncclCommRevoke "$d/libnccl.so.2"; then nccl=$d; break; fi
    [ -n "$nccl" ] || nccl=$d
done
[ -n "$nccl" ] && libs=$libs:$nccl && echo "run.sh: libnccl from $nccl"
for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu $(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2> /dev/null); do
    [ -e "$d/libnccl.so.2" ] && echo "run.sh: $d/libnccl.so.2: $(grep -c ncclCommRevoke "$d/libnccl.so.2") mention(s) of ncclCommRevoke"
done
export PATH=$prefix/bin:$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPIRUN=$prefix/bin/mpirun
# TCP between the ranks: no shared-memory single copy, which containers
# (gVisor) may refuse (process_vm_readv); the checks' results do not depend
# on the transport
export ELASTIC_TEST_MPIRUN_ARGS=${ELASTIC_TEST_MPIRUN_ARGS:---oversubscribe --bind-to none --mca pml ob1 --mca btl self,tcp --mca coll ^han --mca async_mpi_finalize 1}
exec bash "$here/src/bench/gpu-check.sh" --build "$here/build" --src "$here/src" --lib "$libs" "$@"
EOF
chmod +x "$OUTDIR/run.sh"
echo "gpu-bundle: $OUTDIR ($(du -sh "$OUTDIR" | cut -f1)); run: $OUTDIR/run.sh [--out DIR] [--quick]"
