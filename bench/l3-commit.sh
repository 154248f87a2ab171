#!/bin/bash
# l3-commit.sh - what an L3 commit costs the ranks, for two build trees
# side by side (a change to the commit or to retention judged against the
# tree before it, under the same load).
#
#   bench/l3-commit.sh --a DIR --b DIR [--keep K] [--persist-period N]
#                      [--steps N] [--rounds N] [--out DIR]
#
# heat2d --nx 1024 --ny 2048 on 2 ranks (8 MiB each) under mpirun --with-ft
# ulfm, snapshots every 10 steps, L3 in the background every
# --persist-period steps (default 100), ELASTIC_SNAPSHOT_KEEP=--keep
# (default 3; 0 keeps every file, so the directory grows during the run),
# --steps (default 800).  Each round runs A then B (B then A in every other
# round), each in a fresh directory, with ELASTIC_LOG=debug; the time of
# each commit is rank 0's "background L3 write of step N: committed in X s"
# (the agreement, the read-back, the directory's fsyncs and renames,
# retention; 1 ms resolution).  Prints per side the number of commits, the
# median, the interquartile range and the maximum, and the medians of the
# first ten and of the last ten commits of each run (with --keep 0 they
# show how the cost grows with the files in the directory).  Rows:
# OUT/commit.csv (side,round,step,ms).  Defaults: --rounds 5,
# OUT=./bench-l3-commit.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() {
    echo "l3-commit.sh: $*" >&2
    exit 2
}
a= b= keep=3 per=100 steps=800 rounds=5 out=$PWD/bench-l3-commit
while [ $# -gt 0 ]; do
    case $1 in
        --a) a=${2:?--a needs a build directory}; shift ;;
        --b) b=${2:?--b needs a build directory}; shift ;;
        --keep) keep=${2:?--keep needs a number}; shift ;;
        --persist-period) per=${2:?--persist-period needs a number}; shift ;;
        --steps) steps=${2:?--steps needs a number}; shift ;;
        --rounds) rounds=${2:?--rounds needs a number}; shift ;;
        --out) out=${2:?--out needs a directory}; shift ;;
        -h | --help)
            sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
            exit 0 ;;
        *) die "'$1' is invalid (expected --a DIR, --b DIR, --keep K, --persist-period N, --steps N, --rounds N, --out DIR)" ;;
    esac
    shift
done
[ -n "$a" ] && [ -n "$b" ] || die "--a and --b are both required (two configured, built trees)"
for v in keep per steps rounds; do
    case ${!v} in '' | *[!0-9]*) die "'${!v}' is not a non-negative integer (--${v/per/persist-period})" ;; esac
done
[ "$rounds" -ge 1 ] && [ "$per" -ge 1 ] && [ "$steps" -ge 1 ] || die "--rounds, --persist-period and --steps must be >= 1"
for d in "$a" "$b"; do
    [ -x "$d/examples/heat2d" ] && [ -f "$d/tests/Makefile" ] ||
        die "'$d' is not a configured, built tree (no examples/heat2d)"
done
mpirun=$(sed -n 's/^MPIRUN = //p' "$b/tests/Makefile")
[ -x "$mpirun" ] || die "no mpirun in '$b/tests/Makefile'"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1
mkdir -p "$out/logs" || die "--out: cannot create '$out'"
echo "side,round,step,ms" > "$out/commit.csv"
for r in $(seq "$rounds"); do
    order="a b"
    [ $((r % 2)) = 0 ] && order="b a"
    for side in $order; do
        tree=$a
        [ "$side" = b ] && tree=$b
        dir=$(mktemp -d "$out/snap.XXXXXX")
        log=$out/logs/$side.$r.log
        timeout 600 "$mpirun" --with-ft ulfm --oversubscribe --bind-to none --mca pml ob1 \
            --mca btl self,sm,tcp --mca coll ^han -n 2 \
            -x ELASTIC_SNAPSHOT_PERIOD=10 -x ELASTIC_PERSIST_PERIOD="$per" \
            -x ELASTIC_SNAPSHOT_KEEP="$keep" -x ELASTIC_SNAPSHOT_DIR="$dir" \
            -x ELASTIC_RUN_ID=l3-commit -x ELASTIC_LOG=debug \
            "$tree/examples/heat2d" --nx 1024 --ny 2048 --steps "$steps" --quiet > "$log" 2>&1
        rc=$?
        echo "round $r, $side: exit $rc, $(find "$dir" -name 'snap-*.h5' | wc -l) files"
        tr -d '\0' < "$log" |
            sed -n 's/.*\[rank 0\]: debug: background L3 write of step \([0-9]*\): committed in \([0-9.]*\) s.*/\1 \2/p' |
            awk -v s="$side" -v r="$r" '{ printf "%s,%s,%s,%.3f\n", s, r, $1, $2 * 1000 }' >> "$out/commit.csv"
        rm -rf "$dir"
    done
done
python3 - "$out/commit.csv" "$a" "$b" << 'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for side, tree in (("a", sys.argv[2]), ("b", sys.argv[3])):
    v = sorted(float(r["ms"]) for r in rows if r["side"] == side)
    if not v:
        print("%s (%s): no commits found" % (side, tree))
        continue
    q = lambda p: v[int(p * (len(v) - 1))]
    first, last = [], []
    for rnd in sorted({r["round"] for r in rows if r["side"] == side}):
        run = [float(r["ms"]) for r in rows if r["side"] == side and r["round"] == rnd]
        first += run[:10]
        last += run[-10:]
    print("%s (%s): %d commits, median %.1f ms (IQR %.1f..%.1f, max %.1f); "
          "first ten of each run %.1f ms, last ten %.1f ms"
          % (side, tree, len(v), statistics.median(v), q(.25), q(.75), v[-1],
             statistics.median(first), statistics.median(last)))
PY
