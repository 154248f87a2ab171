#!/bin/bash
# b13-fastpath.sh - B13: the cost of an elastic_maybe_snapshot and of an
# elastic_maybe_reshard_up call on a step that does nothing, and the system
# calls of such steps.
#
#   bench/b13-fastpath.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# tests/bench_diff fastpath (bench/diff_bench.c) as an MPI singleton: 10^6
# calls of each, timed with clock_gettime around the loop (rows
# fastpath,1,0,maybe_snapshot|maybe_reshard_up[+heartbeat],TRIAL,ns_per_call,
# NS,ns; +heartbeat: with ELASTIC_HEARTBEAT_FILE, as under elastic-exec);
# then, where strace is installed, the same program under strace -c -f with
# --calls 0 and with --calls 10^6 (2 x 10^6 no-op calls): the difference of
# the total system call counts (row ...,syscalls_per_call) must be ~0; and,
# where valgrind is installed, the instructions of each call counted by
# callgrind (10^5 calls; row ...,instructions_per_call).  run.sh runs it
# only when named (--only B13).
# Quick: 1 trial, no strace/valgrind.  Full: 5 trials, strace and callgrind.
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv fastpath
prog=$TESTS_DIR/bench_diff
[ -x "$prog" ] || bench_die "$prog is missing (make -C $BUILD/tests bench-programs)"
trials=${TRIALS:-5}
[ "$MODE" = quick ] && trials=${TRIALS:-1}
# "+heartbeat": as under elastic-exec, the progress heartbeat written at
# every call (ELASTIC_HEARTBEAT_FILE, a shared mapping)
hb=$LOGDIR/heartbeat
for t in $(seq 1 "$trials"); do
    for sup in "" +heartbeat; do
        log=$LOGDIR/time$sup-$t.log
        rm -f "$hb"
        if [ -n "$sup" ]; then
            : > "$hb"
            ELASTIC_HEARTBEAT_FILE=$hb "$prog" fastpath --calls 1000000 > "$log" 2>&1
        else
            "$prog" fastpath --calls 1000000 > "$log" 2>&1
        fi || bench_log "FAILED: trial $t$sup (see $log)"
        for f in maybe_snapshot maybe_reshard_up; do
            ns=$(sed -n "s/^$f \([0-9.]*\) ns\/call.*/\1/p" "$log")
            [ -n "$ns" ] && row fastpath 1 0 "$f$sup" "$t" ns_per_call "$ns" ns &&
                bench_log "$f$sup: $ns ns per call"
        done
    done
done
[ "$MODE" = quick ] && exit 0
if command -v strace > /dev/null; then
    for c in 0 1000000; do
        strace -c -f -o "$LOGDIR/strace-$c.txt" "$prog" fastpath --calls "$c" > /dev/null 2>&1
    done
    n0=$(awk '$NF == "total" { print $(NF-2) }' "$LOGDIR/strace-0.txt")
    n1=$(awk '$NF == "total" { print $(NF-2) }' "$LOGDIR/strace-1000000.txt")
    if [ -n "$n0" ] && [ -n "$n1" ]; then
        per=$(awk -v a="$n0" -v b="$n1" 'BEGIN { printf "%.6f", (b - a) / 2e6 }')
        row fastpath 1 0 both 1 syscalls_per_call "$per" calls
        bench_log "system calls: $n0 with no call, $n1 with 2 x 10^6 no-op calls ($per per call)"
    fi
fi
if command -v valgrind > /dev/null; then
    cg=$LOGDIR/callgrind.out
    "$BUILD/libtool" --mode=execute valgrind --tool=callgrind --callgrind-out-file="$cg" \
        --toggle-collect=elastic_maybe_snapshot --toggle-collect=elastic_maybe_reshard_up \
        "$prog" fastpath --calls 100000 > "$LOGDIR/callgrind.log" 2>&1
    for f in elastic_maybe_snapshot elastic_maybe_reshard_up; do
        ir=$(callgrind_annotate --inclusive=yes "$cg" 2> /dev/null |
            awk -v f=":$f " '{ g = $0; gsub(/,/, "", $1) } index(g, f) { print $1; exit }')
        if [ -n "$ir" ]; then
            per=$(awk -v a="$ir" 'BEGIN { printf "%.1f", a / 100000 }')
            row fastpath 1 0 "${f#elastic_}" 1 instructions_per_call "$per" instructions
            bench_log "$f: $per instructions per call (callgrind)"
        fi
    done
fi
