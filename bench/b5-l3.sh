#!/bin/bash
# b5-l3.sh - B5: L3 (parallel HDF5) write and read bandwidth next to dd of
# the same total bytes on the same file system, trial by trial.
#
#   bench/b5-l3.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# L3 is libelastic's own writer and reader (tests/l3/l3_bench: l3_write of
# one block-distributed array, then l3_restore_latest as a resume reads:
# the open checks the file's structure, each rank reads its share with
# l3_read_array, every block's crc32 verified as it arrives, and what was
# not read is verified after), under mpirun --with-ft ulfm.  Times
# are the slowest rank's, from a barrier to the end of the call; a write
# includes the fsync and the atomic rename.  The baseline is one dd of the
# same bytes: `dd bs=4M conv=fdatasync` to write, `dd bs=4M` to read.
# Before every write and every read the page cache is dropped (as root;
# where that is refused the CSV says so with a page_cache_dropped=0 row and
# reads then come from memory).  The work directory is BENCH_SCRATCH
# (default OUT/scratch), on the file system being measured.
# Quick: 2 ranks x 1 and 4 MiB, 1 trial.  Full: 8 ranks x 1/4/16/64 MiB,
# 2 and 16 ranks x 64 MiB, 5 trials.
# Rows: l3,RANKS,MIB_PER_RANK,elastic|baseline,TRIAL,write_s|read_s|
#       open_verify_s,SECONDS,s (open_verify_s: the open's share of read_s;
#       with the one-pass restore it checks the structure only)
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv l3
bench_need_ulfm l3
bench_make "$LOGDIR/build.log" l3/l3_bench || {
    bench_log "skipped: l3/l3_bench cannot be built (no parallel HDF5?); see $LOGDIR/build.log"
    row l3 0 0 skipped 0 no_hdf5 1 flag
    exit 0
}
prog=$TESTS_DIR/l3/l3_bench
scratch=${BENCH_SCRATCH:-$OUT/scratch}/l3
mkdir -p "$scratch" || bench_die "cannot create $scratch"
trap 'rm -rf "$scratch"' EXIT

if [ "$MODE" = quick ]; then
    trials=${TRIALS:-1}
    cases="2:1 2:4"
else
    trials=${TRIALS:-5}
    cases="8:64 8:1 8:4 8:16 2:64 16:64"
fi

dropped=1
drop() {
    sync
    echo 3 > /proc/sys/vm/drop_caches 2> /dev/null || dropped=0
}

# field KEY LINE: the value of KEY=VALUE in LINE
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<< "$2"; }

for c in $cases; do
    n=${c%%:*} mib=${c##*:}
    bytes=$((n * mib * 1048576))
    bench_log "$n ranks x $mib MiB ($((bytes >> 20)) MiB), $trials trials, $scratch"
    for t in $(seq "$trials"); do
        rm -rf "${scratch:?}"/*
        log=$LOGDIR/n$n-m$mib-t$t.log
        drop
        w=$("$MPIRUN" "${MPI_FT_ARGS[@]}" "${MPI_ARGS[@]}" -n "$n" "$prog" write "$scratch/snap" "$mib" "$t" 2>> "$log" | tr -d '\0')
        echo "$w" >> "$log"
        drop
        r=$("$MPIRUN" "${MPI_FT_ARGS[@]}" "${MPI_ARGS[@]}" -n "$n" "$prog" read "$scratch/snap" "$mib" "$t" 2>> "$log" | tr -d '\0')
        echo "$r" >> "$log"
        if [ -z "$(field seconds "$w")" ] || [ -z "$(field seconds "$r")" ]; then
            bench_log "FAILED: L3 $n x $mib MiB trial $t (see $log)"
            row l3 "$n" "$mib" elastic "$t" failed 1 flag
            continue
        fi
        row l3 "$n" "$mib" elastic "$t" write_s "$(field seconds "$w")" s
        row l3 "$n" "$mib" elastic "$t" read_s "$(field seconds "$r")" s
        row l3 "$n" "$mib" elastic "$t" open_verify_s "$(field open+verify "$r")" s
        rm -rf "${scratch:?}"/snap

        drop
        t0=$(now)
        dd if=/dev/zero of="$scratch/raw" bs=4M count=$((bytes / 4194304)) conv=fdatasync status=none
        t1=$(now)
        drop
        t2=$(now)
        dd if="$scratch/raw" of=/dev/null bs=4M status=none
        t3=$(now)
        rm -f "$scratch/raw"
        row l3 "$n" "$mib" baseline "$t" write_s "$(elapsed "$t0" "$t1")" s
        row l3 "$n" "$mib" baseline "$t" read_s "$(elapsed "$t2" "$t3")" s
    done
done
row l3 0 0 info 0 page_cache_dropped "$dropped" flag
df -PT "$scratch" | awk 'NR == 2 { print "# l3 file system: " $2 " on " $1 " (" $7 ")" }' > "$LOGDIR/fs.txt"
