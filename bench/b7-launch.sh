#!/bin/bash
# b7-launch.sh - B7: launch overhead of elastic-exec (as mpirun's per-rank
# wrapper) and of elastic-mpirun, next to plain mpirun, same program, same
# mpirun options, measured with hyperfine.
#
#   bench/b7-launch.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# The program is tests/bench_mpi_hello (MPI_Init, a barrier, MPI_Finalize),
# so launch costs are as large a share of the run as they can be.  The
# mpirun options are exactly those elastic-mpirun gives mpirun (taken from
# `elastic-mpirun --dry-run`, without its -x exports), so the three
# commands differ only in what is measured:
#   mpirun          mpirun OPTS -n 8 bench_mpi_hello
#   elastic-exec    mpirun OPTS -n 8 elastic-exec -- bench_mpi_hello
#   elastic-mpirun  elastic-mpirun -n 8 --run-dir D bench_mpi_hello
#                   (D removed before each run by hyperfine's --prepare)
# hyperfine runs each command --runs times after a warm-up; the three
# alternate in rounds (TRIALS rounds) so a change in machine load hits all.
# elastic-mpirun keeps what it learned of mpirun (`mpirun --version`,
# ompi_info) in ~/.cache/elastic: the warm-up (or the first run in quick
# mode) fills it, as any earlier use of elastic-mpirun does.
# Next to the wall time of every run, the CPU time of each command (user +
# sys of the launcher and every process it waited for: the ranks, the
# wrappers, their guardians), as hyperfine gives it: the mean over a
# round's runs, one row per round (trial = the round).  On a shared machine
# the CPU time moves far less with the load than the wall time, and on two
# cores shared by eight ranks the wall time of the launch is mostly CPU.
# Rows: launch,8,,mpirun|elastic-exec|elastic-mpirun,RUN,wall_s,SECONDS,s
#       launch,8,,mpirun|elastic-exec|elastic-mpirun,ROUND,cpu_s,SECONDS,s
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv launch
command -v hyperfine > /dev/null || bench_die "hyperfine is not installed (apt-get install hyperfine)"
app=$TESTS_DIR/bench_mpi_hello
[ -x "$app" ] || bench_die "$app is missing (make -C $BUILD/tests bench-programs)"
n=8
if [ "$MODE" = quick ]; then
    rounds=${TRIALS:-1} runs=2 warmup=0
else
    rounds=${TRIALS:-5} runs=4 warmup=1
fi
rundir=$OUT/scratch/b7-run
mkdir -p "$OUT/scratch"

# mpirun's options as elastic-mpirun builds them
dry=$("$ELASTIC_MPIRUN" -q --dry-run -n "$n" --run-dir "$rundir" "$app" 2> "$LOGDIR/dry-run.err" | head -n 1)
[ -n "$dry" ] || { cat "$LOGDIR/dry-run.err" >&2; bench_die "elastic-mpirun --dry-run printed nothing"; }
echo "$dry" > "$LOGDIR/dry-run.txt"
read -r -a words <<< "$dry"
opts=()
for ((i = 1; i < ${#words[@]}; i++)); do
    w=${words[$i]}
    case $w in
        -x) i=$((i + 1)) ;;
        -n) i=$((i + 1)) ;;
        "$ELASTIC_EXEC" | */elastic-exec) break ;;
        *) opts+=("$w") ;;
    esac
done
plain="$MPIRUN ${opts[*]} -n $n $app"
wrapped="$MPIRUN ${opts[*]} -n $n $ELASTIC_EXEC -- $app"
emr="$ELASTIC_MPIRUN -q -n $n --run-dir $rundir $app"
printf '%s\n' "mpirun: $plain" "elastic-exec: $wrapped" "elastic-mpirun: $emr" > "$LOGDIR/commands.txt"
bench_log "$rounds rounds x $runs runs of 3 commands, $n ranks"

for r in $(seq "$rounds"); do
    json=$LOGDIR/round$r.json
    if ! hyperfine -N --style basic --warmup "$warmup" --runs "$runs" \
        --prepare "rm -rf $rundir" --export-json "$json" \
        -n mpirun "$plain" -n elastic-exec "$wrapped" -n elastic-mpirun "$emr" \
        > "$LOGDIR/round$r.txt" 2>&1; then
        bench_log "FAILED: hyperfine round $r (see $LOGDIR/round$r.txt)"
        row launch "$n" "" mpirun "$r" failed 1 flag
        continue
    fi
    "$PY" - "$json" "$n" "$r" "$runs" >> "$CSV" << 'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
n, r, runs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for res in d["results"]:
    for i, t in enumerate(res["times"]):
        print("launch,%s,,%s,%d,wall_s,%.6f,s" % (n, res["command"], (r - 1) * runs + i + 1, t))
    # hyperfine gives CPU time only as a mean over the round's runs
    print("launch,%s,,%s,%d,cpu_s,%.6f,s" % (n, res["command"], r, res["user"] + res["system"]))
PYEOF
done
rm -rf "$rundir"
