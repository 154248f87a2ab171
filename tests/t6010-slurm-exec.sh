#!/bin/bash
# t6010-slurm-exec.sh - `srun --mpi=pmix elastic-exec ./heat2d` on the
# emulated cluster: each Slurm task is elastic-exec in wrapper mode, its
# worker is an MPI rank wired up by Slurm's own PMIx server (slurmstepd),
# across two nodes.
#
#   - 8 ranks (--ntasks-per-node=4) end with heat2d's failure-free checksum;
#     console lines carry the ${hostname}:${rank} prefix;
#   - --bind core places each worker by its SLURM_LOCALID: the cpus a
#     worker really has are the plan's for its local rank;
#   - a worker's error file reaches the failure report with its node;
#   - a SIGKILLed rank: Slurm's PMIx plugin kills the whole step (no
#     in-place recovery and no restart under plain srun, doc/slurm.md);
#   - preemption: `scancel -s USR1` and `scancel -s TERM` make the ranks
#     suspend to an HDF5 snapshot and srun end with 75; the batch script
#     requeues itself, and the requeued job resumes from the snapshot and
#     ends with the failure-free checksum.
. "${srcdir:-.}/lib/slurm.sh"

slurm_require
build=$(cd "${top_builddir:-..}" && pwd)
EXEC=$build/src/exec/elastic-exec
HEAT=$build/examples/heat2d
[ -x "$EXEC" ] || skip_all "elastic-exec is not built ($EXEC)"
[ -x "$HEAT" ] || skip_all "heat2d is not built: no MPI in this configuration ($HEAT)"
slurm_mpi_env
# one wrapper per rank, as before the mesh (mesh mode, the default under
# srun, is t6020's)
export ELASTIC_WIREUP=inherit
tmp=$(mktemp -d /tmp/t6010.XXXXXX)
# heat2d's failure-free result, by a singleton run: the field, and so the
# checksum, is the same for any number of ranks
HEAT_ARGS="--nx 64 --ny 48"
STEPS=150
ref=$("$HEAT" $HEAT_ARGS --steps $STEPS 2>&1 | sed -n 's/^checksum //p')
ref1=$("$HEAT" $HEAT_ARGS --steps 50 2>&1 | sed -n 's/^checksum //p')
[ -n "$ref" ] || {
    echo "not ok 1 - heat2d runs as a singleton"
    "$HEAT" $HEAT_ARGS --steps $STEPS 2>&1 | sed 's/^/# /'
    exit 1
}

cluster_up 2 --cpus 4
rc=$?
trap 'cluster_down > /dev/null; [ "$tap_failed" -eq 0 ] && rm -rf "$tmp"' EXIT
ok $rc "2-node cluster up (4 CPUs each)" || {
    done_testing
    exit 1
}
slurm_has_pmix || {
    skip "Slurm has no pmix plugin (srun --mpi=list): the MPI steps cannot run"
    done_testing
    exit 0
}
# srun ARGS...: a job step, its output in $tmp/out, its exit status in $SRUN_RC
srun_step() {
    SRUN_RC=0
    timeout --kill-after=10 300 "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" srun "$@" > "$tmp/out" 2>&1 || SRUN_RC=$?
}
prefix='--log-line-prefix-template=[${hostname}:${rank}] '

# 1. eight MPI ranks under elastic-exec, wired up by Slurm's PMIx
srun_step -N2 --ntasks-per-node=4 --mpi=pmix "$EXEC" "$prefix" --bind core --oversubscribe \
    "$HEAT" $HEAT_ARGS --steps 50
is "$SRUN_RC" 0 "srun -N2 --ntasks-per-node=4 --mpi=pmix elastic-exec heat2d: exit 0" || diag "$(tail -n 20 "$tmp/out")"
grep -q '^\[n1:0\] heat2d: 64x48 grid, 50 steps, 8 ranks' "$tmp/out"
ok $? "8 ranks in one MPI job across n1, n2 (rank 0's line prefixed [n1:0])"
is "$(tr -d '\0' < "$tmp/out" | sed -n 's/^\[n1:0\] checksum //p')" "$ref1" "the failure-free checksum ($ref1)"

# 2. binding from SLURM_LOCALID: what each worker really got is the plan
cat > "$tmp/where" << 'EOF'
#!/bin/sh
echo "rank $RANK local $LOCAL_RANK localid $SLURM_LOCALID host $(hostname) cpus $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
EOF
chmod +x "$tmp/where"
srun_step -N2 --ntasks-per-node=4 "$EXEC" --bind core --oversubscribe --print-binding
cp "$tmp/out" "$tmp/plan"
srun_step -N2 --ntasks-per-node=4 "$EXEC" --bind core --oversubscribe "$tmp/where"
cp "$tmp/out" "$tmp/where.out"
bad=0
for r in 0 1 2 3 4 5 6 7; do
    set -- $(grep "^rank $r " "$tmp/where.out")
    # rank R local L localid L' host H cpus C
    [ "$4" = "$(($r % 4))" ] && [ "$6" = "$4" ] || bad=1
    [ "$8" = "n$(($r / 4 + 1))" ] || bad=1
    plan=$(sed -n "s/^rank $r local $4 cpus \([^ ]*\) .*/\1/p" "$tmp/plan")
    [ -n "$plan" ] && [ "${10}" = "$plan" ] || bad=1
done
ok $bad "--bind core: each worker's LOCAL_RANK is its SLURM_LOCALID and its cpus are the plan's for it" \
    || diag "plan:" "$(cat "$tmp/plan")" "workers:" "$(sort "$tmp/where.out")"

# 3. error files: rank 5 (on n2) records why it fails; the report names it
cat > "$tmp/errw" << 'EOF'
#!/bin/sh
[ "$RANK" = 5 ] || exit 0
printf '{"message": {"message": "ValueError: rank five cannot go on", "extraInfo": {"timestamp": "%s"}}}\n' "$(date +%s)" > "$ELASTIC_ERROR_FILE"
exit 3
EOF
chmod +x "$tmp/errw"
srun_step -N2 --ntasks-per-node=4 "$EXEC" "$prefix" --log-dir "$tmp/logs" "$tmp/errw"
is "$SRUN_RC" 3 "a worker's exit code 3 comes back through srun"
sed -n '/Root Cause/,/====/p' "$tmp/out" > "$tmp/report"
grep -q 'host *: n2' "$tmp/report" && grep -q 'rank *: 5 (local_rank: 1)' "$tmp/report" \
    && grep -q 'message *: ValueError: rank five cannot go on' "$tmp/report"
ok $? "the failure report names rank 5 on n2 and the message from its error file" || diag "$(cat "$tmp/out")"
f=$(sed -n 's/^ *error_file *: //p' "$tmp/report")
case $f in "$tmp/logs/"*) grep -q 'rank five' "$f" ;; *) false ;; esac
ok $? "the error file is kept under --log-dir ($f)"

# 4. a rank SIGKILLed under plain srun: Slurm's PMIx server sees its client
# vanish and kills the step; elastic-exec cannot restart the worker
srun_bg() {
    rm -f "$tmp/rc"
    (
        timeout --kill-after=10 300 "$SLURM_CLUSTER_SH" ctl "$CLUSTER_DIR" srun "$@" > "$tmp/out" 2>&1
        echo $? > "$tmp/rc"
    ) &
}
srun_bg -N2 --ntasks-per-node=2 --mpi=pmix "$EXEC" "$prefix" --max-restarts 1 \
    "$HEAT" $HEAT_ARGS --steps 100000000 --progress 100
wait_for_grep '^\[n1:0\] step 100$' "$tmp/out" 120
ok $? "a long heat2d runs on n1, n2 (4 ranks)" || diag "$(tail -n 20 "$tmp/out")"
pid=$(task_pids n2 '^[^ ]*heat2d ' SLURM_PROCID=3)
t0=$(now_ms)
[ -n "$pid" ] && kill -KILL $pid
ok $? "rank 3's process on n2 SIGKILLed (pid $pid)"
wait_for_file "$tmp/rc" 120
rc=$(cat "$tmp/rc" 2> /dev/null)
ok $([ -n "$rc" ] && [ "$rc" -ne 0 ]; echo $?) "the step ends, with a non-zero status ($rc), $(($(now_ms) - t0)) ms after the kill"
grep -Eq 'STEP [0-9.]+ ON n[12] CANCELLED|Job step aborted' "$tmp/out" && ! grep -q 'checksum' "$tmp/out"
ok $? "Slurm's PMIx plugin cancelled the step; no rank went on (no in-place recovery under plain srun)" \
    || diag "$(tail -n 20 "$tmp/out")"
grep -q '\[n2:3\] .*restart' "$tmp/out" && grep -q "^\[n2:3\] heat2d" "$tmp/out"
ok $((!$?)) "elastic-exec's --max-restarts 1 could not start rank 3 again"
grep -q "elastic-exec: rank 3 failed under srun --mpi=pmix: Slurm's PMIx plugin ends the whole job step when one of its processes is lost, so the ranks can neither be restarted nor recover in place; for that, run elastic-mpirun inside the allocation" "$tmp/out"
ok $? "elastic-exec says why rank 3 cannot be restarted or recovered in place, and what to use" ||
    diag "$(tail -n 20 "$tmp/out")"
grep -q 'warn: --max-restarts 1 has no effect under srun --mpi=pmix' "$tmp/out"
ok $? "elastic-exec warned at start that --max-restarts has no effect under srun --mpi=pmix"

# 5. preemption relay and requeue: a batch job that requeues itself when
# its step suspends (doc/slurm.md's template), and resumes
grep -q '^#define HAVE_HDF5 1' "$build/config.h" 2> /dev/null || {
    skip "libelastic has no HDF5 here: no snapshots to suspend to"
    done_testing
    exit 0
}
snap=$tmp/snap
cat > "$tmp/job.sh" << EOF
#!/bin/bash
#SBATCH -N2 --ntasks-per-node=2 --requeue --open-mode=append -o $tmp/job.out
[ "\${SLURM_RESTART_COUNT:-0}" -gt 0 ] && export ELASTIC_RESUME=1
echo "run \$((\${SLURM_RESTART_COUNT:-0} + 1))"
srun --mpi=pmix "$EXEC" '--log-line-prefix-template=[\${hostname}:\${rank}] ' \\
    "$HEAT" $HEAT_ARGS --steps $STEPS --persist-period 50 --snapshot-dir "$snap" --sleep 10 --progress 10
rc=\$?
echo "srun exit \$rc"
[ \$rc -eq 75 ] && scontrol requeue \$SLURM_JOB_ID
exit \$rc
EOF
chmod +x "$tmp/job.sh"
jobid=$(run_in_ctl sbatch --parsable "$tmp/job.sh" 2>&1)
# run N is preempted once it computes (the suspension writes a snapshot of
# its own): run 1 by SIGUSR1, run 2 by
# SIGTERM; run 3 completes
steps_seen() { grep -c '^\[n1:0\] step ' "$tmp/job.out" 2> /dev/null; }
preempt() {
    local run=$1 sig=$2 before
    wait_for_grep "^run $run\$" "$tmp/job.out" 120
    before=$(steps_seen)
    wait_until 120 sh -c "[ \$(grep -c '^\[n1:0\] step ' '$tmp/job.out') -ge $((before + 2)) ]"
    ok $? "run $run of job $jobid computes" || diag "$(tail -n 20 "$tmp/job.out" 2>&1)"
    run_in_ctl scancel -s "$sig" "$jobid"
    wait_until 120 sh -c "[ \$(grep -c '^srun exit' '$tmp/job.out') -ge $run ]"
    [ "$(grep -c '^srun exit 75$' "$tmp/job.out")" -eq "$run" ]
    ok $? "scancel -s $sig: the ranks suspend to HDF5, srun exits 75" || diag "$(tail -n 20 "$tmp/job.out" 2>&1)"
    wait_job_restarts "$jobid" "$run" 60
    ok $? "the job requeued itself (Restarts=$run)"
    release_job "$jobid" 60
}
preempt 1 USR1
preempt 2 TERM
wait_job_state "$jobid" COMPLETED 180
ok $? "run 3 completed" || diag "$(tail -n 30 "$tmp/job.out" 2>&1)"
grep '^\[n1:0\] \(suspended\|resumed\)' "$tmp/job.out" | sed 's/^/# /'
s1=$(tr -d '\0' < "$tmp/job.out" | sed -n 's/^\[n1:0\] suspended at step \([0-9]*\)$/\1/p' | sed -n 1p)
s2=$(tr -d '\0' < "$tmp/job.out" | sed -n 's/^\[n1:0\] suspended at step \([0-9]*\)$/\1/p' | sed -n 2p)
r2=$(tr -d '\0' < "$tmp/job.out" | sed -n 's/^\[n1:0\] resumed from step \([0-9]*\) .*/\1/p' | sed -n 1p)
r3=$(tr -d '\0' < "$tmp/job.out" | sed -n 's/^\[n1:0\] resumed from step \([0-9]*\) .*/\1/p' | sed -n 2p)
ok $([ -n "$s1" ] && [ "$r2" = "$s1" ] && [ -n "$s2" ] && [ "$r3" = "$s2" ] && [ "$s2" -gt "$s1" ]; echo $?) \
    "each run resumed from the step the previous one suspended at ($s1, $s2)"
is "$(tr -d '\0' < "$tmp/job.out" | sed -n 's/^\[n1:0\] checksum //p')" "$ref" "the preempted, requeued, resumed job ends with the failure-free checksum"
done_testing
