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
# Quick: 200 steps, 1 trial.  Full: 1000 steps, 10 trials.
#
# Pairs, interleaved.  A trial runs the baseline before and after every
# variant: none v1 none v2 none ... vK none, the variants' order rotated by
# one from trial to trial (no variant always first or last).  A variant's
# slowdown in a trial is its time over the mean of the two baseline runs
# around it, so load that changes slowly during the trial cancels (a
# linear drift exactly); the report gives the median of these per-trial
# ratios, their min..max and interquartile range, and a bootstrap 95 %
# confidence interval of the median (the spread the ±1 % claims must be
# read against).
#
# Wall and CPU time.  Next to the wall time (run_s) every run records, from
# libbenchmpitime.so, the CPU time of all ranks between MPI_Init's return
# and MPI_Finalize's entry (cpu_s, getrusage RUSAGE_SELF user + sys summed
# over the ranks), their involuntary context switches (nivcsw: how often
# the machine's other load took a core away) and the MPI communication the
# ranks started (mpi_calls, mpi_bytes: the program's and the library's
# calls, counted by interposition).  The ratios are given for wall and CPU
# time; CPU time is less sensitive to time spent waiting for a core (it is
# not counted), but an MPI rank polls while it waits, so waiting for the
# other rank is counted.
#
# Work check.  The baseline must do strictly less work than every variant:
# the driver checks, run by run, that the variant started more MPI calls
# than each baseline run around it (the same program plus the library's
# calls; deterministic: heat2d's own calls do not depend on the timing).
# A run that fails it gets a work_not_more row and a log line (it fails if
# heat2d --no-elastic made calls that the library's path skips, or if the
# library did no communication at all in that variant).  It checks work,
# not time: the report checks the times against it (a variant whose
# CPU-time ratio is below 1 beyond its confidence interval contradicts it:
# the report says so).
#
# A failed run is retried once (a stray SIGTERM/SIGUSR1 from a neighbour
# on a shared machine suspends heat2d: exit 75); the failure stays in the
# CSV.
# Rows: steady,RANKS,MIB_PER_RANK,VARIANT,TRIAL,METRIC,VALUE,UNIT with
# METRIC run_s, cpu_s, nivcsw, mpi_calls, mpi_bytes, lib_s (the time inside
# libelastic's calls, summed over the ranks), other_cpu_s (the CPU time of
# the ranks' threads but their main ones: MPI's progress threads, the
# background L3 writer); a variant's rows have base_run_s, base_cpu_s and
# base_other_cpu_s (the mean of the baselines around it) under the same
# trial; the baseline's trial is T.K (its K-th run in trial T).
#
# The direct measure.  The run times of two runs of the same program differ
# here by several percent (a shared machine), more than the library costs
# without snapshots, so the report also gives what the library costs
# measured directly, per pair: (lib_s / ranks + (other_cpu_s -
# base_other_cpu_s) / ranks) over base_run_s, the time the ranks spent
# inside the library plus the extra CPU its threads took from cores the
# ranks keep busy, as a share of the baseline's run.  It leaves out what the
# library costs outside its calls on the main threads (an overlapped L2
# exchange progressing inside the program's own MPI calls, caches).
#
# The critical path.  lib_s counts, inside a collective call, a rank's
# wait for the other ranks to arrive, which without the library the
# program's next exchange would have absorbed.  libbenchmpitime.so also
# logs every maybe_snapshot call's entry and exit on one clock
# (BENCH_CALLLOG), and per call the driver takes the time from the last
# rank's entry to the last rank's exit: what the call delayed the job by.
# Rows crit_s (its sum over the run's calls), crit_snap_s (its median over
# the snapshot steps of period 10: step > 0, a multiple of 10) and
# crit_step_s (its median over the other steps).
#
# The floor, in every trial.  Issue #19 states a snapshot's cost against
# its floor: the bytes copied to L1 at memcpy's rate plus the bytes sent to
# the buddy at the exchange's rate.  After the trial's first baseline run,
# tests/bench_snapshot_bw (B3/B4's program) runs at B6's ranks and bytes per
# rank (5 timed snapshots after 3 warm-up ones, synchronous) and its
# medians become the rows of variant `floor` in that trial: memcpy_s and
# l1_s (a plain memcpy of the bytes, and the library's own L1 copy),
# sendrecv_s and l2_s (MPI_Sendrecv of the bytes between buddies, and the
# library's exchange), call_s (the library's whole snapshot call there).
# The report takes the strict floor, the faster of each pair, trial by
# trial.
#
# B6_VARIANTS (an environment variable): run only these variants (a
# space-separated subset of the list below; the baseline always runs).
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
    steps=1000 trials=${TRIALS:-10}
fi
no_elastic=0
"$HEAT2D" --help 2>&1 | grep -q -- '--no-elastic' && no_elastic=1
row steady "$ranks" "$mib" info 0 baseline_no_elastic "$no_elastic" flag
overlap=0
grep -q 'ELASTIC_SNAPSHOT_OVERLAP' "$BUILD/src/libelastic/.libs/libelastic.so" 2> /dev/null && overlap=1
row steady "$ranks" "$mib" info 0 snapshot_overlap "$overlap" flag
row steady "$ranks" "$mib" info 0 steps "$steps" flag
variants="none"
[ $no_elastic = 1 ] && variants+=" idle"
variants+=" signals p10"
[ $overlap = 1 ] && variants+=" p10-sync"
variants+=" p100 p10+l3"
if [ -n "${B6_VARIANTS:-}" ]; then
    for v in $B6_VARIANTS; do
        case " $variants " in
            *" $v "*) ;;
            *) bench_die "B6_VARIANTS: '$v' is not a variant here (expected some of:$variants)" ;;
        esac
    done
    variants="none $B6_VARIANTS"
fi
scratch=$OUT/scratch/b6
mkdir -p "$scratch"
bench_log "$ranks ranks, ${nx}x$ny grid ($mib MiB per rank), $steps steps, $trials trials (baseline: $([ $no_elastic = 1 ] && echo --no-elastic || echo 'no periodic snapshot'))"

# b6_run VARIANT LOG: run heat2d as VARIANT once (retried once if it
# fails); sets stats ("RUN_S INIT_S CPU_S NIVCSW CALLS BYTES") or leaves it
# empty
b6_run() {
    local v=$1 t=$2 env=() args=() xs=() e try rc log mt=$scratch/mpitime cl=$scratch/calls
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
    for e in "${env[@]}"; do xs+=(-x "$e"); done
    stats=
    for try in 1 2; do
        log=$LOGDIR/$v.$t.$try.log
        rm -f "$mt" "$cl" "$scratch/events"
        rm -rf "${scratch:?}"/*.h5 "$scratch"/latest "$scratch"/.snap*
        timeout 600 "$MPIRUN" "${MPI_FT_ARGS[@]}" "${MPI_ARGS[@]}" -n "$ranks" "${xs[@]}" \
            -x ELASTIC_EVENT_LOG="$scratch/events" \
            -x LD_PRELOAD="$MPITIME_PRELOAD" -x BENCH_MPITIME="$mt" -x BENCH_CALLLOG="$cl" \
            "$HEAT2D" --nx "$nx" --ny "$ny" --steps "$steps" --quiet "${args[@]}" > "$log" 2>&1
        rc=$?
        if [ $rc -eq 0 ] && grep -aq '^checksum' "$log" && stats=$(mpitime_stats "$mt"); then
            stats+=" $(crit_stats "$cl")"
            break
        fi
        cat "$scratch/events" >> "$log" 2> /dev/null
        bench_log "$v trial $t failed (exit $rc; see $log)"
        row steady "$ranks" "$mib" "$v" "$t" failed 1 flag
        stats=
    done
    if [ -n "$stats" ] && [ "$v" = p10+l3 ] && ! ls "$scratch"/snap-*.h5 > /dev/null 2>&1; then
        # the library did not write L3 (not built with HDF5, or no persist)
        row steady "$ranks" "$mib" "$v" "$t" no_l3_files 1 flag
    fi
}

# medians: lines "KEY VALUE" in, "KEY MEDIAN" out, one per key
medians() {
    sort -k1,1 -k2,2g |
        awk 'function flush() { if (n) printf "%s %.9g\n", k, n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
             $1 != k { flush(); k = $1; n = 0 }
             { v[++n] = $2 }
             END { flush() }'
}

# b6_floor TRIAL: bench_snapshot_bw at B6's ranks and size, its medians as
# the rows of variant floor (nothing if the program is not built or fails)
b6_floor() {
    local log=$LOGDIR/floor.$1.log prog=$TESTS_DIR/bench_snapshot_bw
    [ -x "$prog" ] || return 0
    if ! timeout 300 "$MPIRUN" "${MPI_FT_ARGS[@]}" "${MPI_ARGS[@]}" -n "$ranks" \
        -x ELASTIC_SNAPSHOT_OVERLAP=0 "$prog" --mib "$mib" --trials 5 --warmup 3 > "$log" 2>&1; then
        bench_log "the floor's program failed in trial $1 (see $log)"
        return 0
    fi
    awk -F, '$1 == "snapshot" && $6 ~ /^(l1_s|l2_s|call_s|memcpy_s|sendrecv_s)$/ { print $6, $7 }' "$log" |
        medians | while read -r k v; do row steady "$ranks" "$mib" floor "$1" "$k" "$v" s; done
}

# crit_stats FILE: from a BENCH_CALLLOG file (PID STEP ENTER LEAVE), per
# step the last exit less the last entry over the ranks; prints "SUM
# SNAP_MEDIAN STEP_MEDIAN" (- for an empty set)
crit_stats() {
    [ -s "$1" ] || { echo "- - -"; return; }
    awk '{ if (!($2 in e) || $3 > e[$2]) e[$2] = $3; if (!($2 in l) || $4 > l[$2]) l[$2] = $4 }
         END { for (k in e) { c = l[k] - e[k]; if (c < 0) c = 0; sum += c
                              if (k > 0 && k % 10 == 0) print "s", c; else print "o", c }
               print "t", sum }' "$1" |
        medians | awk '{ m[$1] = $2 }
                       END { printf "%.7f %s %s\n", m["t"], ("s" in m) ? m["s"] : "-", ("o" in m) ? m["o"] : "-" }'
}

# b6_rows VARIANT TRIAL STATS: the rows of one run
b6_rows() {
    local s
    read -r -a s <<< "$3"
    row steady "$ranks" "$mib" "$1" "$2" run_s "${s[0]}" s
    row steady "$ranks" "$mib" "$1" "$2" cpu_s "${s[2]}" s
    row steady "$ranks" "$mib" "$1" "$2" nivcsw "${s[3]}" count
    row steady "$ranks" "$mib" "$1" "$2" mpi_calls "${s[4]}" count
    row steady "$ranks" "$mib" "$1" "$2" mpi_bytes "${s[5]}" B
    row steady "$ranks" "$mib" "$1" "$2" lib_s "${s[6]}" s
    row steady "$ranks" "$mib" "$1" "$2" other_cpu_s "${s[7]}" s
    [ "${s[8]:--}" = - ] || row steady "$ranks" "$mib" "$1" "$2" crit_s "${s[8]}" s
    [ "${s[9]:--}" = - ] || row steady "$ranks" "$mib" "$1" "$2" crit_snap_s "${s[9]}" s
    [ "${s[10]:--}" = - ] || row steady "$ranks" "$mib" "$1" "$2" crit_step_s "${s[10]}" s
}

# b6_pair VARIANT TRIAL VSTATS BEFORE AFTER: the variant's rows against
# the baselines around it (either may be empty: a failed run), and the
# work check
b6_pair() {
    local v=$1 t=$2 a b n=0 rs=0 cs=0 os=0 ok=1
    read -r -a a <<< "$3"
    b6_rows "$v" "$t" "$3"
    for b in "$4" "$5"; do
        [ -n "$b" ] || continue
        read -r -a b <<< "$b"
        n=$((n + 1))
        rs=$(echo "$rs + ${b[0]}" | bc -l)
        cs=$(echo "$cs + ${b[2]}" | bc -l)
        os=$(echo "$os + ${b[7]}" | bc -l)
        [ "${a[4]}" -gt "${b[4]}" ] || ok=0
    done
    [ $n -gt 0 ] || return 0
    row steady "$ranks" "$mib" "$v" "$t" base_run_s "$(echo "scale=6; $rs / $n" | bc -l)" s
    row steady "$ranks" "$mib" "$v" "$t" base_cpu_s "$(echo "scale=6; $cs / $n" | bc -l)" s
    row steady "$ranks" "$mib" "$v" "$t" base_other_cpu_s "$(echo "scale=6; $os / $n" | bc -l)" s
    if [ $ok = 1 ]; then
        row steady "$ranks" "$mib" "$v" "$t" work_more 1 flag
    else
        row steady "$ranks" "$mib" "$v" "$t" work_not_more 1 flag
        bench_log "work check failed: $v trial $t made ${a[4]} MPI calls, a baseline next to it as many or more"
    fi
}

others=${variants#none }
for t in $(seq "$trials"); do
    # rotate the variants by one each trial
    set -- $others
    r=$(((t - 1) % $#))
    order=("${@:r+1}" "${@:1:r}")
    b6_run none "$t.0"
    before=$stats
    [ -n "$before" ] && b6_rows none "$t.0" "$before"
    b6_floor "$t"
    k=0
    for v in "${order[@]}"; do
        k=$((k + 1))
        b6_run "$v" "$t"
        vs=$stats
        b6_run none "$t.$k"
        after=$stats
        [ -n "$after" ] && b6_rows none "$t.$k" "$after"
        [ -n "$vs" ] && b6_pair "$v" "$t" "$vs" "$before" "$after"
        before=$after
    done
done
rm -rf "$scratch"
