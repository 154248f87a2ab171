#!/bin/bash
# b1-recovery.sh - B1: time lost per failure.  heat2d loses one rank to a
# real SIGKILL; the same failure is recovered in place (ULFM, L1/L2), by a
# relaunch from L3 (elastic-mpirun), and by a full restart without
# snapshots (torchelastic's default: the group restarted from step 0).
#
#   bench/b1-recovery.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# The job: heat2d --nx 512 --ny 1024 --steps 60 --sleep 20 --ballast MIB
# (MIB MiB of extra state per rank, checked bit for bit at the end; each
# step also sleeps 20 ms, standing for the computation of a real step, so
# that the work a failure destroys is worth something and does not depend
# on how many ranks share the cores), L1/L2 snapshots every 10 steps;
# original rank 1 SIGKILLs itself at step 45 (heat2d
# --fail 1:45, on the first attempt only: bench/fail-once.sh).  Every run
# must end with the failure-free checksum and intact ballast, or it is
# recorded as failed.  Each trial runs, for every variant, a failure-free
# job and a failing job back to back.
#
# Time lost (lost_s): how much later the failing job first enters step 50
# (the first step after the failure's step that the failure-free job also
# reaches 5 steps later) than it would have without the failure:
#   (T_fail(50) - T_fail(45)) - (T_free(50) - T_free(45))
# where T(s) is when world rank 0 first entered step s, taken from outside
# by tests/.libs/libbenchmpitime.so (bench/mpitime.c interposes
# elastic_maybe_snapshot; every attempt of a relaunched job appends to the
# same log).  It holds detection, recovery or relaunch, state restore and
# the rework, and none of the launcher's start-up or tear-down of the
# failure-free part.  Also recorded: lost_wall_s, the difference of the two
# jobs' whole wall times (noisier; on an oversubscribed machine the
# survivors of an in-place recovery run the remaining steps on the same
# cores as one rank fewer, which shortens it).
#
# Variants:
#   inplace   mpirun --with-ft ulfm (the options elastic-mpirun uses);
#             ELASTIC_SNAPSHOT_PERIOD=10.  Also the recovery phases of
#             libelastic's event (t_detect_ms ... t_total_ms).
#   spare     as inplace with one more rank, an idle spare
#             (ELASTIC_SPARE_RANKS=1): the spare takes the dead rank's place
#             and only its block moves (from its buddy's L2), instead of a
#             re-shard of every array over n - 1 ranks.
#   relaunch  elastic-mpirun --max-relaunches 1 with
#             ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT=0, so that every failure
#             is final for the ranks (exit 76) and relaunched from L3 (not
#             --ulfm no: libelastic hangs in elastic_manager_destroy under an
#             Open MPI with ULFM started without --with-ft ulfm, see
#             doc/benchmarks.md); ELASTIC_PERSIST_PERIOD=20 so that the
#             newest L3 snapshot is step 40, the step in-place recovery rolls
#             back to (the same rework); the L3 writes are in both runs of
#             the pair.  Also the resume event's t_restore_ms.
#   restart   no snapshot to resume from (ELASTIC_RESUME_MODE=never): the
#             whole group restarts from step 0, by elastic-exec
#             --max-restarts 1 with its hosted PMIx server when this build
#             has it (--wireup pmix), else by elastic-mpirun --max-relaunches
#             1 as for relaunch (the CSV row restart_launcher_* says which).
# Quick: in place at 2 and 4 ranks x 1 MiB (two points for B8's fit), the
# baselines at 2 ranks x 1 MiB, 1 trial.  Full: in place at 2/4/8/16 ranks x
# 1/16/64 MiB, the baselines at 8 ranks x 1/16/64 MiB and 2/4/16 x 64 MiB,
# 3 trials.  A pair with a failed run is retried once (both rows stay).
# Rows: recovery,RANKS,MIB,inplace|spare|relaunch|restart,TRIAL,METRIC,VALUE,UNIT
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv recovery
bench_need_ulfm recovery
[ -r "$MPITIME_SO" ] || bench_die "$MPITIME_SO is missing (make -C $BUILD/tests bench-programs)"
nx=512 ny=1024 steps=60 sleep_ms=20 period=10 persist=20 victim=1 fail_step=45 rollback=40
back_step=50 # T(back_step) - T(fail_step): the time to get past the failure
if [ "$MODE" = quick ]; then
    trials=${TRIALS:-1}
    inplace_cases="2:1 4:1" base_cases="2:1"
else
    trials=${TRIALS:-3}
    inplace_cases="2:1 2:16 2:64 4:1 4:16 4:64 8:1 8:16 8:64 16:1 16:16 16:64"
    base_cases="8:1 8:16 8:64 2:64 4:64 16:64"
fi
# To measure a subset (e.g. one size, old and new builds interleaved):
# B1_INPLACE_CASES="8:64" B1_BASE_CASES="8:64" B1_BASE_VARIANTS="spare relaunch"
inplace_cases=${B1_INPLACE_CASES:-$inplace_cases}
base_cases=${B1_BASE_CASES-$base_cases}
base_variants=${B1_BASE_VARIANTS:-spare relaunch restart}
scratch=$OUT/scratch/b1
mkdir -p "$scratch"
trap 'rm -rf "$scratch"' EXIT

# Which baselines this build can run.
restart_launcher=elastic-mpirun
"$ELASTIC_EXEC" --help 2>&1 | grep -q -- '--wireup' && restart_launcher=elastic-exec
have_l3=0
if grep -q 'ELASTIC_RESUME_MODE' "$BUILD/src/libelastic/.libs/libelastic.so" 2> /dev/null; then
    have_l3=1
fi
row recovery 0 0 info 0 "restart_launcher_$restart_launcher" 1 flag
row recovery 0 0 info 0 relaunch_from_l3_available "$have_l3" flag
bench_log "in place: $inplace_cases; baselines: $base_cases; $trials trials; restart by $restart_launcher; relaunch from L3: $([ $have_l3 = 1 ] && echo yes || echo 'not in this build')"

# job VARIANT free|fail N MIB TRIAL: run one job; sets WALL (s) and LOG,
# returns 1 (and records a failed row) unless it ended correctly
job() {
    local v=$1 kind=$2 n=$3 mib=$4 t=$5 rc t0 t1
    local heat=("$HEAT2D" --nx "$nx" --ny "$ny" --steps "$steps" --sleep "$sleep_ms"
        --ballast "$mib" --quiet)
    local fail=()
    LOG=$LOGDIR/$v.$kind.n$n.m$mib.t$t.log
    EV=$scratch/events.jsonl
    RUNDIR=$scratch/run
    STEPLOG=$scratch/steps.$kind
    rm -rf "$RUNDIR" "$EV" "$scratch/snap" "$STEPLOG"
    mkdir -p "$scratch/snap"
    [ "$kind" = fail ] && fail=("$BENCH_DIR/fail-once.sh" "$victim:$fail_step")
    t0=$(now)
    case $v in
        inplace)
            timeout 900 "$MPIRUN" "${MPI_FT_ARGS[@]}" "${MPI_ARGS[@]}" -n "$n" \
                -x ELASTIC_SNAPSHOT_PERIOD=$period -x ELASTIC_EVENT_LOG="$EV" \
                -x LD_PRELOAD="$MPITIME_PRELOAD" \
                -x BENCH_STEPLOG="$STEPLOG" "${fail[@]}" "${heat[@]}" > "$LOG" 2>&1 ;;
        spare)
            timeout 900 "$MPIRUN" "${MPI_FT_ARGS[@]}" "${MPI_ARGS[@]}" -n "$((n + 1))" \
                -x ELASTIC_SNAPSHOT_PERIOD=$period -x ELASTIC_SPARE_RANKS=1 \
                -x ELASTIC_EVENT_LOG="$EV" -x LD_PRELOAD="$MPITIME_PRELOAD" \
                -x BENCH_STEPLOG="$STEPLOG" "${fail[@]}" "${heat[@]}" > "$LOG" 2>&1 ;;
        relaunch)
            ELASTIC_SNAPSHOT_PERIOD=$period ELASTIC_PERSIST_PERIOD=$persist \
                ELASTIC_SNAPSHOT_DIR=$scratch/snap ELASTIC_RUN_ID=bench-b1 \
                ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT=0 \
                timeout 900 "$ELASTIC_MPIRUN" -q --max-relaunches 1 --run-dir "$RUNDIR" -n "$n" \
                -x ELASTIC_SNAPSHOT_PERIOD -x ELASTIC_PERSIST_PERIOD -x ELASTIC_SNAPSHOT_DIR \
                -x ELASTIC_RUN_ID -x ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT \
                -x LD_PRELOAD="$MPITIME_PRELOAD" -x BENCH_STEPLOG="$STEPLOG" \
                "${fail[@]}" "${heat[@]}" > "$LOG" 2>&1 ;;
        restart)
            if [ "$restart_launcher" = elastic-exec ]; then
                # the timing library goes to the workers only (env), not
                # into elastic-exec itself
                ELASTIC_SNAPSHOT_PERIOD=$period ELASTIC_RESUME_MODE=never \
                    timeout 900 "$ELASTIC_EXEC" --nproc-per-node "$n" --wireup pmix \
                    --restart-policy group --max-restarts 1 --oversubscribe \
                    -- env LD_PRELOAD="$MPITIME_PRELOAD" BENCH_STEPLOG="$STEPLOG" \
                    "${fail[@]}" "${heat[@]}" > "$LOG" 2>&1
            else
                ELASTIC_SNAPSHOT_PERIOD=$period ELASTIC_RESUME_MODE=never \
                    ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT=0 \
                    timeout 900 "$ELASTIC_MPIRUN" -q --max-relaunches 1 --run-dir "$RUNDIR" -n "$n" \
                    -x ELASTIC_SNAPSHOT_PERIOD -x ELASTIC_RESUME_MODE \
                    -x ELASTIC_MAX_ELASTIC_DOWN_EVENT_COUNT \
                    -x LD_PRELOAD="$MPITIME_PRELOAD" -x BENCH_STEPLOG="$STEPLOG" \
                    "${fail[@]}" "${heat[@]}" > "$LOG" 2>&1
            fi ;;
    esac
    rc=$?
    t1=$(now)
    WALL=$(elapsed "$t0" "$t1")
    CHECKSUM=$(sed -n 's/.*checksum \([0-9a-f]*\).*/\1/p' "$LOG" | tail -n 1)
    if [ $rc -ne 0 ] || [ -z "$CHECKSUM" ] || grep -q 'ballast BAD' "$LOG"; then
        bench_log "$v $kind $n x $mib MiB trial $t failed (exit $rc; see $LOG)"
        row recovery "$n" "$mib" "$v" "$t" "failed_$kind" 1 flag
        return 1
    fi
    if [ "$kind" = fail ] && ! grep -q "injected failure at step $fail_step" "$LOG"; then
        bench_log "$v $n x $mib MiB trial $t: the failure was not injected (see $LOG)"
        row recovery "$n" "$mib" "$v" "$t" failed_no_kill 1 flag
        return 1
    fi
    return 0
}

# steplost FREE FAIL: the time lost, from the two step logs (see above)
steplost() {
    awk -v a="$fail_step" -v b="$back_step" '
        FNR == 1 { f++ }
        $1 == a && !(f SUBSEP "a" in t) { t[f, "a"] = $2 }
        $1 == b && !(f SUBSEP "b" in t) { t[f, "b"] = $2 }
        END {
            if (!((1, "a") in t) || !((1, "b") in t) || !((2, "a") in t) || !((2, "b") in t)) exit 1
            printf "%.6f\n", (t[2, "b"] - t[2, "a"]) - (t[1, "b"] - t[1, "a"])
        }' "$1" "$2"
}

# pair VARIANT N MIB TRIAL: a failure-free and a failing job, their rows;
# retried once when a run fails
pair() {
    pair_once "$@" || { bench_log "retrying $1 $2 x $3 MiB trial $4"; pair_once "$@"; }
}

pair_once() {
    local v=$1 n=$2 mib=$3 t=$4 free_wall free_sum
    job "$v" free "$n" "$mib" "$t" || return 1
    free_wall=$WALL free_sum=$CHECKSUM
    job "$v" fail "$n" "$mib" "$t" || return 1
    if [ "$CHECKSUM" != "$free_sum" ]; then
        bench_log "$v $n x $mib MiB trial $t: checksum $CHECKSUM, failure-free $free_sum"
        row recovery "$n" "$mib" "$v" "$t" wrong_checksum 1 flag
        return 1
    fi
    local lost
    if ! lost=$(steplost "$scratch/steps.free" "$scratch/steps.fail"); then
        bench_log "$v $n x $mib MiB trial $t: no step times (see $scratch/steps.*)"
        row recovery "$n" "$mib" "$v" "$t" failed_no_steplog 1 flag
        return 1
    fi
    row recovery "$n" "$mib" "$v" "$t" lost_s "$lost" s
    row recovery "$n" "$mib" "$v" "$t" wall_free_s "$free_wall" s
    row recovery "$n" "$mib" "$v" "$t" wall_fail_s "$WALL" s
    row recovery "$n" "$mib" "$v" "$t" lost_wall_s "$(elapsed "$free_wall" "$WALL")" s
    case $v in
        inplace | spare)
            "$PY" - "$EV" "$n" "$mib" "$t" "$v" >> "$CSV" << 'PYEOF' ||
import json, sys
ev, n, mib, t, v = sys.argv[1:6]
e = [json.loads(l) for l in open(ev) if '"reshard_down"' in l][-1]
if v == "spare" and not e.get("spares_used"):
    sys.exit("no spare was used: %s" % e)
p = "recovery,%s,%s,%s,%s," % (n, mib, v, t)
for k in ("t_detect_ms", "t_revoke_agree_ms", "t_shrink_ms", "t_restore_ms",
          "t_handler_ms", "t_protect_ms", "t_total_ms"):
    print(p + "%s,%.3f,ms" % (k, e[k]))
print(p + "rollback_step,%d,step" % e["step"])
PYEOF
                row recovery "$n" "$mib" "$v" "$t" failed_no_event 1 flag ;;
        relaunch)
            [ -d "$RUNDIR/attempt-2" ] || row recovery "$n" "$mib" "$v" "$t" failed_no_relaunch 1 flag
            "$PY" - "$RUNDIR" "$n" "$mib" "$t" >> "$CSV" << 'PYEOF'
import glob, json, sys
rd, n, mib, t = sys.argv[1:5]
p = "recovery,%s,%s,relaunch,%s," % (n, mib, t)
evs = []
for f in sorted(glob.glob(rd + "/attempt-*/events.jsonl")):
    for l in open(f):
        try:
            evs.append(json.loads(l))
        except ValueError:
            pass
for e in evs:
    if e.get("event") == "resume":
        print(p + "resume_step,%d,step" % e["step"])
        print(p + "t_resume_restore_ms,%.3f,ms" % e["t_restore_ms"])
w = [e["t_write_ms"] for e in evs if e.get("event") == "persist" and "t_write_ms" in e]
if w:
    print(p + "t_persist_write_ms,%.3f,ms" % sorted(w)[len(w) // 2])
PYEOF
            ;;
    esac
    return 0
}

for t in $(seq "$trials"); do
    for c in $inplace_cases; do
        n=${c%%:*} mib=${c##*:}
        bench_log "trial $t: $n ranks x $mib MiB"
        pair inplace "$n" "$mib" "$t"
        if [[ " $base_cases " == *" $c "* ]]; then
            [[ " $base_variants " == *" spare "* ]] && pair spare "$n" "$mib" "$t"
            [[ " $base_variants " == *" relaunch "* ]] && [ $have_l3 = 1 ] &&
                pair relaunch "$n" "$mib" "$t"
            [[ " $base_variants " == *" restart "* ]] && pair restart "$n" "$mib" "$t"
        fi
    done
done
