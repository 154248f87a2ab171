#!/bin/bash
# t6012-slurm-preempt.sh - preemption by priority of an elastic-mpirun job on
# the emulated cluster, with doc/slurm.md's batch template: a job in the
# high partition needs the nodes of a running elastic job in the normal
# partition; Slurm sends the elastic job's batch shell its --signal
# (B:USR1, at once: SlurmctldParameters=preempt_send_user_signal); the shell
# hands it to elastic-mpirun, whose ranks suspend to an HDF5 snapshot within
# the partition's GraceTime; elastic-mpirun exits 75 and the script requeues
# the job.  The high-priority job runs; the elastic job runs again, resumes
# from its snapshot and ends with heat2d's failure-free checksum.
. "${srcdir:-.}/lib/slurm.sh"

slurm_require
build=$(cd "${top_builddir:-..}" && pwd)
EM=$build/src/mpirun/elastic-mpirun
EXEC=$build/src/exec/elastic-exec
HEAT=$build/examples/heat2d
[ -x "$EM" ] && [ -x "$EXEC" ] || skip_all "elastic-mpirun or elastic-exec is not built"
[ -x "$HEAT" ] || skip_all "heat2d is not built: no MPI in this configuration ($HEAT)"
grep -q '^#define HAVE_HDF5 1' "$build/config.h" 2> /dev/null \
    || skip_all "libelastic has no HDF5 here: no snapshots to suspend to"
slurm_mpi_env
tmp=$(mktemp -d /tmp/t6012.XXXXXX)
HEAT_ARGS="--nx 64 --ny 48 --steps 400"
ref=$("$HEAT" $HEAT_ARGS 2>&1 | sed -n 's/^checksum //p')
[ -n "$ref" ] || {
    echo "not ok 1 - heat2d runs as a singleton"
    exit 1
}

GRACE=60
cluster_up 2 --cpus 2 --grace $GRACE
rc=$?
trap 'cluster_down > /dev/null; [ "$tap_failed" -eq 0 ] && rm -rf "$tmp"' EXIT
ok $rc "2-node cluster up (2 CPUs each, GraceTime=$GRACE s on partition normal)" || {
    done_testing
    exit 1
}

# doc/slurm.md's template for elastic-mpirun
cat > "$tmp/job.sh" << EOF
#!/bin/bash
#SBATCH -p normal -N2 --ntasks-per-node=2 --requeue --no-kill
#SBATCH --time=60 --signal=B:USR1@120
#SBATCH --open-mode=append -o $tmp/job.out
echo "run \$((\${SLURM_RESTART_COUNT:-0} + 1))"
"$EM" --run-dir "$tmp/run" --detector 2,30 --prtemca plm_slurm_args --overlap \\
    '--exec-opt=--log-line-prefix-template=[\${hostname}:\${rank}] ' -n 4 \\
    "$HEAT" $HEAT_ARGS --persist-period 100 --snapshot-dir "$tmp/snap" --sleep 20 --progress 20 &
pid=\$!
# the notice goes to this shell only (B:): hand it to elastic-mpirun
trap 'kill -USR1 \$pid' USR1 TERM
while kill -0 \$pid 2> /dev/null; do wait \$pid; done
wait \$pid
rc=\$?
echo "elastic-mpirun exit \$rc"
# suspended: requeue (Slurm ends a preempted job that exits by itself
# within its GraceTime; it does not requeue it)
[ \$rc -eq 75 ] && scontrol requeue \$SLURM_JOB_ID
exit \$rc
EOF
chmod +x "$tmp/job.sh"
jobid=$(run_in_ctl sbatch --parsable "$tmp/job.sh" 2>&1)
wait_for_grep '^\[n1:0\] step 60$' "$tmp/job.out" 180 \
    && wait_until 60 sh -c "ls '$tmp/snap'/*.h5 > /dev/null 2>&1"
ok $? "elastic job $jobid: 4 ranks on n1, n2 compute and persist HDF5 snapshots" || diag "$(tail -n 20 "$tmp/job.out" 2>&1)"

# the high-priority job needs every CPU of both nodes
t0=$(now_ms)
high=$(run_in_ctl sbatch --parsable -p high -N2 --ntasks-per-node=2 -o "$tmp/high.out" \
    --wrap 'srun hostname' 2>&1)
wait_for_grep '^\[n1:0\] suspended at step' "$tmp/job.out" $GRACE
ok $? "preempted: the ranks suspended within the grace time ($(($(now_ms) - t0)) ms after the high-priority job was submitted)" \
    || diag "$(tail -n 20 "$tmp/job.out" 2>&1)"
wait_for_grep '^elastic-mpirun exit' "$tmp/job.out" $GRACE
grep -q '^elastic-mpirun exit 75$' "$tmp/job.out"
ok $? "elastic-mpirun exits 75 (suspended)" || diag "$(tail -n 20 "$tmp/job.out" 2>&1)"
wait_job_restarts "$jobid" 1 60
ok $? "the batch script requeued job $jobid (Restarts=1)"
wait_job_state "$high" COMPLETED 120
ok $? "the high-priority job $high ran on the freed nodes and completed"
t1=$(now_ms)
release_job "$jobid" 60
wait_for_grep '^\[n1:0\] resumed from step' "$tmp/job.out" 180
ok $? "run 2 of job $jobid resumed from its snapshot" || diag "$(tail -n 20 "$tmp/job.out" 2>&1)"
diag "from the high-priority job's end to the elastic job computing again: $(($(now_ms) - t1)) ms (Slurm holds a requeued job until released)"
wait_job_state "$jobid" COMPLETED 300
ok $? "job $jobid completed" || diag "$(tail -n 30 "$tmp/job.out" 2>&1)"
s=$(tr -d '\0' < "$tmp/job.out" | sed -n 's/^\[n1:0\] suspended at step \([0-9]*\)$/\1/p')
r=$(tr -d '\0' < "$tmp/job.out" | sed -n 's/^\[n1:0\] resumed from step \([0-9]*\) .*/\1/p')
ok $([ -n "$s" ] && [ "$r" = "$s" ]; echo $?) "run 2 resumed from the step run 1 suspended at ($s)"
grep -q 'attempt 2: 4 ranks on n1,n2, resuming from the newest L3 snapshot' "$tmp/job.out"
ok $? "elastic-mpirun saw that the job was suspended and resumed on its own"
is "$(tr -d '\0' < "$tmp/job.out" | sed -n 's/^\[n1:0\] checksum //p')" "$ref" "the preempted and resumed job ends with the failure-free checksum"
done_testing
