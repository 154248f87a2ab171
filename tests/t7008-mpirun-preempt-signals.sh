#!/bin/bash
# t7008-mpirun-preempt-signals.sh - a preemption signal ends with exit 75
# however it is sent, repeatedly, with the real heat2d under elastic-exec:
#   alone    SIGTERM to elastic-mpirun only (a scheduler's targeted signal)
#   group    SIGTERM to its whole process group (kill 0, a terminal)
#   timeout  SIGTERM to `timeout 300 elastic-mpirun ...`, which relays it to
#            elastic-mpirun and then to its own process group
# A signal to the group used to reach mpirun too, which killed the job while
# the ranks suspended (exit 1).  Every run must exit 75, say where the ranks
# suspended, leave that HDF5 snapshot behind and no process of the job; the
# first run of each way is then resumed and must give the failure-free
# checksum.  T7008_ROUNDS (default 3) runs of each way (T7008_WAYS: which;
# T7008_KEEP: a directory to keep the output of runs whose mpirun exit code
# was lost); T7008_NP, _NX, _NY,
# _STEPS, _SLEEP (ms per step) and _AT (the step after which the signal is
# sent) size the job; bench/preempt-signals.sh repeats it at the issue's size.
# Then mpirun itself misbehaving: killed by SIGABRT after the ranks
# suspended (still 75), and ending the job for a lost node with SIGTERM
# to the ranks (they suspend; not a preemption: relaunched, exit 0).
. "${srcdir:-.}/lib/tap.sh"

heat2d=$(cd "${top_builddir:-..}/examples" 2> /dev/null && pwd)/heat2d
empirun=$(cd "${top_builddir:-..}/src/mpirun" && pwd)/elastic-mpirun
exec_bin=$(cd "${top_builddir:-..}/src/exec" 2> /dev/null && pwd)/elastic-exec
[ -x "$heat2d" ] && [ -x "$exec_bin" ] || skip_all "heat2d or elastic-exec not built"
command -v setsid > /dev/null || skip_all "no setsid(1) to give a job its own process group"
rounds=${T7008_ROUNDS:-3}
np=${T7008_NP:-4}
grid=(--nx "${T7008_NX:-64}" --ny "${T7008_NY:-64}")
tmp=$(mktemp -d)
export XDG_CACHE_HOME=$tmp/cache
trap 'pkill -KILL -f "$tmp/" 2> /dev/null; rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1
unset ELASTIC_RESUME ELASTIC_EVENT_LOG ELASTIC_RUN_DIR ELASTIC_MPIRUN SLURM_JOB_ID
export ELASTIC_SNAPSHOT_PERIOD=5 ELASTIC_PERSIST_PERIOD=50
steps=${T7008_STEPS:-600}
sleep_ms=${T7008_SLEEP:-20}
at=${T7008_AT:-30}
checksum_of() { tr -d '\0' < "$1" | grep -a -o 'checksum [0-9a-f]*' | tail -n 1 | cut -d' ' -f2; }
# the processes of this test's jobs (mpirun, wrappers, ranks): all name $tmp
job_procs() { pgrep -f "$tmp/" | grep -v -x "$$" | tr '\n' ' '; }

ELASTIC_SNAPSHOT_DIR=$tmp/ref timeout 300 "$empirun" -q --run-dir "$tmp/ref-run" --exec "$exec_bin" \
    --mca btl self,sm,tcp -n "$np" "$heat2d" "${grid[@]}" --steps $steps --snapshot-dir "$tmp/ref" \
    > "$tmp/ref.out" 2>&1
ok $? "failure-free run: $np ranks, ${grid[*]}, $steps steps"
ref=$(checksum_of "$tmp/ref.out")

# preempt WAY ID: run a job in a session of its own, SIGTERM it WAY once it
# computes, wait for its end.  Sets rc and step.
preempt() {
    local way=$1 id=$2 pid
    local args=(--run-dir "$tmp/run.$id" --exec "$exec_bin" --mca btl self,sm,tcp -n "$np"
        "$heat2d" "${grid[@]}" --steps $steps --progress 10 --sleep "$sleep_ms" --snapshot-dir "$tmp/snap.$id")
    rc= step=
    if [ "$way" = timeout ]; then
        setsid timeout --kill-after=60 300 "$empirun" "${args[@]}" > "$tmp/out.$id" 2>&1 &
    else
        setsid "$empirun" "${args[@]}" > "$tmp/out.$id" 2>&1 &
    fi
    pid=$!
    if ! wait_for_grep "^step $at\$" "$tmp/out.$id" 240; then
        diag "$id: the job did not reach step $at"
        tail -n 20 "$tmp/out.$id" | sed 's/^/# /'
    fi
    case $way in
        group) kill -TERM -- "-$pid" ;;
        *) kill -TERM "$pid" ;;
    esac
    job_end "$pid" "$id"
}

# job_end PID ID: wait for the job PID (its output $tmp/out.ID) to end,
# killing its process group after 300 s; sets rc and step (where the
# ranks suspended, if they did)
job_end() {
    if ! wait_for_exit "$1" 300; then
        diag "$2: still running 300 s after the signal; killing it"
        kill -KILL -- "-$1" 2> /dev/null
    fi
    wait "$1"
    rc=$?
    step=$(tr -d '\0' < "$tmp/out.$2" | sed -n 's/^suspended at step \([0-9]*\)$/\1/p' | head -n 1)
}

for way in ${T7008_WAYS:-alone group timeout}; do
    n75=0 nlost=0
    for r in $(seq 1 "$rounds"); do
        id=$way.$r
        preempt "$way" "$id"
        [ "$rc" = 75 ] && n75=$((n75 + 1))
        if grep -a -q 'the attempt counts as suspended' "$tmp/out.$id"; then
            nlost=$((nlost + 1))
            diag "$id: $(grep -a -o 'mpirun exited .*' "$tmp/out.$id" | head -n 1)"
            tr -d '\0' < "$tmp/out.$id" | grep -a 'elastic-mpirun.*: \(warn\|error\):' | sed 's/^/# /'
            [ -n "${T7008_KEEP:-}" ] && mkdir -p "$T7008_KEEP" && cp "$tmp/out.$id" "$T7008_KEEP/"
        fi
        is "$rc" 75 "$id: SIGTERM $way -> exit 75" ||
            tr -d '\0' < "$tmp/out.$id" | grep -a -v '^step ' | tail -n 25 | sed 's/^/# /'
        snap=$(printf '%s/snap.%s/snap-%012d.h5' "$tmp" "$id" "${step:-0}")
        ok $([ -n "$step" ] && [ -s "$snap" ]; echo $?) "$id: the ranks suspended at step ${step:-?} to ${snap##*/}"
        left=$(job_procs)
        is "$left" "" "$id: no process of the job is left"
    done
    diag "SIGTERM $way: $n75 of $rounds runs exit 75 ($nlost of them judged from the ranks' events, mpirun's own exit code lost)"
    # the same command (without the sleep) resumes and completes
    timeout 300 "$empirun" --run-dir "$tmp/run.$way.1" --exec "$exec_bin" --mca btl self,sm,tcp -n "$np" \
        "$heat2d" "${grid[@]}" --steps $steps --snapshot-dir "$tmp/snap.$way.1" > "$tmp/resume.$way" 2>&1
    is "$?" 0 "$way: rerunning the command completes"
    tr -d '\0' < "$tmp/resume.$way" | grep -a -q 'resumed from step'
    ok $? "$way: it resumed from the snapshot"
    is "$(checksum_of "$tmp/resume.$way")" "$ref" "$way: suspended + resumed gives the failure-free checksum"
done

# mpirun's exit code lost after the ranks suspended: prterun was seen dying
# by SIGABRT in its teardown (a glibc mutex assertion, exit 134) after the
# ranks wrote their snapshot and exited.  An mpirun that ends that way, for
# real: the real mpirun, then SIGABRT to itself.
real_mpirun=$("$empirun" --dry-run -n 1 true 2> /dev/null | head -n 1 | cut -d' ' -f1)
mkdir -p "$tmp/bin"
ln -s "$(dirname "$real_mpirun")/ompi_info" "$tmp/bin/ompi_info"
cat > "$tmp/bin/mpirun" << EOF2
#!/bin/bash
[ "\$1" = --version ] && exec "$real_mpirun" "\$@"
"$real_mpirun" "\$@" &
child=\$!
trap 'kill -USR1 \$child' USR1
trap 'kill -TERM \$child' TERM INT HUP
while kill -0 \$child 2> /dev/null; do wait \$child; done
kill -ABRT \$\$
EOF2
chmod +x "$tmp/bin/mpirun"
export ELASTIC_MPIRUN=$tmp/bin/mpirun
preempt alone abort
is "$rc" 75 "mpirun killed by SIGABRT after the ranks suspended: still exit 75" ||
    tr -d '\0' < "$tmp/out.abort" | grep -a -v '^step ' | tail -n 25 | sed 's/^/# /'
grep -a -q "mpirun exited 134 (killed by a signal), but the ranks suspended at step $step to .*snap-0*$step.h5: the attempt counts as suspended" "$tmp/out.abort"
ok $? "the ranks' suspend event decided it, and elastic-mpirun said so"
is "$(job_procs)" "" "abort: no process of the job is left"
timeout 300 "$empirun" --run-dir "$tmp/run.abort.nosuspend" --max-relaunches 0 --exec "$exec_bin" \
    --mca btl self,sm,tcp -n "$np" "$heat2d" "${grid[@]}" --steps 50 --snapshot-dir "$tmp/snap.abort.nosuspend" \
    > "$tmp/out.abort.nosuspend" 2>&1
is "$?" 0 "the same mpirun after a job that completed: completed (exit 0), not a suspension" ||
    tr -d '\0' < "$tmp/out.abort.nosuspend" | grep -a -v '^step ' | tail -n 25 | sed 's/^/# /'
grep -a -q "mpirun exited 134, but the ranks completed the job (at step [0-9]*, $np working ranks)" \
    "$tmp/out.abort.nosuspend"
ok $? "the ranks' completed event decided it, and elastic-mpirun said so"
# neither completed nor suspended (every rank dies at step 20, nothing is
# left to recover in place, no relaunch allowed): a failure
fails=()
for ((r = 0; r < np; r++)); do fails+=(--fail "$r:20"); done
timeout 300 "$empirun" --run-dir "$tmp/run.abort.fatal" --max-relaunches 0 --exec "$exec_bin" \
    --mca btl self,sm,tcp -n "$np" "$heat2d" "${grid[@]}" --steps 50 "${fails[@]}" \
    --snapshot-dir "$tmp/snap.abort.fatal" > "$tmp/out.abort.fatal" 2>&1
is "$?" 1 "the same mpirun after a job that failed: a failure (exit 1), neither completed nor suspended"

# mpirun ending the job for a lost node: PRRTE prints "lost communication
# with a remote daemon" and stops every rank with SIGTERM; the ranks take
# it for a preemption and suspend, but nobody preempted the job (seen in
# t6011 B, a node SIGKILLed under Slurm: elastic-mpirun then exited 75).
# It must count as a failure and relaunch, the relaunch resuming from the
# ranks' snapshot.  The real mpirun; on SIGUSR2 the wrapper prints PRRTE's
# lines (naming this host: the only one, so it is not excluded) and sends
# SIGTERM to mpirun's children, the ranks' wrappers, as PRRTE does.
host=$(hostname)
cat > "$tmp/bin/mpirun" << EOF2
#!/bin/bash
[ "\$1" = --version ] && exec "$real_mpirun" "\$@"
echo \$\$ >> "$tmp/lost.pids"
"$real_mpirun" "\$@" &
child=\$!
lose() {
    printf '%s\n' '--------------------------------------------------------------------------' \
        'PRTE has lost communication with a remote daemon.' '' \
        '  HNP daemon   : [prterun-$host-1@0,0] on node $host' \
        '  Remote daemon: [prterun-$host-1@0,1] on node $host' '' \
        'This is usually due to either a failure of the TCP network' \
        'connection to the node, or possibly an internal failure of' \
        'the daemon itself. We cannot recover from this failure, and' \
        'therefore will terminate the job.' \
        '--------------------------------------------------------------------------' >&2
    pkill -TERM -P \$child
}
trap lose USR2
trap 'kill -TERM \$child' TERM INT HUP
while :; do
    wait \$child
    rc=\$?
    kill -0 \$child 2> /dev/null || break
done
exit \$rc
EOF2
rm -f "$tmp/lost.pids"
setsid "$empirun" --run-dir "$tmp/run.lost" --exec "$exec_bin" --mca btl self,sm,tcp -n "$np" \
    "$heat2d" "${grid[@]}" --steps $steps --progress 10 --sleep "$sleep_ms" --snapshot-dir "$tmp/snap.lost" \
    > "$tmp/out.lost" 2>&1 &
pid=$!
wait_for_grep "^step $at\$" "$tmp/out.lost" 240
ok $? "lost node: the job computes (step $at)" || diag "$(tail -n 20 "$tmp/out.lost")"
kill -USR2 "$(head -n 1 "$tmp/lost.pids" 2> /dev/null)" 2> /dev/null
job_end "$pid" lost
is "$rc" 0 "lost node: relaunched and completed (exit 0), not suspended (75)" ||
    tr -d '\0' < "$tmp/out.lost" | grep -a -v '^step ' | tail -n 25 | sed 's/^/# /'
[ -n "$step" ]
ok $? "lost node: the ranks suspended first (at step ${step:-?})"
grep -a -q "mpirun lost the daemon on $host and ended the job; the ranks took its SIGTERM for a preemption and suspended.*: the attempt counts as failed" "$tmp/out.lost"
ok $? "lost node: elastic-mpirun says why it counts as a failure" ||
    tr -d '\0' < "$tmp/out.lost" | grep -a 'elastic-mpirun.*: \(warn\|error\):' | sed 's/^/# /'
tr -d '\0' < "$tmp/out.lost" | grep -a -q "resumed from step ${step:-x}"
ok $? "lost node: the relaunch resumed from the ranks' snapshot (step ${step:-?})"
is "$(checksum_of "$tmp/out.lost")" "$ref" "lost node: the failure-free checksum"
is "$(job_procs)" "" "lost node: no process of the job is left"
unset ELASTIC_MPIRUN
done_testing
