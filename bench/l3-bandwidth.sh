#!/bin/bash
# l3-bandwidth.sh - L3 write and restore bandwidth next to dd, same bytes,
# same file system, same run.
#
#   bench/l3-bandwidth.sh [-n RANKS] [-m MIB_PER_RANK] [-r REPEAT] [-d DIR] [BUILDDIR]
#
# Defaults: 8 ranks x 64 MiB, 3 repetitions, a fresh directory under
# $TMPDIR (or /tmp).  BUILDDIR is a configured build tree (default: the
# current directory) in which `make -C tests l3/l3_bench` is run.
#
# Page cache: before every read the script drops the page cache (root:
# `echo 3 > /proc/sys/vm/drop_caches`) so reads come from the device; where
# that is not permitted it says so, and reads are then from memory.  Writes
# include the fsync: L3 syncs before its commit, dd uses conv=fdatasync.
set -u
ranks=8 mib=64 repeat=3 dir=
while getopts n:m:r:d: o; do
    case $o in
        n) ranks=$OPTARG ;;
        m) mib=$OPTARG ;;
        r) repeat=$OPTARG ;;
        d) dir=$OPTARG ;;
        *) echo "usage: $0 [-n RANKS] [-m MIB_PER_RANK] [-r REPEAT] [-d DIR] [BUILDDIR]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
build=${1:-.}
[ -f "$build/tests/Makefile" ] || { echo "$0: '$build' is not a configured build tree (no tests/Makefile)" >&2; exit 2; }
make -s -C "$build/tests" l3/l3_bench > /dev/null || { echo "$0: cannot build l3/l3_bench" >&2; exit 1; }
bench=$build/tests/l3/l3_bench
mpirun=$(sed -n 's/^MPIRUN = //p' "$build/tests/Makefile")
ulfm=$(sed -n 's/^HAVE_ULFM = //p' "$build/tests/Makefile")
ft=()
[ "$ulfm" = yes ] && ft=(--with-ft ulfm)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_opal_cuda_support=0
mpi=("$mpirun" "${ft[@]}" -n "$ranks" --oversubscribe --bind-to none --mca pml ob1 --mca btl self,sm,tcp --mca coll ^han)

work=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/l3-bandwidth.XXXXXX")}
mkdir -p "$work"
trap '[ -z "$dir" ] && rm -rf "$work"' EXIT
bytes=$((ranks * mib * 1048576))
fs=$(df -PT "$work" | awk 'NR == 2 {print $2 " on " $1}')

drop() {
    sync
    if echo 3 > /proc/sys/vm/drop_caches 2> /dev/null; then
        dropped=yes
    else
        dropped="no (not permitted: reads below are from the page cache)"
    fi
}

mibs() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.1f", b / 1048576 / s }'; }

echo "# l3-bandwidth: $ranks ranks x $mib MiB = $((bytes >> 20)) MiB, $repeat runs, $work ($fs), $(nproc) cores"
for i in $(seq 1 "$repeat"); do
    drop
    "${mpi[@]}" "$bench" write "$work/snap" "$mib" "$i" 2> "$work/err" | sed "s/^/run $i: /" || cat "$work/err"
    drop
    "${mpi[@]}" "$bench" read "$work/snap" "$mib" "$i" 2> "$work/err" | sed "s/^/run $i: /" || cat "$work/err"

    drop
    t0=$(date +%s.%N)
    dd if=/dev/zero of="$work/raw" bs=4M count=$((bytes / 4194304)) conv=fdatasync status=none
    t1=$(date +%s.%N)
    w=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    drop
    t0=$(date +%s.%N)
    dd if="$work/raw" of=/dev/null bs=4M status=none
    t1=$(date +%s.%N)
    r=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    printf 'run %d: dd write bytes=%d seconds=%.3f MiB/s=%s (conv=fdatasync)\n' "$i" "$bytes" "$w" "$(mibs "$w")"
    printf 'run %d: dd read bytes=%d seconds=%.3f MiB/s=%s\n' "$i" "$bytes" "$r" "$(mibs "$r")"
    rm -f "$work/raw"
done
echo "# page cache dropped before each run and read: $dropped"
