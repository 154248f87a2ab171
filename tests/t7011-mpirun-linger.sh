#!/bin/bash
# t7011-mpirun-linger.sh - an mpirun that stays after every rank suspended
# is stopped after a short grace, the job exits 75, and mpirun's session
# directory does not stay behind
#
# Under load prterun was seen to stay after its ranks had all exited 75 (its
# children gone, SIGTERM ignored): elastic-mpirun waited --suspend-timeout,
# killed it, and prterun's session directory ($TMPDIR/prterun.<host>.<pid>.<uid>)
# was left.  Here prterun is made to stay for real: the ranks' wrapper
# (--exec) is a script that runs elastic-exec and, once every rank ended,
# SIGSTOPs its parent, prterun, which then neither reaps nor exits nor acts
# on SIGTERM.  elastic-mpirun must notice that mpirun has no child left,
# stop it well before --suspend-timeout (here 200 s), exit 75 from the
# ranks' account, remove the session directory and leave no process; the
# same command then resumes to the failure-free checksum.
#
# No wrapper exits before prterun is stopped: they wait for each other, and
# for the stop to have taken effect.  prterun of Open MPI 5.0.7 under
# --with-ft ulfm counts a rank that exits non-zero twice (errmgr_dvm.c's
# TERM_NON_ZERO case and then track_procs' TERMINATED), so once half the
# ranks exited 75 it takes the job for ended and exits, its other ranks
# still running: a stop sent by the last rank's wrapper as that one ends
# then came too late when the ranks did not end together (the job ended
# 1 s after the preemption, unstopped, in a clean-clone CI run; on demand
# by delaying one rank's end).
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

# the wrapper: elastic-exec, then, once every rank ended and before any
# wrapper exits, SIGSTOP prterun (one of them does; the others wait for it)
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
me=\${OMPI_COMM_WORLD_RANK:-x}
touch "$tmp/done/\$me"
# (files: what a rank writes goes through prterun, stopped next)
fail() { echo "rank \$me: \$*" >> "$tmp/wrapper-failed"; exit \$rc; }
all_stopped() { # every thread of process \$1 is in a stop
    local f line n=0
    for f in /proc/\$1/task/*/stat; do
        read -r line < "\$f" 2> /dev/null || return 1
        line=\${line##*) }
        [ "\${line%% *}" = T ] || return 1
        n=\$((n + 1))
    done
    [ \$n -gt 0 ]
}
end=\$((SECONDS + 120))
until [ "\$(ls "$tmp/done" | wc -l)" -ge $np ]; do
    [ \$SECONDS -lt \$end ] || fail "not every rank ended within 120 s: \$(ls "$tmp/done" | tr '\n' ' ')"
    sleep 0.05
done
if mkdir "$tmp/stopping" 2> /dev/null; then
    kill -STOP \$PPID || fail "kill -STOP \$PPID failed"
    until all_stopped \$PPID; do
        [ \$SECONDS -lt \$end ] || fail "prterun (pid \$PPID) did not stop: \$(cat /proc/\$PPID/stat 2>&1)"
        sleep 0.01
    done
    echo "\$PPID" > "$tmp/stopped.new" && mv "$tmp/stopped.new" "$tmp/stopped"
else
    until [ -s "$tmp/stopped" ]; do
        [ \$SECONDS -lt \$end ] && [ ! -e "$tmp/wrapper-failed" ] || fail "prterun was not stopped"
        sleep 0.05
    done
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
ok $([ -s "$tmp/stopped" ]; echo $?) "prterun (pid $(cat "$tmp/stopped" 2> /dev/null)) was stopped after its last rank ended (the test's wrapper did it)" ||
    sed 's/^/# /' "$tmp/wrapper-failed" 2> /dev/null
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
