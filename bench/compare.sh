#!/bin/bash
# compare.sh - the same benchmarks against two build trees, interleaved in
# one run, so that a change (a restructure, an optimisation) is judged
# against the tree before it under the same machine load.
#
#   bench/compare.sh --a DIR --b DIR [--only B2,B7,B9] [--rounds N]
#                    [--quick|--full] [--out DIR]
#
# Each round runs every benchmark of --only once against A, then once
# against B (the order alternates between rounds: A B, B A, ...), each with
# --trials 1 so that one round is one sample of each side.  Rows go to
# OUT/a/*.csv and OUT/b/*.csv (the drivers' own format); the comparison,
# OUT/compare.md, gives per benchmark, variant and metric the median of A
# and of B over the rounds, B/A, and the spread of each side (min..max and
# the interquartile range): a difference smaller than the spread is noise.
# Defaults: --only B2,B7,B9, --rounds 5, --quick, OUT=./bench-compare.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() {
    echo "compare.sh: $*" >&2
    exit 2
}
a= b= only=B2,B7,B9 rounds=5 mode=--quick out=$PWD/bench-compare
while [ $# -gt 0 ]; do
    case $1 in
        --a) a=${2:?--a needs a build directory}; shift ;;
        --b) b=${2:?--b needs a build directory}; shift ;;
        --only) only=${2:?--only needs a list}; shift ;;
        --rounds) rounds=${2:?--rounds needs a number}; shift ;;
        --quick | --full) mode=$1 ;;
        --out) out=${2:?--out needs a directory}; shift ;;
        *) die "'$1' is invalid (expected --a DIR, --b DIR, --only LIST, --rounds N, --quick, --full, --out DIR)" ;;
    esac
    shift
done
[ -n "$a" ] && [ -n "$b" ] || die "--a and --b are both required (two configured, built trees)"
for d in "$a" "$b"; do
    [ -f "$d/tests/Makefile" ] || die "'$d' is not a configured build tree (no tests/Makefile)"
done
case $rounds in '' | *[!0-9]*) die "--rounds: '$rounds' is not a positive integer" ;; esac
[ "$rounds" -ge 1 ] || die "--rounds: '$rounds' is not a positive integer"
scripts=()
IFS=, read -ra ids <<< "$only"
for id in "${ids[@]}"; do
    case $id in
        B1) s=b1-recovery.sh ;;
        B2) s=b2-restart.sh ;;
        B3 | B4) s=b34-snapshot.sh ;;
        B5) s=b5-l3.sh ;;
        B6) s=b6-steady.sh ;;
        B6L3) s=b6-l3.sh ;;
        B7) s=b7-launch.sh ;;
        B9) s=b9-notice.sh ;;
        *) die "--only: '$id' is invalid (expected a comma-separated list of B1 ... B7, B9, B6L3)" ;;
    esac
    scripts+=("$s")
done
mkdir -p "$out/a" "$out/b" || die "--out: cannot create '$out'"
out=$(cd "$out" && pwd)
rm -f "$out"/a/*.csv "$out"/b/*.csv
# the benchmark programs of both trees, built before the first round
for d in "$a" "$b"; do
    make -s -C "$d" > "$out/build.log" 2>&1 && make -s -C "$d/tests" bench-programs >> "$out/build.log" 2>&1 ||
        { tail -n 20 "$out/build.log" >&2; die "building the benchmark programs in '$d' failed"; }
done
run_side() { # SIDE DIR SCRIPT
    echo "[compare $(date +%T)] round $r: $1 $3" >&2
    BENCH_NO_MAKE=1 "$here/$3" "$mode" --trials 1 --build "$2" --out "$out/$1" > "$out/$1/last.log" 2>&1 ||
        echo "[compare] $3 on $1 failed (see $out/$1/last.log)" >&2
}
for r in $(seq 1 "$rounds"); do
    for s in "${scripts[@]}"; do
        if [ $((r % 2)) -eq 1 ]; then
            run_side a "$a" "$s"
            run_side b "$b" "$s"
        else
            run_side b "$b" "$s"
            run_side a "$a" "$s"
        fi
    done
done
python3 - "$out" "$a" "$b" "$rounds" << 'EOF'
import csv, glob, os, statistics, sys
out, a, b, rounds = sys.argv[1:5]
def load(side):
    rows = {}
    for f in sorted(glob.glob(os.path.join(out, side, "*.csv"))):
        for r in csv.DictReader(open(f)):
            try:
                v = float(r["value"])
            except (ValueError, TypeError):
                continue
            if r["unit"] == "flag":
                continue
            key = (r["bench"], r["ranks"], r["mib"], r["variant"], r["metric"], r["unit"])
            rows.setdefault(key, []).append(v)
    return rows
A, B = load("a"), load("b")
def q(v, p):
    s = sorted(v)
    k = (len(s) - 1) * p
    i = int(k)
    return s[i] if i + 1 >= len(s) else s[i] + (s[i + 1] - s[i]) * (k - i)
lines = ["# bench/compare.sh: A = %s, B = %s, %s rounds, interleaved" % (a, b, rounds), "",
         "| bench | ranks | variant | metric | A median | B median | B/A | A min..max (IQR) | B min..max (IQR) | beyond noise |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for key in sorted(set(A) & set(B)):
    va, vb = A[key], B[key]
    ma, mb = statistics.median(va), statistics.median(vb)
    ratio = mb / ma if ma else float("nan")
    # beyond noise: the two sides' min..max ranges do not overlap
    beyond = "yes" if (min(vb) > max(va) or max(vb) < min(va)) else "no"
    fmt = lambda v: "%.4g..%.4g (%.3g)" % (min(v), max(v), q(v, 0.75) - q(v, 0.25))
    lines.append("| %s | %s | %s | %s | %.4g %s | %.4g %s | %.3f | %s | %s | %s |" % (
        key[0], key[1], key[3], key[4], ma, key[5], mb, key[5], ratio, fmt(va), fmt(vb), beyond))
for key in sorted(set(A) ^ set(B)):
    lines.append("| %s | %s | %s | %s | only on %s | | | | | |" % (key[0], key[1], key[3], key[4], "A" if key in A else "B"))
open(os.path.join(out, "compare.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
