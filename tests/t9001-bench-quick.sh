#!/bin/bash
# t9001-bench-quick.sh - the benchmark suite runs end to end: `bench/run.sh
# --quick` (every benchmark at its smallest size, once, with its baseline)
# and every benchmark B1-B9 produced its rows, the summary, the Markdown
# report and the plots.  Speed is not checked: the machine may be loaded.
# A benchmark whose dependency this build lacks (torch for B2, parallel
# HDF5 for B5, PMIx for B9, ULFM for the MPI ones) must say so with a
# "skipped" row; its checks are then skipped, not failed.
. "${srcdir:-.}/lib/tap.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "this MPI has no ULFM: the suite needs mpirun --with-ft ulfm"
command -v hyperfine > /dev/null || skip_all "hyperfine is not installed (B7)"
bench=$(cd "$srcdir/../bench" && pwd)
build=$(cd "${top_builddir:-..}" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/t9001.XXXXXX")
trap 'rm -rf "$out"' EXIT

t0=$(date +%s)
"$bench/run.sh" --quick --no-build --build "$build" --out "$out" > "$out.log" 2>&1
rc=$?
sed 's/^/# /' "$out.log"
rm -f "$out.log"
is "$rc" 0 "bench/run.sh --quick exits 0 (every benchmark produced rows)"
diag "quick run took $(($(date +%s) - t0)) s"

# has CSV VARIANT METRIC: the CSV holds a numeric row of that variant and metric
has() {
    awk -F, -v v="$2" -v m="$3" '$4 == v && $6 == m && $7 ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ { f = 1 } END { exit !f }' "$out/$1.csv" 2> /dev/null
}
skipped() { awk -F, '$4 == "skipped"' "$out/$1.csv" 2> /dev/null | grep -q .; }

check() {
    local id=$1 csv=$2 v=$3 m=$4
    if skipped "$csv"; then
        skip "$id: $csv.csv says skipped ($(awk -F, '$4 == "skipped" { print $6 }' "$out/$csv.csv"))"
        return
    fi
    has "$csv" "$v" "$m"
    ok $? "$id: $csv.csv has $v $m"
}

check B1 recovery inplace t_total_ms
check B1 recovery inplace lost_s
check B1 recovery relaunch lost_s
check B1 recovery restart lost_s
check B2 restart elastic-exec respawn_ms
check B2 restart elastic-exec ready_ms
check B2 restart torchrun-default respawn_ms
check B3 snapshot elastic l1_s
check B3 snapshot baseline memcpy_s
check B4 snapshot elastic l2_s
check B4 snapshot baseline sendrecv_s
check B5 l3 elastic write_s
check B5 l3 elastic read_s
check B5 l3 baseline write_s
check B6 steady none run_s
check B6 steady signals run_s
check B6 steady p10 run_s
check B6 steady p100 run_s
check B6 steady p10+l3 run_s
# the direct measure: time inside libelastic's calls where the library runs,
# none where it does not (heat2d --no-elastic)
if ! skipped steady; then
    awk -F, '$6 == "lib_s" && $4 == "idle" && $7 > 0 { a = 1 }
             $6 == "lib_s" && $4 == "none" && $7 != 0 { b = 1 }
             $6 == "other_cpu_s" && $4 == "p10+l3" { c = 1 }
             END { exit !(a && !b && c) }' "$out/steady.csv"
    ok $? "B6: time inside the library measured in idle, none in the baseline; other threads' CPU recorded" ||
        diag "$(grep -E 'lib_s|other_cpu_s' "$out/steady.csv" | head -20)"
    # the critical path of the calls (BENCH_CALLLOG), positive in p10-sync's
    # snapshots and below them in its other steps; the floor in the trial
    awk -F, '$4 == "p10-sync" && $6 == "crit_snap_s" { s = $7 }
             $4 == "p10-sync" && $6 == "crit_step_s" { o = $7 }
             $4 == "floor" && $6 == "memcpy_s" && $7 > 0 { m = 1 }
             $4 == "floor" && $6 == "l2_s" && $7 > 0 { l = 1 }
             END { exit !(s > 0 && o != "" && o < s && m && l) }' "$out/steady.csv"
    ok $? "B6: the snapshot steps' critical path above the other steps'; the floor measured in the trial" ||
        diag "$(grep -E 'crit_|,floor,' "$out/steady.csv" | head -20)"
fi
check B6L3 l3bg l3bg run_s
check B6L3 l3bg l3sync run_s
check B7 launch mpirun wall_s
check B7 launch elastic-exec wall_s
check B7 launch elastic-mpirun wall_s
check B8 model extrapolation recovery_control_log
check B9 notice mpirun first_ms
if skipped notice; then
    skip "B9: the hosted server's rows (skipped)"
else
    { has notice elastic-exec first_ms || has notice pmix-launch first_ms; }
    ok $? "B9: notice.csv has the hosted server's first_ms"
fi
# no run may be wrong: a checksum that differs from the failure-free run's
! grep -q ',wrong_checksum,' "$out/recovery.csv"
ok $? "B1: every failing run ended with the failure-free checksum"

for id in B1 B2 B3 B4 B5 B6 B7 B8 B9; do
    grep -q "^$id," "$out/summary.csv"
    ok $? "summary.csv has a $id row"
done
grep -q '^| B1 |' "$out/results.md" && grep -q '^| B9 |' "$out/results.md"
ok $? "results.md has the headline table"
n=$(ls "$out"/plots/*.png 2> /dev/null | wc -l)
[ "$n" -ge 3 ]
ok $? "gnuplot drew $n plots (PNG)"
done_testing
