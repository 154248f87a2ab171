#!/bin/bash
# b11-meshscale.sh - B11: the elastic-exec mesh protocol alone at 8-1024
# members (src/exec/mesh/, doc/mesh.md): join, fence, failure broadcast and
# heartbeat traffic, with a growth model (b11-model.py) to 10,000 nodes.
#
#   bench/b11-meshscale.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# Each trial is one run of tests/bench_mesh_scale (bench/mesh_scale.c): N
# members on 127.0.0.1, N-1 of them as threads of one process, member 1
# (interior: it has children) in a child process that is SIGKILLed.  Radix
# 8, node timeout 2 s (the defaults), 5 fences, 4 s idle.  Per trial:
#   join_ms          mesh_start of all -> the last member joined
#   fence_ms         median of the trial's 5 fences: first mesh_fence call
#                    -> last member's result (all N blobs checked)
#   lost_first_ms    SIGKILL -> first survivor's ops.lost (TCP EOF)
#   lost_last_ms     SIGKILL -> last survivor's ops.lost (the flood)
#   fence_after_loss_ms  a fence over the N-1 survivors after the repair
#   hb_Bps_median|mean|max  bytes/s each member sent while idle (heartbeats
#                    only; mesh_get_stats, message bytes without TCP/IP)
#   idle_cpu_pct, fence_cpu_util, kill_cpu_util  this process's CPU (idle:
#                    % of one core; fence, kill: share of all cores: near
#                    1 means the numbers measure the 2 cores, not the mesh)
# With --full and munged installed, also variant munge (64, 256, 1024
# members, 3 trials, a private munged): every connection authenticated by
# a munge credential (doc/mesh.md), the cost in join and repair.
# Rows: meshscale,N,,radix8|munge,TRIAL,METRIC,VALUE,UNIT; a trial that fails
# (e.g. a member judged silent because the machine was too loaded) gives a
# row failed=1, keeps its log and is retried once.  Exits 1 when a size
# has no successful trial.
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv meshscale
bench_make "$LOGDIR/build.log" bench_mesh_scale || {
    bench_log "skipped: tests/bench_mesh_scale cannot be built (no libsodium?); see $LOGDIR/build.log"
    row meshscale 0 "" skipped 0 no_sodium 1 flag
    exit 0
}
prog=$TESTS_DIR/bench_mesh_scale
if [ "$MODE" = quick ]; then
    sizes=(32 64) trials=${TRIALS:-1} idle=2
else
    sizes=(8 16 32 64 128 256 512 1024) trials=${TRIALS:-5} idle=4
fi
need=$((${sizes[-1]} * 6 + 64))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    ulimit -n "$need" 2> /dev/null ||
        bench_die "${sizes[-1]} members need about $need file descriptors; ulimit -n is $(ulimit -n)"
fi
bench_log "sizes ${sizes[*]}, $trials trials each, radix 8, node timeout 2 s"
status=0
declare -A good

# trial VARIANT N T [ARGS...]: one run, its rows; a failed run (typically a
# member judged silent on a loaded machine) is kept as a row, retried once
trial() {
    local v=$1 n=$2 t=$3 log=$LOGDIR/$1.n$2.$3.log try line fence kv k val
    shift 3
    for try in 1 2; do
        if timeout 600 "$prog" --members "$n" --radix 8 --timeout 2 --fences 5 \
            --idle "$idle" "$@" > "$log" 2>&1; then
            break
        fi
        bench_log "$v n=$n trial $t (try $try) failed: $(tail -n 1 "$log")"
        cp "$log" "$log.failed$try"
        row meshscale "$n" "" "$v" "$t" failed 1 flag
        [ $try = 2 ] && return 1
    done
    good[$v.$n]=1
    line=$(grep '^result ' "$log")
    # fence_ms=a,b,c,... -> its median
    fence=$(sed -n 's/.* fence_ms=\([0-9.,]*\) .*/\1/p' <<< "$line" | tr , '\n' | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    row meshscale "$n" "" "$v" "$t" fence_ms "$fence" ms
    for kv in $line; do
        k=${kv%%=*} val=${kv#*=}
        case $k in
            join_ms | lost_first_ms | lost_last_ms | fence_after_loss_ms | fence_issue_ms)
                row meshscale "$n" "" "$v" "$t" "$k" "$val" ms ;;
            hb_Bps_median | hb_Bps_mean | hb_Bps_max)
                row meshscale "$n" "" "$v" "$t" "$k" "$val" B/s ;;
            idle_cpu_pct) row meshscale "$n" "" "$v" "$t" "$k" "$val" "%" ;;
            fence_cpu_util | kill_cpu_util) row meshscale "$n" "" "$v" "$t" "$k" "$val" ratio ;;
            cores | fds | load1) row meshscale "$n" "" "$v" "$t" "$k" "$val" count ;;
        esac
    done
    bench_log "$v n=$n trial $t: $(sed 's/^result //' <<< "$line")"
}

for ((t = 1; t <= trials; t++)); do
    for n in "${sizes[@]}"; do
        trial radix8 "$n" "$t"
    done
done
for n in "${sizes[@]}"; do
    [ -n "${good[radix8.$n]:-}" ] || { bench_log "n=$n: no trial succeeded"; status=1; }
done

# the same with munge authentication (--full, when munged can run): a
# private munged, as tests/t5108-mesh-munge.sh starts it
if [ "$MODE" = full ] && command -v munged > /dev/null &&
    grep -q '^#define HAVE_MUNGE 1' "$BUILD/config.h" 2> /dev/null; then
    mdir=$(mktemp -d /tmp/b11.XXXXXX)
    dd if=/dev/urandom of="$mdir/key" bs=1024 count=1 2> /dev/null && chmod 400 "$mdir/key"
    munged -F --force --socket="$mdir/sock" --key-file="$mdir/key" --pid-file="$mdir/pid" \
        --log-file="$mdir/log" --seed-file="$mdir/seed" --num-threads=2 < /dev/null > /dev/null 2>&1 &
    mpid=$!
    for i in $(seq 100); do
        munge -n -S "$mdir/sock" 2> /dev/null | unmunge -S "$mdir/sock" > /dev/null 2>&1 && break
        sleep 0.1
    done
    if kill -0 "$mpid" 2> /dev/null; then
        for ((t = 1; t <= (trials < 3 ? trials : 3); t++)); do
            for n in 64 256 1024; do
                trial munge "$n" "$t" --munge "$mdir/sock" || status=1
            done
        done
    else
        bench_log "munge variant skipped: munged did not start ($(tail -n 1 "$mdir/log" 2> /dev/null))"
    fi
    kill "$mpid" 2> /dev/null
    wait "$mpid" 2> /dev/null
    rm -rf "$mdir"
fi
"$PY" "$BENCH_DIR/b11-model.py" "$CSV" > "$OUT/meshscale.md" || status=1
bench_log "model: $OUT/meshscale.md"
exit $status
