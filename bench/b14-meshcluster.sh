#!/bin/bash
# b14-meshcluster.sh - B14: elastic-exec's mesh mode across the emulated
# 3-node Slurm cluster (scripts/slurm-cluster.sh) against the launchers it
# replaces, all in one run on one cluster, variants interleaved.
#
#   bench/b14-meshcluster.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# (a) notice: a rank SIGKILLed -> the survivors' blocked MPI call returns
#     the ULFM error.  tests/pmix/ft_app in barrier mode, 6 ranks (2 per
#     node), world rank 3 (on n2) kills itself 20 ms after MPI_Init and
#     prints its CLOCK_MONOTONIC time; each survivor prints when its
#     MPI_Barrier failed (the nodes are namespaces of one kernel: one clock).
#       mesh    srun -N3 --ntasks-per-node=1 elastic-exec --nproc-per-node 2
#               (mesh mode: the members' hosted PMIx servers and their mesh)
#       mpirun  salloc -N3 --ntasks-per-node=2 mpirun --with-ft ulfm -n 6
#               (PRRTE, its daemons started through srun)
#     rows: first_ms (first survivor), first_remote_ms (first survivor on
#     another node than the victim), last_ms, shrink_ms, job_ms
# (b) node: every process of n2 SIGKILLed (one kill(1) of the pids that
#     `slurm-cluster.sh pids` lists, then kill-node) or n2's link cut
#     (veth down) while heat2d (6 ranks, 2 per node) computes -> every
#     survivor computing again.
#       mesh-kill, mesh-cut  srun ... elastic-exec --node-timeout 1 heat2d:
#               recovery in place (6 -> 4); "back" is the latest survivor's
#               libelastic reshard_down event (each rank logs it with
#               ELASTIC_LOG=info once its recovery, restore included, is
#               done; ms resolution) - the kill; "detect" the later
#               of the other members' node_lost events - the kill
#       relaunch  sbatch -N3 elastic-mpirun --np-min 4 -n 6 heat2d
#               (mpirun --with-ft ulfm): PRRTE aborts on a daemon's loss,
#               elastic-mpirun relaunches on n1, n3 from the L3 (HDF5)
#               snapshot; "back" is when "[n1:0] resumed from step" appears
#               in the job's output (polled every 20 ms) - the kill
#     rows: back_ms, back_rank0_ms (mesh: rank 0's event), detect_ms
#     (mesh), t_total_ms (mesh: libelastic's slowest in-place recovery),
#     survivors_logged (mesh: reshard_down events seen, 4 expected),
#     checksum_ok, exit_status
# (c) init: MPI_Init of ft_app (no victim), 3 nodes x 2 ranks (and x 4 with
#     --full): mesh; srun --mpi=pmix of the bare program (srun-pmix) and of
#     `elastic-exec --wireup inherit` (srun-inherit, wrapper mode); mpirun.
#     With B14_EXEC_BEFORE=PATH (another build's elastic-exec), also
#     mesh-before: the mesh line with that binary, interleaved (a change's
#     before and after in one run).
#     rows: init_ms (slowest rank's MPI_Init, measured by ft_app),
#     exec_init_ms (mesh: the slowest member's mpi_initialized init_ms,
#     from its ranks' start), job_ms (launcher start to exit)
# Rows: meshcluster,RANKS,,notice|node|init:VARIANT,TRIAL,METRIC,VALUE,UNIT
# plus meshcluster,,,load,PHASE,loadavg1,L,load.  b14-report.py writes
# OUT/meshcluster.md (medians, min, max).  Needs root, Slurm, munge and
# the netns cluster, ULFM; otherwise one "skipped" row and exit 0.
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_csv meshcluster
bench_need_ulfm meshcluster
SLURM_CLUSTER_SH=$TOP_SRCDIR/scripts/slurm-cluster.sh
skip() {
    bench_log "skipped: $1"
    row meshcluster "" "" skipped 0 "$2" 1 flag
    exit 0
}
for c in slurmctld slurmd srun salloc sbatch scontrol munged; do
    command -v "$c" > /dev/null 2>&1 || skip "$c not found (no Slurm)" no_slurm
done
[ "$(id -u)" -eq 0 ] || skip "the emulated cluster needs root" no_root
"$ELASTIC_EXEC" --help 2>&1 | grep -q -- '--node-timeout' || skip "elastic-exec has no mesh mode" no_mesh
bench_make "$LOGDIR/build.log" pmix/ft_app || skip "tests/pmix/ft_app cannot be built" no_pmix
APP=$TESTS_DIR/pmix/ft_app
if [ "$MODE" = quick ]; then
    NA=${TRIALS:-1} NB=${TRIALS:-1} NC=${TRIALS:-1} SIZES="2"
else
    NA=${TRIALS:-7} NB=${TRIALS:-3} NC=${TRIALS:-5} SIZES="2 4"
fi
PATH=$(dirname "$MPIRUN"):$PATH
export PATH
export OMPI_MCA_btl=self,tcp OMPI_MCA_pml=ob1
export ELASTIC_MESH_SECRET=b14.$$.$RANDOM
MESH=(--oversubscribe --mpi-btl tcp --node-timeout 1)
# shellcheck disable=SC2054 # "self,tcp" is one argument
MPIRUN_ARGS=(--with-ft ulfm --oversubscribe --bind-to none --mca pml ob1 --mca btl self,tcp
    --mca coll ^han --mca async_mpi_finalize 1)

CLUSTER_DIR=$(mktemp -d /tmp/b14.XXXXXX)
cleanup() {
    "$SLURM_CLUSTER_SH" down "$CLUSTER_DIR" > "$LOGDIR/down.log" 2>&1
    rm -rf "$CLUSTER_DIR"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
"$SLURM_CLUSTER_SH" up "$CLUSTER_DIR" --nodes 3 --cpus 4 > "$LOGDIR/up.log" 2>&1 ||
    { tail -n 20 "$LOGDIR/up.log" >&2; bench_die "the emulated cluster did not come up (see $LOGDIR/up.log)"; }
[ "$(sed -n 's/^MODE=//p' "$CLUSTER_DIR/cluster.env")" = netns ] ||
    skip "the cluster runs in local mode (every node on 127.0.0.1): no node can be cut" no_netns
PREFIX=$(sed -n 's/^PREFIX=//p' "$CLUSTER_DIR/cluster.env")
ctl() { "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" "$@"; }
now_ms() { date +%s%3N; }
# wait_until TIMEOUT CMD...: poll CMD every 20 ms
wait_until() {
    local deadline=$(($(now_ms) + $1 * 1000))
    shift
    until "$@"; do
        [ "$(now_ms)" -lt "$deadline" ] || return 1
        sleep 0.02
    done
}
load_row() { row meshcluster "" "" load "$1" loadavg1 "$(cut -d' ' -f1 /proc/loadavg)" load; }
node_state() { ctl scontrol -o show node "$1" 2> /dev/null | sed -n 's/.* State=\([A-Z_]*\).*/\1/p'; }
nodes_idle() {
    local n
    for n in n1 n2 n3; do
        node_state "$n" | grep -Eqx 'IDLE' || return 1
    done
}
bench_log "cluster $PREFIX up; (a) $NA, (b) $NB, (c) $NC trials per variant"
load_row start

# --- (a) notice --------------------------------------------------------
# notice_one VARIANT TRIAL
notice_one() {
    local v=$1 i=$2 out=$LOGDIR/notice.$1.$2.log t0 t1 rc cmd
    case $v in
        mesh) cmd=(srun --no-kill -N3 --ntasks-per-node=1 "$ELASTIC_EXEC" --nproc-per-node 2
            "${MESH[@]}" "$APP" -s -v 3) ;;
        mpirun) cmd=(salloc -N3 --ntasks-per-node=2 "$MPIRUN" -n 6 "${MPIRUN_ARGS[@]}" "$APP" -s -v 3) ;;
    esac
    t0=$(date +%s%N)
    timeout --kill-after=5 60 "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" "${cmd[@]}" > "$out" 2>&1
    rc=$?
    t1=$(date +%s%N)
    if ! grep -aq '^ft-app: ok size 6 -> 5' "$out"; then
        bench_log "notice $v trial $i failed (exit $rc; see $out)"
        row meshcluster 6 "" "notice:$v" "$i" failed 1 flag
        return
    fi
    [ $rc -eq 0 ] || { row meshcluster 6 "" "notice:$v" "$i" unclean_exit 1 flag; t1=; }
    # ranks are placed in blocks of 2 per node (n1: 0 1, n2: 2 3, n3: 4 5)
    tr -d '\0' < "$out" | awk -v job="${t1:+$(((t1 - t0) / 1000))}" -v v="notice:$v" -v i="$i" '
        /^kill 1 / { victim = $3; sub("t=", "", $4); kill = $4 }
        /^error 1 / { r = $3; sub("t=", "", $5); e[r] = $5 }
        /^shrunk 1 / { sub("shrink_ms=", "", $7); if ($7 > shrink) shrink = $7 }
        END {
            for (r in e) {
                d = e[r] - kill
                if (first == "" || d < first) first = d
                if (d > last) last = d
                if (int(r / 2) != int(victim / 2) && (rem == "" || d < rem)) rem = d
            }
            p = "meshcluster,6,," v "," i ","
            printf "%sfirst_ms,%.3f,ms\n%sfirst_remote_ms,%.3f,ms\n", p, first / 1e6, p, rem / 1e6
            printf "%slast_ms,%.3f,ms\n%sshrink_ms,%.3f,ms\n", p, last / 1e6, p, shrink
            if (job > 0) printf "%sjob_ms,%.3f,ms\n", p, job / 1000
        }' >> "$CSV"
}
bench_log "(a) notice: mesh vs mpirun --with-ft ulfm, 6 ranks, rank 3 (n2) killed"
for i in $(seq "$NA"); do
    for v in mesh mpirun; do notice_one "$v" "$i"; done
done
load_row notice

# --- (c) init ----------------------------------------------------------
# init_one VARIANT PERNODE TRIAL
init_one() {
    local v=$1 k=$2 i=$3 n=$(($2 * 3)) out=$LOGDIR/init.$1.$2.$3.log ev=$LOGDIR/init.$1.$2.$3.ev t0 t1 rc cmd x
    rm -f "$ev"
    case $v in
        mesh) cmd=(srun --no-kill -N3 --ntasks-per-node=1 "$ELASTIC_EXEC" --nproc-per-node "$k"
            "${MESH[@]}" --event-log "$ev" "$APP") ;;
        mesh-before) cmd=(srun --no-kill -N3 --ntasks-per-node=1 "$B14_EXEC_BEFORE" --nproc-per-node "$k"
            "${MESH[@]}" --event-log "$ev" "$APP") ;;
        srun-pmix) cmd=(srun --mpi=pmix -N3 --ntasks-per-node="$k" "$APP") ;;
        srun-inherit) cmd=(srun --mpi=pmix -N3 --ntasks-per-node="$k" "$ELASTIC_EXEC" --wireup inherit "$APP") ;;
        mpirun) cmd=(salloc -N3 --ntasks-per-node="$k" "$MPIRUN" -n "$n" "${MPIRUN_ARGS[@]}" "$APP") ;;
    esac
    t0=$(date +%s%N)
    timeout --kill-after=5 60 "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" "${cmd[@]}" > "$out" 2>&1
    rc=$?
    t1=$(date +%s%N)
    if [ $rc -ne 0 ] || ! grep -aq "^ft-app: ok size $n -> $n" "$out"; then
        bench_log "init $v ${n} ranks trial $i failed (exit $rc; see $out)"
        row meshcluster "$n" "" "init:$v" "$i" failed 1 flag
        return
    fi
    x=$(tr -d '\0' < "$out" | sed -n 's/^init_max_ms=\([0-9.]*\) .*/\1/p' | head -n 1)
    row meshcluster "$n" "" "init:$v" "$i" init_ms "$x" ms
    row meshcluster "$n" "" "init:$v" "$i" job_ms "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e6 }')" ms
    if [ "$v" = mesh ] || [ "$v" = mesh-before ]; then
        x=$(grep -h '"event":"mpi_initialized"' "$ev" | sed -n 's/.*"init_ms":\([0-9.]*\).*/\1/p' | sort -g | tail -n 1)
        [ -n "$x" ] && row meshcluster "$n" "" "init:$v" "$i" exec_init_ms "$x" ms
    fi
}
INIT_VARIANTS=(mesh srun-pmix srun-inherit mpirun)
ctl srun --mpi=list 2>&1 | grep -q pmix || INIT_VARIANTS=(mesh mpirun)
if [ -n "${B14_EXEC_BEFORE:-}" ]; then
    [ -x "$B14_EXEC_BEFORE" ] || bench_die "B14_EXEC_BEFORE: '$B14_EXEC_BEFORE' is not an executable"
    INIT_VARIANTS=(mesh mesh-before "${INIT_VARIANTS[@]:1}")
fi
for k in $SIZES; do
    bench_log "(c) init: ${INIT_VARIANTS[*]}, $((k * 3)) ranks"
    for i in $(seq "$NC"); do
        for v in "${INIT_VARIANTS[@]}"; do init_one "$v" "$k" "$i"; done
    done
done
load_row init

# --- (b) node ----------------------------------------------------------
HEAT_ARGS=(--nx 64 --ny 48 --steps 2000 --progress 50 --sleep 2)
REF=$("$HEAT2D" "${HEAT_ARGS[@]}" 2>&1 | sed -n 's/^checksum //p')
[ -n "$REF" ] || bench_die "heat2d does not run as a singleton ($HEAT2D)"
cat > "$CLUSTER_DIR/em.sh" << EOF
#!/bin/bash
"$ELASTIC_MPIRUN" --run-dir "\$RUN_DIR" --detector 2,30 --prtemca plm_slurm_args --overlap \\
    '--exec-opt=--log-line-prefix-template=[\${hostname}:\${rank}] ' "\$@"
rc=\$?
echo "elastic-mpirun exit \$rc"
exit \$rc
EOF
chmod +x "$CLUSTER_DIR/em.sh"
# restore_n2: n2 back in service (link up, slurmd started, resumed, idle)
restore_n2() {
    ip -n "$PREFIX-ctl" link set veth2 up 2> /dev/null
    "$SLURM_CLUSTER_SH" start-node "$CLUSTER_DIR" n2 > /dev/null 2>&1
    ctl scontrol update nodename=n2 state=resume > /dev/null 2>&1
    wait_until 120 nodes_idle || bench_log "n2 not idle after 120 s: $(node_state n2)"
}
iso_ms() { date -d "$1" +%s%3N; }
# node_one VARIANT TRIAL
node_one() {
    local v=$1 i=$2 out=$LOGDIR/node.$1.$2.log ev=$LOGDIR/node.$1.$2.ev rc=x tk t pid x
    rm -f "$ev"
    rm -rf "$CLUSTER_DIR/run.$v.$i" "$CLUSTER_DIR/snap.$v.$i"
    if [ "$v" = relaunch ]; then
        RUN_DIR=$CLUSTER_DIR/run.$v.$i ctl sbatch --parsable --no-kill -N3 --ntasks-per-node=2 \
            -o "$out" "$CLUSTER_DIR/em.sh" --np-min 4 -n 6 "$HEAT2D" "${HEAT_ARGS[@]}" \
            --persist-period 100 --snapshot-dir "$CLUSTER_DIR/snap.$v.$i" > "$out.job" 2>&1
        wait_until 120 grep -saq '^\[n1:0\] step 300$' "$out"
    else
        (
            ELASTIC_LOG=info ELASTIC_EVENT_LOG=$ev timeout --kill-after=10 180 "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" \
                srun --no-kill -N3 --ntasks-per-node=1 "$ELASTIC_EXEC" --nproc-per-node 2 "${MESH[@]}" \
                "$HEAT2D" "${HEAT_ARGS[@]}" > "$out" 2>&1
            echo $? > "$out.rc"
        ) &
        pid=$!
        wait_until 120 grep -aq '^step 300$' "$out"
    fi || {
        bench_log "node $v trial $i: the job did not reach step 300 (see $out)"
        row meshcluster 6 "" "node:$v" "$i" failed 1 flag
        [ "$v" = relaunch ] && ctl scancel "$(cat "$out.job")"
        [ -n "${pid:-}" ] && wait "$pid"
        restore_n2
        return
    }
    if [ "$v" = mesh-cut ]; then
        tk=$(now_ms)
        ip -n "$PREFIX-ctl" link set veth2 down
    else
        # the node's processes listed first, then SIGKILLed in one kill(1)
        # (kill-node lists them itself, ~0.1 s here, before it kills);
        # kill-node then gets any that started in between
        x=$("$SLURM_CLUSTER_SH" pids "$CLUSTER_DIR" n2)
        tk=$(now_ms)
        # shellcheck disable=SC2086 # a list of pids
        kill -KILL $x 2> /dev/null
        "$SLURM_CLUSTER_SH" kill-node "$CLUSTER_DIR" n2 > /dev/null 2>&1
    fi
    if [ "$v" = relaunch ]; then
        if wait_until 120 grep -saq '^\[n1:0\] resumed from step' "$out"; then
            t=$(now_ms)
            row meshcluster 6 "" "node:$v" "$i" back_ms $((t - tk)) ms
        else
            bench_log "node $v trial $i: not resumed within 120 s (see $out)"
            row meshcluster 6 "" "node:$v" "$i" failed 1 flag
        fi
        wait_until 180 grep -aq '^elastic-mpirun exit' "$out"
        rc=$(sed -n 's/^elastic-mpirun exit //p' "$out")
    else
        wait "$pid"
        rc=$(cat "$out.rc" 2> /dev/null)
        # libelastic's reshard_down of every survivor (ELASTIC_LOG=info: each
        # rank logs its events to stderr; only rank 0 writes the event log),
        # elastic-exec's node_lost on the two other members
        tr -d '\0' < "$out" | grep -a '"event":"reshard_down"' | sed 's/^[^{]*//' > "$out.reshard"
        x=$(wc -l < "$out.reshard")
        if [ "$x" -ge 1 ] && grep -aq '^resharded at step [0-9]*: world 6 -> 4$' "$out"; then
            t=$(sed -n 's/.*"time":"\([^"]*\)".*/\1/p' "$out.reshard" | sort | tail -n 1)
            row meshcluster 6 "" "node:$v" "$i" back_ms $(($(iso_ms "$t") - tk)) ms
            row meshcluster 6 "" "node:$v" "$i" survivors_logged "$x" count
            x=$(sed -n 's/.*"t_total_ms":\([0-9.]*\).*/\1/p' "$out.reshard" | sort -g | tail -n 1)
            row meshcluster 6 "" "node:$v" "$i" t_total_ms "$x" ms
            t=$(grep -h '"event":"reshard_down"' "$ev" | sed -n 's/.*"time":"\([^"]*\)".*/\1/p' | head -n 1)
            [ -n "$t" ] && row meshcluster 6 "" "node:$v" "$i" back_rank0_ms $(($(iso_ms "$t") - tk)) ms
        else
            bench_log "node $v trial $i: no in-place recovery 6 -> 4 (exit $rc; see $out, $ev)"
            row meshcluster 6 "" "node:$v" "$i" failed 1 flag
        fi
        t=$(grep -h '"event":"node_lost"' "$ev" 2> /dev/null | grep -v '"host":"n2"' |
            sed -n 's/.*"ts":\([0-9.]*\),.*/\1/p' | sort -g | tail -n 1)
        [ -n "$t" ] && row meshcluster 6 "" "node:$v" "$i" detect_ms \
            "$(awk -v a="$tk" -v b="$t" 'BEGIN { printf "%.0f", b * 1000 - a }')" ms
    fi
    x=0
    [ "$(tr -d '\0' < "$out" | sed -n 's/^\(\[n1:0\] \)\{0,1\}checksum //p' | tail -n 1)" = "$REF" ] && x=1
    row meshcluster 6 "" "node:$v" "$i" checksum_ok "$x" flag
    row meshcluster 6 "" "node:$v" "$i" exit_status "${rc:-none}" code
    restore_n2
}
bench_log "(b) node: mesh-kill, mesh-cut, relaunch (elastic-mpirun), 6 ranks, n2 lost at step 300"
for i in $(seq "$NB"); do
    for v in mesh-kill mesh-cut relaunch; do node_one "$v" "$i"; done
done
load_row end
"$PY" "$BENCH_DIR/b14-report.py" "$OUT" || bench_log "b14-report.py failed"
