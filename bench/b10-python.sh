#!/bin/bash
# b10-python.sh - B10: elastic_maybe_snapshot of a 64 MiB array through the
# Python binding against the same call from C, in the same run: in the same
# process (bench/py_snapshot.py alternates the binding's call and
# elastic_maybe_snapshot through ctypes on the same manager and ndarray),
# and from a C program (bench/py_snapshot.c, built as tests/bench_py_snapshot).
#
#   bench/b10-python.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# At 1 rank (the L1 copy and a trivial commit) and 2 ranks (plus the L2
# exchange with the buddy), under mpirun --with-ft ulfm, synchronous
# snapshots (ELASTIC_SNAPSHOT_OVERLAP=0), ROUNDS rounds that each run the C
# program and the Python program once, in alternating order (C first in
# odd rounds), TRIALS timed calls of each variant after 3 untimed ones.
# The target: the binding's call within 5% of the C call (it copies
# nothing: the library reads the ndarray's buffer); the headline ratio is
# the in-process one (python / c), which sees the same memory and load;
# the C program's median is shown beside it.  Prints, per rank count, the
# medians of every trial, their ratio, and the spread of the per-round
# ratios of medians.  Quick: 2 rounds x 5 trials; full: 5 rounds x 20.
# Rows: py_snapshot,RANKS,64,c|python|c-program,TRIAL,call_s,SECONDS,s
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv py_snapshot
bench_need_ulfm py_snapshot
bench_make "$LOGDIR/make.log" bench_py_snapshot || bench_die "building tests/bench_py_snapshot failed (see $LOGDIR/make.log)"
prog=$TESTS_DIR/bench_py_snapshot
pypath=$BUILD/python
[ -f "$pypath/elastic/_elastic.so" ] || bench_die "the Python binding is not built in $BUILD (configure --with-python)"
PYTHON=$(sed -n 's/^PYTHON = //p' "$BUILD/tests/Makefile")
if [ "$MODE" = quick ]; then rounds=2; trials=${TRIALS:-5}; else rounds=5; trials=${TRIALS:-20}; fi
mib=64
export ELASTIC_SNAPSHOT_OVERLAP=0

# one PROGRAM RANKS ROUND: run the C program (its rows become variant
# c-program) or the Python one (rows python and c), append the rows with
# the round folded into the trial number (ROUND * 1000 + trial)
one() {
    local what=$1 n=$2 r=$3 log="$LOGDIR/$1-$2-$3.log" cmd
    if [ "$what" = c ]; then cmd=("$prog"); else cmd=("$PYTHON" "$BENCH_DIR/py_snapshot.py"); fi
    "$MPIRUN" "${MPI_FT_ARGS[@]}" -n "$n" "${MPI_ARGS[@]}" -x ELASTIC_SNAPSHOT_OVERLAP \
        -x PYTHONPATH="$pypath" "${cmd[@]}" --mib $mib --trials "$trials" > "$log" 2>&1 ||
        bench_die "$what at $n ranks failed (see $log)"
    tr -d '\0' < "$log" | grep -a "^py_snapshot,$n,$mib," |
        awk -F, -v r="$r" -v w="$what" 'BEGIN { OFS = "," }
            { if (w == "c") $4 = "c-program"; $5 = r * 1000 + $5; print }' >> "$CSV"
}

for n in 1 2; do
    for r in $(seq 1 $rounds); do
        bench_log "$n rank(s), round $r of $rounds"
        if [ $((r % 2)) = 1 ]; then one c $n $r; one python $n $r; else one python $n $r; one c $n $r; fi
    done
done
"$PY" - "$CSV" << 'PYEOF'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["metric"] == "call_s"]
for n in sorted({r["ranks"] for r in rows}, key=int):
    t = {v: [float(r["value"]) for r in rows if r["ranks"] == n and r["variant"] == v]
         for v in ("c", "python", "c-program")}
    rounds = sorted({int(r["trial"]) // 1000 for r in rows if r["ranks"] == n})
    per = []
    for k in rounds:
        med = {v: statistics.median(float(r["value"]) for r in rows if r["ranks"] == n
               and r["variant"] == v and int(r["trial"]) // 1000 == k) for v in ("c", "python")}
        per.append(med["python"] / med["c"])
    ratio = statistics.median(t["python"]) / statistics.median(t["c"])
    print("B10 %s rank(s), 64 MiB: binding %.2f ms, C call %.2f ms in the same process "
          "(medians of %d trials each; C program %.2f ms): binding/C %.3f, per-round "
          "%.3f..%.3f; target <= 1.05: %s"
          % (n, 1e3 * statistics.median(t["python"]), 1e3 * statistics.median(t["c"]),
             len(t["c"]), 1e3 * statistics.median(t["c-program"]), ratio, min(per), max(per),
             "met" if ratio <= 1.05 else "NOT met"))
PYEOF
