#!/bin/bash
# t6003-spank-requeue.sh - preemption and requeue of an `sbatch --elastic`
# job on the emulated cluster: a job in the high partition preempts it (the
# tasks get SIGTERM at once, GraceTime), the tasks exit with the suspend
# code 75, the batch script requeues the job (doc/slurm.md's template: Slurm
# does not requeue a preempted job that ends by itself within its grace
# time), and when it runs again its batch script and its wrapped tasks see ELASTIC_RESTART_COUNT=1,
# ELASTIC_RESUME=1 and the same ELASTIC_SNAPSHOT_DIR, so the library can
# resume from its snapshot.  exec= is a test double that records what the
# plugin passed (t6004 runs the real elastic-exec).
. "${srcdir:-.}/lib/slurm.sh"

slurm_require
build=$(cd "${top_builddir:-..}" && pwd)
plugin=$build/slurm/.libs/spank_elastic.so
shim=$build/slurm/elastic-slurm-task
[ -f "$plugin" ] && [ -x "$shim" ] || {
    echo "not ok 1 - the plugin is built ($plugin, $shim)"
    exit 1
}

tmp=$(mktemp -d /tmp/t6003.XXXXXX)
export REC=$tmp/rec
mkdir -p "$REC"
cat > "$tmp/fake-exec" << 'EOF'
#!/bin/sh
# test double for elastic-exec: record argv and environment per run, exec the program after "--"
f=$REC/exec.$SLURM_JOB_ID.run${SLURM_RESTART_COUNT:-0}.$SLURM_PROCID
{ for a in "$@"; do echo "arg $a"; done; env | sort | sed 's/^/env /'; } > "$f.tmp" && mv "$f.tmp" "$f"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
exec "$@"
EOF
cat > "$tmp/task" << 'EOF'
#!/bin/sh
# first run: wait to be preempted (record the SIGTERM); a resumed run: finish
f=$REC/task.$SLURM_JOB_ID.run${SLURM_RESTART_COUNT:-0}.$SLURM_PROCID
env | sort | sed 's/^/env /' > "$f"
if [ "${ELASTIC_RESUME:-0}" = 1 ]; then
    echo resumed >> "$f"
    exit 0
fi
trap 'echo SIGTERM >> "$f"; exit 75' TERM
echo running >> "$f"
while :; do sleep 0.1; done
EOF
cat > "$tmp/job.sh" << EOF
#!/bin/sh
#SBATCH -p normal -N2 --ntasks-per-node=2 --requeue -o $tmp/job.out --open-mode=append
#SBATCH --elastic=snapshot-period=4,max-restarts=0
env | sort | sed 's/^/env /' > \$REC/batch.\$SLURM_JOB_ID.run\${SLURM_RESTART_COUNT:-0}
srun $tmp/task
rc=\$?
# suspended (ELASTIC_EXIT_SUSPENDED): requeue ourselves; a job that ends
# by itself within its GraceTime is not requeued by Slurm
[ \$rc -eq 75 ] && scontrol requeue \$SLURM_JOB_ID
exit \$rc
EOF
chmod +x "$tmp/fake-exec" "$tmp/task"
echo "optional $plugin exec=$tmp/fake-exec shim=$shim snapshot_dir=$tmp/snap" > "$tmp/plugstack.conf"

cluster_up 2 --cpus 2 --grace 3 --plugstack "$tmp/plugstack.conf"
rc=$?
# keep the recordings of a failed test (lib/slurm.sh keeps its cluster directory)
trap 'cluster_down > /dev/null; [ "$tap_failed" -eq 0 ] && rm -rf "$tmp"' EXIT
ok $rc "2-node cluster up (2 CPUs each, GraceTime=3 s on partition normal)" || {
    done_testing
    exit 1
}
value() { sed -n "s/^env $2=//p" "$1"; }
running() { [ "$(grep -l '^running' "$REC"/task.$1.run0.* 2> /dev/null | wc -l)" -eq 4 ]; }

jobid=$(run_in_ctl sbatch --parsable "$tmp/job.sh" 2>&1)
wait_until 60 running "$jobid"
ok $? "sbatch --elastic job $jobid: its four wrapped tasks run on n1, n2" || diag "$(cat "$tmp/job.out" 2>&1)"
b0=$REC/batch.$jobid.run0
snapdir=$(value "$b0" ELASTIC_SNAPSHOT_DIR)
is "$snapdir" "$tmp/snap/$jobid" "first run: ELASTIC_SNAPSHOT_DIR=<snapshot_dir>/<job id>"
is "$(value "$b0" ELASTIC_RESTART_COUNT)/$(value "$b0" ELASTIC_RESUME)" "0/" \
    "first run: ELASTIC_RESTART_COUNT=0, no ELASTIC_RESUME"

# a job in the high partition needs every CPU: it preempts ours
t0=$(now_ms)
high=$(run_in_ctl sbatch --parsable -p high -N2 --ntasks-per-node=2 -o /dev/null --wrap 'srun true' 2>&1)
wait_until 30 sh -c "[ \$(grep -l '^SIGTERM' '$REC'/task.$jobid.run0.* 2> /dev/null | wc -l) -eq 4 ]"
ok $? "preemption: all four wrapped tasks got SIGTERM" || diag "$(tail -n 3 "$REC"/task.$jobid.run0.*)"
diag "SIGTERM reached the tasks $(($(now_ms) - t0)) ms after the high-priority job was submitted"
wait_job_state "$high" COMPLETED 60
ok $? "the high-priority job $high ran and completed"
wait_until 30 sh -c "'$SLURM_CLUSTER_SH' ctl '$CLUSTER_DIR' scontrol -o show job $jobid | grep -q 'Restarts=1'"
ok $? "job $jobid was requeued (Restarts=1)"
release_job "$jobid" 60
wait_job_state "$jobid" COMPLETED 90
ok $? "job $jobid ran again and completed" || diag "$(cat "$tmp/job.out" 2>&1)"

# the second run resumes
b1=$REC/batch.$jobid.run1
is "$(value "$b1" ELASTIC_RESTART_COUNT)/$(value "$b1" ELASTIC_RESUME)" "1/1" \
    "second run, batch script: ELASTIC_RESTART_COUNT=1, ELASTIC_RESUME=1"
bad=0
for r in 0 1 2 3; do
    e=$REC/exec.$jobid.run1.$r
    t=$REC/task.$jobid.run1.$r
    [ "$(value "$e" ELASTIC_RESTART_COUNT)/$(value "$e" ELASTIC_RESUME)" = 1/1 ] || bad=1
    [ "$(value "$e" ELASTIC_SNAPSHOT_DIR)" = "$snapdir" ] || bad=1
    [ "$(value "$e" ELASTIC_RUN_ID)" = "$jobid" ] || bad=1
    [ "$(value "$e" ELASTIC_SNAPSHOT_PERIOD)" = 4 ] || bad=1
    grep -q '^resumed' "$t" 2> /dev/null || bad=1
done
ok $bad "second run, each wrapped task: ELASTIC_RESTART_COUNT=1, ELASTIC_RESUME=1, the same snapshot dir and run id, and it resumed" \
    || diag "$(grep -h 'ELASTIC_' "$REC"/exec.$jobid.run1.* 2>&1 | sort | uniq -c)"
done_testing
