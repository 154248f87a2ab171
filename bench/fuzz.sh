#!/bin/bash
# fuzz.sh - the long libFuzzer run of every harness of tests/fuzz/ (issue 18)
#
#   bench/fuzz.sh [--build DIR] [--out DIR] [--runs N] [--max-time S] [--only a,b]
#
# Builds the harnesses (`make -C DIR/tests fuzz`, configure must have found
# a clang with libFuzzer), then runs them one after the other with one
# worker each: N executions (default 1000000) or S seconds (default 1200),
# whichever comes first, starting from the committed seed and regression
# corpora (tests/fuzz/corpus/NAME, tests/fuzz/regress/NAME, read only; new
# inputs go to OUT/corpus/NAME).  A crash, a leak, a timeout (-timeout 10 s
# per input) or running out of memory (2 GiB) stops that harness with its
# input in OUT/artifacts/; copy it to tests/fuzz/regress/NAME/ once fixed.
# Writes OUT/report.md (one row per harness: executions, time, exec/s,
# coverage, features, corpus, crashes, leaks, timeouts, OOMs) and
# OUT/NAME.log.  Exit status: 0 when every harness ended clean.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=$src/build
out=./fuzz-results
runs=1000000
max_time=1200
only=
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --max-time) max_time=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$runs$max_time" in
    *[!0-9]*) echo "fuzz.sh: --runs and --max-time take integers" >&2; exit 2 ;;
esac
build=$(cd "$build" && pwd) || exit 2
make -s -C "$build/tests" fuzz > /dev/null || {
    echo "fuzz.sh: cannot build the harnesses (configure's summary says why)" >&2
    exit 2
}
mkdir -p "$out/artifacts" "$out/corpus"
out=$(cd "$out" && pwd)
report=$out/report.md
{
    echo "# fuzz run $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, runs $runs, cap ${max_time}s"
    echo
    echo "| harness | executions | time s | exec/s | cov | ft | corpus | crashes | leaks | timeouts | ooms | result |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
} > "$report"
status=0
for prog in "$build"/tests/fuzz/fuzz_*; do
    [ -x "$prog" ] || continue
    name=${prog##*/fuzz_}
    if [ -n "$only" ] && ! [[ ",$only," == *",$name,"* ]]; then
        continue
    fi
    seeds=$src/tests/fuzz/corpus/$name
    regress=$src/tests/fuzz/regress/$name
    work=$out/corpus/$name
    mkdir -p "$work"
    dirs=("$work")
    [ -d "$seeds" ] && dirs+=("$seeds")
    [ -d "$regress" ] && dirs+=("$regress")
    extra=()
    # HDF5 allocates sizes read from the file (4 GiB for a damaged object
    # header) and fails when it cannot read them; the memory is never
    # touched, so only the RSS limit counts for it
    [ "$name" = l3 ] && extra=(-malloc_limit_mb=65536)
    dict=()
    [ -f "$src/tests/fuzz/$name.dict" ] && dict=(-dict="$src/tests/fuzz/$name.dict")
    log=$out/$name.log
    echo "fuzz.sh: $name: up to $runs executions or ${max_time}s" >&2
    start=$(date +%s.%N)
    # one process, one worker (the machine is shared); the bound is libFuzzer's own
    # plus a wall-clock kill for a harness that would never return
    timeout --kill-after=30 $((max_time + 120)) "$prog" -runs="$runs" \
        -max_total_time="$max_time" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 \
        -print_final_stats=1 "${extra[@]}" "${dict[@]}" \
        -artifact_prefix="$out/artifacts/$name-" "${dirs[@]}" > "$log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<< "$last")
    crashes=$(find "$out/artifacts" -name "$name-crash-*" | wc -l)
    leaks=$(find "$out/artifacts" -name "$name-leak-*" | wc -l)
    timeouts=$(find "$out/artifacts" -name "$name-timeout-*" | wc -l)
    ooms=$(find "$out/artifacts" -name "$name-oom-*" | wc -l)
    result=clean
    if [ "$rc" -ne 0 ] || [ $((crashes + leaks + timeouts + ooms)) -gt 0 ]; then
        result="FAILED (exit $rc, see $name.log)"
        status=1
    fi
    echo "| $name | ${execs:-?} | $secs | ${eps:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $crashes | $leaks | $timeouts | $ooms | $result |" >> "$report"
done
cat "$report"
exit $status
