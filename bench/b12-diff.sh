#!/bin/bash
# b12-diff.sh - B12: differential snapshots against today's full snapshot,
# for a state 90 % static and a state that changes entirely.
#
#   bench/b12-diff.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# B12_RANKS=1 runs one rank (no buddy: the L1 copy and the hashing alone,
# without the L2 exchange and its waits, which on an oversubscribed
# machine are most of the spread).
# tests/bench_diff snapshot (bench/diff_bench.c: what is timed) on 2 ranks
# (B12_RANKS)
# under mpirun --with-ft ulfm, MIB MiB per rank, synchronous snapshots
# every step (the call holds the whole L1 copy and L2 exchange).  Each trial
# runs the four variants back to back, in an order that alternates between
# trials: static 90 % with --diff off / on, static 0 % off / on.  The "on"
# runs of the changing state warm up 40 snapshots first, so that the timed
# 68 cover two whole cycles of its back-off (diff.c: hashed, compared, then
# up to 32 copied without hashing).  Rows: diff,2,MIB,s90-off|s90-on|
# s0-off|s0-on,TRIAL,snapshot_s,MEDIAN,s; the summary prints per trial the
# ratios off/on (s90, target >= 5) and on/off (s0, target <= 1.03), and
# their median, min and max.  run.sh runs it only when named (--only B12).
# Quick: 16 MiB, 2 trials.  Full: 64 MiB, 7 trials.
#
# The L2 exchange goes over shared memory (the two ranks on this host) and,
# in the same trials, over TCP (mpirun --mca btl self,tcp; variants
# tcp-s90-off ... tcp-s0-on): on a cluster libelastic's buddy map puts a
# rank's copy on another node, so the exchange crosses the network, which
# TCP over loopback stands for here.  B12_TCP=0 leaves the TCP variants
# out; with one rank (no buddy) they are left out.
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv diff
bench_need_ulfm diff
prog=$TESTS_DIR/bench_diff
[ -x "$prog" ] || bench_die "$prog is missing (make -C $BUILD/tests bench-programs)"
if [ "$MODE" = quick ]; then
    trials=${TRIALS:-2} mib=16
else
    trials=${TRIALS:-7} mib=64
fi
ranks=${B12_RANKS:-2}
[[ $ranks =~ ^[1-9][0-9]*$ ]] || bench_die "B12_RANKS: '$ranks' is invalid (expected an integer >= 1)"
tcp=${B12_TCP:-1}
[ "$ranks" -ge 2 ] || tcp=0
one() { # VARIANT TRIAL: run it, add its row
    local v=$1 t=$2 base=${1#tcp-} st d log med args=("${MPI_ARGS[@]}") i
    st=${base%-*} d=${base#*-}
    if [ "$v" != "$base" ]; then # the L2 exchange over TCP
        for i in "${!args[@]}"; do
            [ "${args[$i]}" = btl ] && args[$((i + 1))]=self,tcp
        done
    fi
    log=$LOGDIR/n$ranks-$v-$t.log
    "$MPIRUN" "${MPI_FT_ARGS[@]}" "${args[@]}" -n "$ranks" "$prog" snapshot --mib "$mib" \
        --static "${st#s}" --diff "$d" --warmup 40 --snaps 68 > "$log" 2>&1 ||
        bench_log "FAILED: $v trial $t (see $log)"
    med=$(sed -n 's/^median //p' "$log")
    [ -n "$med" ] && row diff "$ranks" "$mib" "$v" "$t" snapshot_s "$med" s
}
for t in $(seq 1 "$trials"); do
    bench_log "trial $t of $trials ($ranks ranks x $mib MiB)"
    if [ $((t % 2)) = 1 ]; then
        order="s90-off s90-on s0-off s0-on"
    else
        order="s0-on s0-off s90-on s90-off"
    fi
    for v in $order; do one "$v" "$t"; done
    if [ "$tcp" = 1 ]; then
        for v in $order; do one "tcp-$v" "$t"; done
    fi
done
"$PY" - "$CSV" "$mib" "$ranks" << 'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1]))
        if r["mib"] == sys.argv[2] and r["ranks"] == sys.argv[3]]
by = {}
for r in rows:
    by.setdefault(r["trial"], {})[r["variant"]] = float(r["value"])
for p, over in (("", "L2 over shared memory"), ("tcp-", "L2 over TCP")):
    r90 = [t[p + "s90-off"] / t[p + "s90-on"] for t in by.values()
           if p + "s90-off" in t and p + "s90-on" in t]
    r0 = [t[p + "s0-on"] / t[p + "s0-off"] for t in by.values()
          if p + "s0-off" in t and p + "s0-on" in t]
    for name, r in (("s90 off/on (speed-up, target >= 5)", r90),
                    ("s0 on/off (slow-down, target <= 1.03)", r0)):
        if r:
            print("%s, %s: median %.3f, min %.3f, max %.3f over %d trials"
                  % (over, name, statistics.median(r), min(r), max(r), len(r)))
    for v in ("s90-off", "s90-on", "s0-off", "s0-on"):
        x = [t[p + v] for t in by.values() if p + v in t]
        if x:
            print("%-12s median of the trial medians %.2f ms (min %.2f, max %.2f)"
                  % (p + v, 1e3 * statistics.median(x), 1e3 * min(x), 1e3 * max(x)))
PY
