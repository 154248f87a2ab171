#!/bin/bash
# b6-l3.sh - B6's L3 pair: heat2d with a snapshot every 10 steps and an L3
# file every 100, next to the snapshot every 10 alone, runs alternating;
# and the bandwidth of the background L3 writes next to dd of as many bytes.
#
#   bench/b6-l3.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# The same job as B6 (bench/b6-steady.sh: heat2d --nx 1024 --ny 2048, 16 MiB
# of grid over as many ranks as the machine has cores, its own time from
# MPI_Init's return to MPI_Finalize's entry through libbenchmpitime.so).
# Variants:
#   p10       ELASTIC_SNAPSHOT_PERIOD=10: the baseline of this pair
#   l3bg      p10 with ELASTIC_PERSIST_PERIOD=100: L3 in the background
#             (ELASTIC_PERSIST_BACKGROUND unset: the default, 1)
#   l3bgpc    l3bg with ELASTIC_PERSIST_DIRECT=0: the writer copies
#             everything through the page cache (no O_DIRECT), as before
#   l3bg10    l3bg with ELASTIC_PERSIST_NICE=10: the writer thread below
#             the ranks' priority (l3bg's runs at the default, 0)
#   l3sync    the same with ELASTIC_PERSIST_BACKGROUND=0: every rank waits
#             for the write (what the L3 level cost before)
# A trial runs p10 before and after every variant (p10 l3bg p10 l3bgpc p10
# l3bg10 p10 l3sync p10, the order of the variants rotated by one every trial); a variant's ratio
# is its time over the mean of the two p10 runs around it (wall and CPU
# time).  The report, OUT/l3bg.md, gives per variant the median ratio,
# min..max and the interquartile range over the trials.
#
# Bandwidth: every l3bg run logs, per file, rank 0's thread time from its
# start to the end of its fdatasync (ELASTIC_LOG=info, "on disk in T s");
# both ranks write equal shares at once, so the file's bytes over that
# time is the write's bandwidth.  After each l3bg run, dd writes as many
# bytes (the size of one file) to the same directory with
# conv=fdatasync: the same file system, the page cache in the same state.
# Then the same with the job leaving the cores idle (heat2d --sleep 20, 300
# steps, L3 every 50), at nice 10 and 0 (variants idle10, idle0): what the
# thread writes when it has a core.
# Quick: 200 steps, 1 trial (idle runs of 100 steps).  Full: 1000 steps,
# 9 trials (idle runs of 300 steps).
# Rows: l3bg,RANKS,MIB_PER_RANK,VARIANT,TRIAL,METRIC,VALUE,UNIT with METRIC
# run_s, cpu_s, base_run_s, base_cpu_s (variants), bw_mib_s (l3bg: one row
# per file; dd: one row per run), file_mib.
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv l3bg
bench_need_ulfm l3bg
[ -r "$MPITIME_SO" ] || bench_die "$MPITIME_SO is missing (make -C $BUILD/tests bench-programs)"
ranks=$(nproc)
[ "$ranks" -ge 2 ] || ranks=2
nx=1024 ny=2048
mib=$((nx * ny * 8 / ranks / 1048576))
if [ "$MODE" = quick ]; then
    steps=200 trials=${TRIALS:-1} idle_steps=100
else
    steps=1000 trials=${TRIALS:-9} idle_steps=300
fi
scratch=$OUT/scratch/l3bg
mkdir -p "$scratch"
bench_log "$ranks ranks, ${nx}x$ny grid ($mib MiB per rank), $steps steps, $trials trials"

# l3_run VARIANT TRIAL: one run; sets stats ("RUN_S INIT_S CPU_S ...") or
# leaves it empty
l3_run() {
    local v=$1 t=$2 env=(ELASTIC_SNAPSHOT_PERIOD=10) xs=() args=() e try rc log mt=$scratch/mpitime n=$steps
    case $v in idle*) n=$idle_steps ;; esac
    case $v in
        l3bg) env+=(ELASTIC_PERSIST_PERIOD=100 ELASTIC_LOG=info) ;;
        l3bgpc) env+=(ELASTIC_PERSIST_PERIOD=100 ELASTIC_LOG=info ELASTIC_PERSIST_DIRECT=0) ;;
        l3bg10) env+=(ELASTIC_PERSIST_PERIOD=100 ELASTIC_LOG=info ELASTIC_PERSIST_NICE=10) ;;
        idle10) env+=(ELASTIC_PERSIST_PERIOD=50 ELASTIC_LOG=info ELASTIC_PERSIST_NICE=10) args=(--sleep 20) ;;
        idle0) env+=(ELASTIC_PERSIST_PERIOD=50 ELASTIC_LOG=info ELASTIC_PERSIST_NICE=0) args=(--sleep 20) ;;
        l3sync) env+=(ELASTIC_PERSIST_PERIOD=100 ELASTIC_PERSIST_BACKGROUND=0) ;;
    esac
    for e in "${env[@]}" "ELASTIC_SNAPSHOT_DIR=$scratch" ELASTIC_RUN_ID=bench-l3bg; do xs+=(-x "$e"); done
    stats=
    for try in 1 2; do
        log=$LOGDIR/$v.$t.$try.log
        rm -f "$mt"
        rm -rf "${scratch:?}"/*.h5 "$scratch"/latest "$scratch"/.snap*
        timeout 600 "$MPIRUN" "${MPI_FT_ARGS[@]}" "${MPI_ARGS[@]}" -n "$ranks" "${xs[@]}" \
            -x LD_PRELOAD="$MPITIME_PRELOAD" -x BENCH_MPITIME="$mt" \
            "$HEAT2D" --nx "$nx" --ny "$ny" --steps "$n" --quiet "${args[@]}" > "$log" 2>&1
        rc=$?
        if [ $rc -eq 0 ] && grep -aq '^checksum' "$log" && stats=$(mpitime_stats "$mt"); then
            break
        fi
        bench_log "$v trial $t failed (exit $rc; see $log)"
        row l3bg "$ranks" "$mib" "$v" "$t" failed 1 flag
        stats=
    done
    case $v in l3bg* | idle*) [ -n "$stats" ] && l3_bandwidth "$v" "$t" "$log" ;; esac
    return 0
}

# l3_bandwidth VARIANT TRIAL LOG: the background writes' bandwidth rows,
# then dd of one file's bytes
l3_bandwidth() {
    local v=$1 t=$2 log=$3 size t0 t1
    tr -d '\0' < "$log" |
        sed -n 's/.*written in the background: .* (\([0-9.]*\) MiB; L1 read in [0-9.]* s, on disk in \([0-9.]*\) s[;)].*/\1 \2/p' |
        while read -r size secs; do
            row l3bg "$ranks" "$mib" "$v" "$t" file_mib "$size" MiB
            row l3bg "$ranks" "$mib" "$v" "$t" bw_mib_s "$(awk -v s="$size" -v d="$secs" 'BEGIN { if (d > 0) printf "%.1f", s / d; else print "inf" }')" MiB/s
        done
    size=$(stat -L -c %s "$scratch/latest" 2> /dev/null)
    [ -n "$size" ] || return 0
    t0=$(now)
    dd if=/dev/zero of="$scratch/dd" bs=1M count=$(((size + 1048575) / 1048576)) conv=fdatasync 2> /dev/null
    t1=$(now)
    rm -f "$scratch/dd"
    row l3bg "$ranks" "$mib" dd "$t" bw_mib_s "$(awk -v s="$size" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", s / 1048576 / (b - a) }')" MiB/s
}

# l3_rows VARIANT TRIAL STATS [BEFORE AFTER]: rows of one run, and the
# mean of the p10 runs around a variant
l3_rows() {
    local v=$1 t=$2 s b n=0 rs=0 cs=0
    read -r -a s <<< "$3"
    row l3bg "$ranks" "$mib" "$v" "$t" run_s "${s[0]}" s
    row l3bg "$ranks" "$mib" "$v" "$t" cpu_s "${s[2]}" s
    [ $# -gt 3 ] || return 0
    for b in "$4" "$5"; do
        [ -n "$b" ] || continue
        read -r -a b <<< "$b"
        n=$((n + 1))
        rs=$(echo "$rs + ${b[0]}" | bc -l)
        cs=$(echo "$cs + ${b[2]}" | bc -l)
    done
    [ $n -gt 0 ] || return 0
    row l3bg "$ranks" "$mib" "$v" "$t" base_run_s "$(echo "scale=6; $rs / $n" | bc -l)" s
    row l3bg "$ranks" "$mib" "$v" "$t" base_cpu_s "$(echo "scale=6; $cs / $n" | bc -l)" s
}

for t in $(seq "$trials"); do
    set -- l3bg l3bgpc l3bg10 l3sync
    r=$(((t - 1) % 4))
    order=("${@:r+1}" "${@:1:r}")
    l3_run p10 "$t.0"
    before=$stats
    [ -n "$before" ] && l3_rows p10 "$t.0" "$before"
    k=0
    for v in "${order[@]}"; do
        k=$((k + 1))
        l3_run "$v" "$t"
        vs=$stats
        l3_run p10 "$t.$k"
        after=$stats
        [ -n "$after" ] && l3_rows p10 "$t.$k" "$after"
        [ -n "$vs" ] && l3_rows "$v" "$t" "$vs" "$before" "$after"
        before=$after
    done
done
for t in $(seq "$trials"); do
    l3_run idle10 "$t"
    l3_run idle0 "$t"
done
rm -rf "$scratch"
"$PY" "$BENCH_DIR/l3bg_report.py" "$CSV" > "$OUT/l3bg.md" && cat "$OUT/l3bg.md" >&2
