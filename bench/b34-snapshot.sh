#!/bin/bash
# b34-snapshot.sh - B3 (L1 copy) and B4 (L2 buddy exchange) bandwidth of
# libelastic's elastic_maybe_snapshot, next to memcpy and MPI_Sendrecv of the
# same bytes between the same ranks, in the same program and trial.
#
#   bench/b34-snapshot.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# Runs tests/bench_snapshot_bw (bench/snapshot_bw.c, which says how the
# phases are timed) under mpirun --with-ft ulfm:
#   B3: 1 rank (no buddy: the call is the L1 copy plus a trivial commit)
#       and the ranks of B4 (every rank copying at once, as in a real job);
#   B4: 2 and 8 ranks (oversubscribed on small machines), and a sweep of
#       the state size at 8 ranks for B8's L2 cost model.
# The snapshots are synchronous (ELASTIC_SNAPSHOT_OVERLAP=0): an overlapped
# snapshot completes its L2 exchange in the next call, where this program's
# phase stamps cannot see it (B6 measures the overlap).
# Quick: 1 and 8 ranks x 1 and 4 MiB, 2 trials.  Full: 10 trials.
# Rows: snapshot,RANKS,MIB,elastic|baseline,TRIAL,l1_s|l2_s|commit_s|call_s|
#       memcpy_s|sendrecv_s,SECONDS,s
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv snapshot
bench_need_ulfm snapshot
prog=$TESTS_DIR/bench_snapshot_bw
[ -x "$prog" ] || bench_die "$prog is missing (make -C $BUILD/tests bench-programs)"

if [ "$MODE" = quick ]; then
    trials=${TRIALS:-2}
    cases="1:1 1:4 8:1 8:4"
else
    trials=${TRIALS:-10}
    cases="1:1 1:16 1:64 2:64 8:1 8:4 8:16 8:64 2:16 4:64 16:16"
fi
for c in $cases; do
    n=${c%%:*} mib=${c##*:}
    log=$LOGDIR/n$n-m$mib.log
    bench_log "$n ranks x $mib MiB, $trials trials"
    if ! timeout 600 "$MPIRUN" "${MPI_FT_ARGS[@]}" "${MPI_ARGS[@]}" -n "$n" \
        -x ELASTIC_SNAPSHOT_OVERLAP=0 "$prog" --mib "$mib" --trials "$trials" --warmup 3 > "$log" 2>&1; then
        bench_log "FAILED: $n ranks x $mib MiB (see $log)"
        row snapshot "$n" "$mib" elastic 0 failed 1 flag
        continue
    fi
    grep '^snapshot,' "$log" >> "$CSV"
done
