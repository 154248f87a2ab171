#!/bin/bash
# b6-steady.sh - B6: steady-state slowdown of heat2d from its snapshots:
# L1+L2 every 10 and every 100 steps, and L1+L2 every 10 with L3 every 100,
# against heat2d without snapshots, runs alternating.
#
#   bench/b6-steady.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# heat2d --nx 1024 --ny 2048 (16 MiB of grid, the whole state) on as many
# ranks as the machine has cores (no oversubscription), under mpirun
# --with-ft ulfm.  The time is the application's own, from MPI_Init's return
# to MPI_Finalize's entry (the latest rank's), recorded from outside by
# tests/.libs/libbenchmpitime.so (bench/mpitime.c, LD_PRELOAD through
# mpirun -x): launcher start-up and tear-down, which would dilute the
# slowdown, are left out.  Variants (ELASTIC_* variables):
#   none     the baseline.  With `heat2d --no-elastic` (when heat2d has it):
#            the same loop without the manager.  Otherwise
#            ELASTIC_SNAPSHOT_PERIOD larger than the run and
#            ELASTIC_SIGNALS=none: the library calls are made but do not
#            communicate (no snapshot period reached, no preemption signal
#            to agree on); the only snapshot is the one of step 0, so the
#            slowdowns below are low by one snapshot per run (the CSV says
#            which baseline ran: baseline_no_elastic=1|0)
#   idle     (with --no-elastic only) the old baseline: the library calls
#            are made, ELASTIC_SNAPSHOT_PERIOD larger than the run and
#            ELASTIC_SIGNALS=none (only the snapshot of step 0): what the
#            calls cost without snapshots
#   signals  as the baseline (no periodic snapshot) but with libelastic's
#            default preemption handling (ELASTIC_SIGNALS unset: SIGTERM and
#            SIGUSR1 caught, the flags agreed on by an MPI_Allreduce every
#            few steps): what that agreement costs by itself
#   p10      ELASTIC_SNAPSHOT_PERIOD=10 (the L2 exchange of each snapshot
#            overlaps the next step where the library does that)
#   p10-sync (where the library overlaps) the same with
#            ELASTIC_SNAPSHOT_OVERLAP=0: synchronous snapshots, for comparison
#   p100     ELASTIC_SNAPSHOT_PERIOD=100
#   p10+l3   ELASTIC_SNAPSHOT_PERIOD=10 ELASTIC_PERSIST_PERIOD=100 (L3 files
#            in OUT/scratch, removed after each run)
# Quick: 200 steps, 1 trial.  Full: 1000 steps, 9 trials (short runs, many
# of them: on a shared machine a short run is more often undisturbed).  The
# report takes the slowdown as the median over trials of variant / baseline
# of the same trial (back to back), and shows the ratio of the minima too.  A failed run
# is retried once (a stray SIGTERM/SIGUSR1 from a neighbour on a shared
# machine suspends heat2d: exit 75); the failure stays in the CSV.
# Rows: steady,RANKS,MIB_PER_RANK,VARIANT,TRIAL,run_s,SECONDS,s
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv steady
bench_need_ulfm steady
[ -r "$MPITIME_SO" ] || bench_die "$MPITIME_SO is missing (make -C $BUILD/tests bench-programs)"
ranks=$(nproc)
[ "$ranks" -ge 2 ] || ranks=2
nx=1024 ny=2048
mib=$((nx * ny * 8 / ranks / 1048576))
if [ "$MODE" = quick ]; then
    steps=200 trials=${TRIALS:-1}
else
    steps=1000 trials=${TRIALS:-9}
fi
no_elastic=0
"$HEAT2D" --help 2>&1 | grep -q -- '--no-elastic' && no_elastic=1
row steady "$ranks" "$mib" info 0 baseline_no_elastic "$no_elastic" flag
overlap=0
grep -q 'ELASTIC_SNAPSHOT_OVERLAP' "$BUILD/src/libelastic/.libs/libelastic.so" 2> /dev/null && overlap=1
row steady "$ranks" "$mib" info 0 snapshot_overlap "$overlap" flag
variants="none"
[ $no_elastic = 1 ] && variants+=" idle"
variants+=" signals p10"
[ $overlap = 1 ] && variants+=" p10-sync"
variants+=" p100 p10+l3"
scratch=$OUT/scratch/b6
mkdir -p "$scratch"
bench_log "$ranks ranks, ${nx}x$ny grid ($mib MiB per rank), $steps steps, $trials trials (baseline: $([ $no_elastic = 1 ] && echo --no-elastic || echo 'no periodic snapshot'))"

for t in $(seq "$trials"); do
    for v in $variants; do
        env=() args=()
        case $v in
            none)
                if [ $no_elastic = 1 ]; then
                    args=(--no-elastic)
                else
                    env=(ELASTIC_SNAPSHOT_PERIOD=$((steps + 1)) ELASTIC_SIGNALS=none)
                fi ;;
            idle) env=(ELASTIC_SNAPSHOT_PERIOD=$((steps + 1)) ELASTIC_SIGNALS=none) ;;
            signals) env=(ELASTIC_SNAPSHOT_PERIOD=$((steps + 1))) ;;
            p10) env=(ELASTIC_SNAPSHOT_PERIOD=10) ;;
            p10-sync) env=(ELASTIC_SNAPSHOT_PERIOD=10 ELASTIC_SNAPSHOT_OVERLAP=0) ;;
            p100) env=(ELASTIC_SNAPSHOT_PERIOD=100) ;;
            p10+l3) env=(ELASTIC_SNAPSHOT_PERIOD=10 ELASTIC_PERSIST_PERIOD=100
                "ELASTIC_SNAPSHOT_DIR=$scratch" ELASTIC_RUN_ID=bench-b6) ;;
        esac
        xs=()
        for e in "${env[@]}"; do xs+=(-x "$e"); done
        mt=$scratch/mpitime
        for try in 1 2; do
            log=$LOGDIR/$v.$t.$try.log
            rm -f "$mt" "$scratch/events"
            rm -rf "${scratch:?}"/*.h5 "$scratch"/latest "$scratch"/.snap*
            timeout 600 "$MPIRUN" "${MPI_FT_ARGS[@]}" "${MPI_ARGS[@]}" -n "$ranks" "${xs[@]}" \
                -x ELASTIC_EVENT_LOG="$scratch/events" \
                -x LD_PRELOAD="$MPITIME_PRELOAD" -x BENCH_MPITIME="$mt" \
                "$HEAT2D" --nx "$nx" --ny "$ny" --steps "$steps" --quiet "${args[@]}" > "$log" 2>&1
            rc=$?
            if [ $rc -eq 0 ] && grep -aq '^checksum' "$log" && r=$(mpitime_run "$mt"); then
                break
            fi
            cat "$scratch/events" >> "$log" 2> /dev/null
            bench_log "$v trial $t failed (exit $rc; see $log)"
            row steady "$ranks" "$mib" "$v" "$t" failed 1 flag
            r=
        done
        [ -n "$r" ] || continue
        if [ "$v" = p10+l3 ] && ! ls "$scratch"/snap-*.h5 > /dev/null 2>&1; then
            # the library did not write L3 (not built with HDF5, or no persist)
            row steady "$ranks" "$mib" "$v" "$t" no_l3_files 1 flag
        fi
        row steady "$ranks" "$mib" "$v" "$t" run_s "${r%% *}" s
    done
done
rm -rf "$scratch"
