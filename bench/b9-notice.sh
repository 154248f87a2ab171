#!/bin/bash
# b9-notice.sh - B9: failure notice latency (a rank is SIGKILLed -> the
# survivors' blocked MPI call returns the ULFM error) and MPI_Init time,
# under elastic's hosted PMIx server and under mpirun --with-ft ulfm, same
# program, same ranks, shared memory, runs alternating.
#
#   bench/b9-notice.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# The program is tests/pmix/ft_app in barrier mode with a self-killing
# victim (rank 2 of 4): after MPI_Init every rank enters MPI_Barrier; the
# victim waits 20 ms, prints its CLOCK_MONOTONIC time and raises SIGKILL;
# each survivor prints the time its MPI_Barrier returned
# MPIX_ERR_PROC_FAILED (or _REVOKED), then shrinks.  Per run:
#   first_ms  first survivor's error - kill      last_ms  last survivor's
#   init_ms   slowest rank's MPI_Init            shrink_ms  slowest shrink
#   job_ms    launcher start to exit
# Variants:
#   elastic-exec  elastic-exec --nproc-per-node 4 --wireup pmix (the hosted
#                 server inside elastic-exec), when this build has it;
#   pmix-launch   tests/pmix/pmix-launch, the test launcher over the same
#                 server code (src/exec/pmix/pmix_*.c);
#   mpirun        mpirun --with-ft ulfm -n 4 (PRRTE), the baseline.
# Rows: notice,4,,VARIANT,RUN,first_ms|last_ms|init_ms|shrink_ms|job_ms,MS,ms
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv notice
bench_need_ulfm notice
bench_make "$LOGDIR/build.log" pmix/pmix-launch pmix/ft_app || {
    bench_log "skipped: pmix/pmix-launch and pmix/ft_app cannot be built (no PMIx?); see $LOGDIR/build.log"
    row notice 0 "" skipped 0 no_pmix 1 flag
    exit 0
}
launch=$TESTS_DIR/pmix/pmix-launch
app=$TESTS_DIR/pmix/ft_app
ranks=4 victim=2
if [ "$MODE" = quick ]; then
    runs=${TRIALS:-2}
else
    runs=${TRIALS:-20}
fi
variants=(pmix-launch mpirun)
if "$ELASTIC_EXEC" --help 2>&1 | grep -q -- '--wireup'; then
    variants=(elastic-exec pmix-launch mpirun)
fi
bench_log "${variants[*]}: $ranks ranks, victim $victim, $runs runs each"

# one VARIANT RUN: run the job once, append its rows
one() {
    local v=$1 i=$2 out=$LOGDIR/$1.$2.log t0 t1 rc
    local cmd=()
    case $v in
        elastic-exec) cmd=("$ELASTIC_EXEC" --nproc-per-node "$ranks" --wireup pmix
            --restart-policy in-place --mpi-btl sm -- "$app" -s -v "$victim") ;;
        pmix-launch) cmd=("$launch" -n "$ranks" -- "$app" -s -v "$victim") ;;
        mpirun) cmd=("$MPIRUN" --with-ft ulfm -n "$ranks" --oversubscribe --bind-to none
            --mca pml ob1 --mca btl self,sm --mca coll ^han --mca async_mpi_finalize 1
            "$app" -s -v "$victim") ;;
    esac
    t0=$(date +%s%N)
    timeout 30 "${cmd[@]}" > "$out" 2>&1
    rc=$?
    t1=$(date +%s%N)
    if ! grep -q '^ft-app: ok' "$out"; then
        bench_log "$v run $i failed (exit $rc; see $out)"
        row notice "$ranks" "" "$v" "$i" failed 1 flag
        return
    fi
    if [ $rc -ne 0 ]; then
        # recovered, then the job did not end cleanly (a hang in
        # MPI_Finalize is killed after 30 s): the latencies stand, the job
        # time does not
        bench_log "$v run $i: recovered but exit $rc (see $out)"
        row notice "$ranks" "" "$v" "$i" unclean_exit 1 flag
        t1=
    fi
    awk -v job="${t1:+$(((t1 - t0) / 1000))}" -v v="$v" -v i="$i" -v n="$ranks" '
        /^kill 1 / { sub("t=", "", $4); kill = $4 }
        /^error 1 / { sub("t=", "", $5); e = $5; if (first == "" || e < first) first = e; if (e > last) last = e }
        /^init_max_ms=/ { sub("init_max_ms=", "", $1); init = $1 }
        /^shrunk 1 / { sub("shrink_ms=", "", $7); if ($7 > shrink) shrink = $7 }
        END {
            p = "notice," n ",," v "," i ","
            printf "%sfirst_ms,%.3f,ms\n%slast_ms,%.3f,ms\n", p, (first - kill) / 1e6, p, (last - kill) / 1e6
            printf "%sinit_ms,%.3f,ms\n%sshrink_ms,%.3f,ms\n", p, init, p, shrink
            if (job > 0) printf "%sjob_ms,%.3f,ms\n", p, job / 1000
        }' "$out" >> "$CSV"
}

for i in $(seq "$runs"); do
    for v in "${variants[@]}"; do
        one "$v" "$i"
    done
done
