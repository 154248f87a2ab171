#!/bin/bash
# t7011-mpirun-linger.sh - an mpirun that stays after every rank suspended
# is stopped after a short grace, the job exits 75, and mpirun's session
# directory does not stay behind
#
# Under load prterun was seen to stay after its ranks had all exited 75 (its
# children gone, SIGTERM ignored): elastic-mpirun waited --suspend-timeout,
# killed it, and prterun's session directory ($TMPDIR/prterun.<host>.<pid>.<uid>)
# was left.  Here prterun is made to stay for real: the ranks' wrapper
# (--exec) is a script that runs elastic-exec and, in the last rank to end,
# SIGSTOPs its parent, prterun, which then neither reaps nor exits nor acts
# on SIGTERM.  elastic-mpirun must notice that mpirun has no child left,
# stop it well before --suspend-timeout (here 200 s), exit 75 from the
# ranks' account, remove the session directory and leave no process; the
# same command then resumes to the failure-free checksum.
. "${srcdir:-.}/lib/tap.sh"

heat2d=$(cd "${top_builddir:-..}/examples" 2> /dev/null && pwd)/heat2d
empirun=$(cd "${top_builddir:-..}/src/mpirun" && pwd)/elastic-mpirun
exec_bin=$(cd "${top_builddir:-..}/src/exec" 2> /dev/null && pwd)/elastic-exec
[ -x "$heat2d" ] && [ -x "$exec_bin" ] || skip_all "heat2d or elastic-exec not built"
command -v setsid > /dev/null || skip_all "no setsid(1)"
np=4
grid=(--nx 64 --ny 64)
steps=600
tmp=$(mktemp -d)
export XDG_CACHE_HOME=$tmp/cache
trap 'pkill -KILL -f "$tmp/" 2> /dev/null; rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1
unset ELASTIC_RESUME ELASTIC_EVENT_LOG ELASTIC_RUN_DIR ELASTIC_MPIRUN SLURM_JOB_ID
export ELASTIC_SNAPSHOT_PERIOD=5 ELASTIC_PERSIST_PERIOD=50
checksum_of() { tr -d '\0' < "$1" | grep -a -o 'checksum [0-9a-f]*' | tail -n 1 | cut -d' ' -f2; }
job_procs() { pgrep -f "$tmp/" | grep -v -x "$$" | tr '\n' ' '; }
mkdir -p "$tmp/tmp" "$tmp/done"

# the wrapper: elastic-exec, then, in the last rank to end, SIGSTOP prterun
cat > "$tmp/exec-linger" << EOF2
#!/bin/bash
"$exec_bin" "\$@" &
child=\$!
# prterun signals the rank's process group, so elastic-exec gets its
# signals anyway: the script itself must only outlive it
trap '' USR1 TERM INT HUP
wait \$child
rc=\$?
[ "\$1" = --version ] && exit \$rc
touch "$tmp/done/\${OMPI_COMM_WORLD_RANK:-x}"
if [ "\$(ls "$tmp/done" | wc -l)" -ge $np ]; then
    # (a file: what the rank writes goes through prterun, stopped next)
    echo "\$PPID" > "$tmp/stopped"
    kill -STOP \$PPID
fi
exit \$rc
EOF2
chmod +x "$tmp/exec-linger"

TMPDIR=$tmp/tmp timeout 300 "$empirun" -q --run-dir "$tmp/ref-run" --exec "$exec_bin" \
    --mca btl self,sm,tcp -n "$np" "$heat2d" "${grid[@]}" --steps $steps --snapshot-dir "$tmp/ref" \
    > "$tmp/ref.out" 2>&1
ok $? "failure-free run: $np ranks, ${grid[*]}, $steps steps"
ref=$(checksum_of "$tmp/ref.out")

TMPDIR=$tmp/tmp setsid "$empirun" --suspend-timeout 200 --run-dir "$tmp/run" --exec "$tmp/exec-linger" \
    --mca btl self,sm,tcp -n "$np" "$heat2d" "${grid[@]}" --steps $steps --progress 10 --sleep 20 \
    --snapshot-dir "$tmp/snap" > "$tmp/out" 2>&1 &
pid=$!
wait_for_grep '^step 30$' "$tmp/out" 240 || diag "the job did not reach step 30"
t0=$(date +%s)
kill -TERM "$pid"
if ! wait_for_exit "$pid" 240; then
    diag "still running 240 s after the signal; killing it"
    kill -KILL -- "-$pid" 2> /dev/null
fi
wait "$pid"
rc=$?
took=$(($(date +%s) - t0))
is "$rc" 75 "a preempted job whose mpirun stays after its ranks: exit 75" ||
    tr -d '\0' < "$tmp/out" | grep -a -v '^step ' | tail -n 25 | sed 's/^/# /'
ok $([ -s "$tmp/stopped" ]; echo $?) "prterun (pid $(cat "$tmp/stopped" 2> /dev/null)) was stopped after its last rank ended (the test's wrapper did it)"
grep -a -q 'mpirun (pid [0-9]*) is still running [0-9]* s after its last rank exited: stopping it' "$tmp/out"
ok $? "elastic-mpirun saw mpirun stay without ranks and stopped it" ||
    tr -d '\0' < "$tmp/out" | grep -a 'elastic-mpirun' | sed 's/^/# /'
ok $([ "$took" -lt 100 ]; echo $?) "well before --suspend-timeout (200 s): $took s"
grep -a -q "session directory .*/prterun\.[^ ]* was left behind: removing it" "$tmp/out"
ok $? "elastic-mpirun removed the session directory the killed mpirun left"
is "$(ls -A "$tmp/tmp")" "" "nothing is left in TMPDIR"
is "$(job_procs)" "" "no process of the job is left"
step=$(tr -d '\0' < "$tmp/out" | sed -n 's/^suspended at step \([0-9]*\)$/\1/p' | head -n 1)
ok $([ -n "$step" ] && [ -s "$(printf '%s/snap/snap-%012d.h5' "$tmp" "${step:-0}")" ]; echo $?) \
    "the ranks suspended at step ${step:-?} to a snapshot"

TMPDIR=$tmp/tmp timeout 300 "$empirun" --run-dir "$tmp/run" --exec "$exec_bin" --mca btl self,sm,tcp \
    -n "$np" "$heat2d" "${grid[@]}" --steps $steps --snapshot-dir "$tmp/snap" > "$tmp/resume" 2>&1
is "$?" 0 "rerunning the command completes"
tr -d '\0' < "$tmp/resume" | grep -a -q 'resumed from step'
ok $? "it resumed from the snapshot"
is "$(checksum_of "$tmp/resume")" "$ref" "suspended + resumed gives the failure-free checksum"
done_testing
