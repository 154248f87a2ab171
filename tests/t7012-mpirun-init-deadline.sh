#!/bin/bash
# t7012-mpirun-init-deadline.sh - ranks killed inside MPI_Init under
# elastic-mpirun do not hang the job: --init-timeout stops the attempt and
# it is relaunched; ranks that are merely slow to start are left alone
#
# The campaign once saw ranks SIGKILLed inside MPI_Init (three within 1.5 s
# of the start) leave the others waiting inside it: prterun under
# --with-ft ulfm neither aborted the job nor ended.  Here that is made to
# happen every time: in the first attempt one rank SIGSTOPs itself before
# it execs heat2d (it never enters MPI_Init, so the others wait in its
# fence), and once the others are inside MPI_Init (they have mapped the
# job's /dev/shm segment, which MPI_Init creates before its fence) the
# test SIGKILLs one or two of them.  Their libelastic says each rank
# loaded (rank_loaded) and none finished MPI_Init (rank_initialized);
# elastic-exec's worker_exit says who died.  elastic-mpirun must stop the
# attempt after --init-timeout with one line naming the ranks that never
# finished MPI_Init, relaunch it, end with heat2d's failure-free checksum
# and exit 0, and leave nothing behind: no process, none of the job's
# /dev/shm segments, nothing in TMPDIR (prterun's session directory, the
# wrappers' directories).  A rank that sleeps before MPI_Init while nobody
# died is waited for however long it takes.  A preemption before any rank
# finished MPI_Init, or after every rank finished its work, loses nothing:
# exit 75 (rerun) and exit 0 (completed), not "failed".
. "${srcdir:-.}/lib/tap.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM: without it Open MPI aborts such a job itself"
heat2d=$(cd "${top_builddir:-..}/examples" 2> /dev/null && pwd)/heat2d
empirun=$(cd "${top_builddir:-..}/src/mpirun" && pwd)/elastic-mpirun
exec_bin=$(cd "${top_builddir:-..}/src/exec" 2> /dev/null && pwd)/elastic-exec
[ -x "$heat2d" ] && [ -x "$exec_bin" ] || skip_all "heat2d or elastic-exec not built"
tmp=$(mktemp -d)
job=
trap '[ -n "$job" ] && kill -KILL $job 2> /dev/null; pkill -KILL -f "$tmp/" 2> /dev/null; rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/cache
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1
unset ELASTIC_RESUME ELASTIC_EVENT_LOG ELASTIC_RUN_DIR ELASTIC_MPIRUN SLURM_JOB_ID
export ELASTIC_SNAPSHOT_PERIOD=5 ELASTIC_PERSIST_PERIOD=10
np=4
app=("$heat2d" --nx 96 --ny 80 --steps 300 --progress 10)
checksum_of() { tr -d '\0' < "$1" | grep -a -o 'checksum [0-9a-f]*' | tail -n 1 | cut -d' ' -f2; }
job_procs() { pgrep -f "$tmp/" | grep -v -x "$$" | tr '\n' ' '; }
mkdir -p "$tmp/tmp"

# hold HOW RANK PROG ARGS...: in the first attempt, rank RANK stops
# itself before it execs PROG (stop) or sleeps 12 s first (sleep)
cat > "$tmp/hold" << 'EOF'
#!/bin/sh
how=$1 victim=$2
shift 2
if [ "$OMPI_COMM_WORLD_RANK" = "$victim" ] && [ "${ELASTIC_ATTEMPT:-1}" = 1 ]; then
    case $how in
        stop) kill -STOP $$ ;;
        sleep) sleep 12 ;;
    esac
fi
exec "$@"
EOF
chmod +x "$tmp/hold"

# rank_pid NAME R: the heat2d process of rank R in job NAME
rank_pid() {
    local f p
    for f in /proc/[0-9]*/environ; do
        { tr '\0' '\n' < "$f"; } 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" || continue
        { tr '\0' '\n' < "$f"; } 2> /dev/null | grep -qx "ELASTIC_SNAPSHOT_DIR=$tmp/snap.$1" || continue
        p=${f#/proc/}
        p=${p%/environ}
        tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null | grep -q "^$heat2d " && echo "$p" && return 0
    done
    return 1
}
# (Open MPI's segments are in elastic-mpirun's directory of the attempt,
# /dev/shm/elastic-mpirun.PID.XXXXXX/)
in_mpi_init() { grep -q '/dev/shm/\([^ ]*/\)\?sm_segment\.' "/proc/$1/maps"; }
loaded() { grep -q "\"event\":\"rank_loaded\",\"rank\":$2," "$tmp/run.$1/attempt-1/events.jsonl"; }
# end_job NAME WHAT SECONDS: wait for the background job ($job) to end;
# its exit status in rc
end_job() {
    wait_for_exit "$job" "$3"
    ok $? "$1: $2" || pkill -KILL -P "$job"
    wait "$job"
    rc=$?
    job=
}

ELASTIC_SNAPSHOT_DIR=$tmp/ref TMPDIR=$tmp/tmp timeout 300 "$empirun" -q --run-dir "$tmp/ref-run" \
    --exec "$exec_bin" --mca btl self,sm,tcp -n $np "${app[@]}" > "$tmp/ref.out" 2>&1
ok $? "failure-free run under elastic-mpirun + elastic-exec"
ref=$(checksum_of "$tmp/ref.out")

# killed NAME HELD VICTIMS WAITING: rank HELD stops before MPI_Init, the
# ranks VICTIMS (in order) are SIGKILLed inside it, and the ranks WAITING
# ("0, 2, 3") are named as never having finished it
killed() {
    local name=$1 held=$2 victims=$3 waiting=$4 r p pids= segs= rc t s f left more
    ELASTIC_SNAPSHOT_DIR=$tmp/snap.$name TMPDIR=$tmp/tmp "$empirun" --init-timeout 8 \
        --max-relaunches 2 --run-dir "$tmp/run.$name" --exec "$exec_bin" --mca btl self,sm,tcp \
        -n $np "$tmp/hold" stop "$held" "${app[@]}" > "$tmp/$name.out" 2>&1 &
    job=$!
    for r in $(seq 0 $((np - 1))); do
        [ "$r" = "$held" ] && continue
        wait_until 120 loaded "$name" "$r" || diag "$name: rank $r never said it loaded"
        p=
        wait_until 60 eval 'p=$(rank_pid "$name" "$r")' || diag "$name: no process for rank $r"
        wait_until 60 in_mpi_init "$p" || diag "$name: rank $r (pid $p) never entered MPI_Init"
        pids="$pids $p"
        segs="$segs $(grep -o '/dev/shm/[^ ]*sm_segment\.[^ ]*' "/proc/$p/maps" 2> /dev/null | sort -u | tr '\n' ' ')"
    done
    ok $([ -n "$segs" ]; echo $?) "$name: the ranks but $held are inside MPI_Init (segments:$segs)"
    is "$(grep -c '"event":"rank_initialized"' "$tmp/run.$name/attempt-1/events.jsonl")" 0 \
        "$name: no rank said it finished MPI_Init"
    for r in $victims; do
        p=$(rank_pid "$name" "$r") && kill -KILL "$p"
        ok $? "$name: rank $r SIGKILLed inside MPI_Init (pid $p)"
    done
    t=$(now_ms)
    end_job "$name" "the job did not hang" 300
    is "$rc" 0 "$name: exit 0" || tail -n 30 "$tmp/$name.out" | sed 's/^/# /'
    is "$(checksum_of "$tmp/$name.out")" "$ref" "$name: the failure-free checksum"
    # the first death named, the others counted
    more=$(($(echo $victims | wc -w) - 1))
    [ "$more" -gt 0 ] && more=" and $more more" || more=
    grep -a -q "warn: ranks $waiting of $np never finished MPI_Init: still not [0-9.]* s after rank ${victims%% *} on [^ ]* killed by signal 9 (Killed)$more (--init-timeout 8 s): stopping the attempt" "$tmp/$name.out"
    ok $? "$name: one line says which ranks never finished MPI_Init, after how long" ||
        grep -a "MPI_Init" "$tmp/$name.out" | sed 's/^/# /'
    s=$(grep -a -o "warn: ranks .* never finished MPI_Init: still not [0-9.]* s" "$tmp/$name.out" |
        head -n 1 | sed 's/.* still not \([0-9.]*\) s$/\1/')
    ok $(awk -v s="$s" 'BEGIN { exit !(s >= 8 && s < 20) }'; echo $?) \
        "$name: the attempt was stopped after --init-timeout (${s:-?} s after the death)"
    grep -a -q "attempt 1 failed after .*never finished MPI_Init.*: relaunching (1 of 2)" "$tmp/$name.out"
    ok $? "$name: the attempt was relaunched, counted against --max-relaunches"
    grep -a -q "summary: completed (exit 0) after 2 attempts" "$tmp/$name.out"
    ok $? "$name: completed in the second attempt"
    diag "$name: $((($(now_ms) - t) / 1000)) s from the kill to the end"
    is "$(job_procs)" "" "$name: no process of the job is left"
    left=
    for f in $segs; do [ -e "$f" ] && left="$left $f"; done
    is "$left" "" "$name: none of the first attempt's /dev/shm segments is left"
    is "$(ls -A "$tmp/tmp")" "" "$name: nothing is left in TMPDIR (session directory, wrappers')"
}

killed stop-kill 2 1 "0, 2, 3"
# rank 0 first, as in the campaign, then another
killed stop-kill2 1 "0 3" "1, 2"

# slow to start, nobody dead: rank 2 sleeps 12 s before MPI_Init, its
# peers wait inside MPI_Init all that time, far beyond --init-timeout
ELASTIC_SNAPSHOT_DIR=$tmp/snap.slow TMPDIR=$tmp/tmp timeout 300 "$empirun" --init-timeout 2 \
    --max-relaunches 2 --run-dir "$tmp/run.slow" --exec "$exec_bin" --mca btl self,sm,tcp \
    -n $np "$tmp/hold" sleep 2 "${app[@]}" > "$tmp/slow.out" 2>&1
is "$?" 0 "slow start: exit 0" || tail -n 30 "$tmp/slow.out" | sed 's/^/# /'
is "$(checksum_of "$tmp/slow.out")" "$ref" "slow start: the failure-free checksum"
grep -a -q "summary: completed (exit 0) after 1 attempt " "$tmp/slow.out"
ok $? "slow start: one attempt, not stopped"
grep -a -q "MPI_Init" "$tmp/slow.out"
ok $((!$?)) "slow start: no MPI_Init deadline ran" || grep -a MPI_Init "$tmp/slow.out" | sed 's/^/# /'
is "$(grep -c '"event":"rank_initialized"' "$tmp/run.slow/attempt-1/events.jsonl")" $np \
    "slow start: every rank said it finished MPI_Init"
is "$(job_procs)" "" "slow start: no process of the job is left"

# preempted inside MPI_Init: rank 2 sleeps before it, the others are in it
# when elastic-mpirun gets SIGTERM.  No rank computed anything, so nothing
# is lost: the job ends suspended (exit 75, as a preemption between
# attempts), not failed, and the same command run again completes.  (The
# campaign's early SIGTERMs ended "failed, the ranks did not suspend":
# ranks without libelastic's handler yet die of the relayed SIGUSR1.)
name=preempt
ELASTIC_SNAPSHOT_DIR=$tmp/snap.$name TMPDIR=$tmp/tmp "$empirun" --init-timeout 60 \
    --run-dir "$tmp/run.$name" --exec "$exec_bin" --mca btl self,sm,tcp \
    -n $np "$tmp/hold" sleep 2 "${app[@]}" > "$tmp/$name.out" 2>&1 &
job=$!
for r in 0 1 3; do
    wait_until 120 loaded "$name" "$r" || diag "$name: rank $r never said it loaded"
    p=
    wait_until 60 eval 'p=$(rank_pid "$name" "$r")' || diag "$name: no process for rank $r"
    wait_until 60 in_mpi_init "$p" || diag "$name: rank $r (pid $p) never entered MPI_Init"
done
is "$(grep -c '"event":"rank_initialized"' "$tmp/run.$name/attempt-1/events.jsonl")" 0 \
    "$name: no rank had finished MPI_Init at the SIGTERM"
kill -TERM "$job"
end_job "$name" "the job ended after the SIGTERM" 120
is "$rc" 75 "$name: exit 75 (suspended)" || tail -n 30 "$tmp/$name.out" | sed 's/^/# /'
grep -a -q "summary: suspended (exit 75) after 1 attempt" "$tmp/$name.out"
ok $? "$name: the summary says suspended"
grep -a -q "final state: suspended - preempted (Terminated) before any rank finished MPI_Init: nothing to save" "$tmp/$name.out"
ok $? "$name: ... before any rank finished MPI_Init, nothing to save" ||
    grep -a "final state" "$tmp/$name.out" | sed 's/^/# /'
is "$(job_procs)" "" "$name: no process of the job is left"
ELASTIC_SNAPSHOT_DIR=$tmp/snap.$name TMPDIR=$tmp/tmp timeout 300 "$empirun" --init-timeout 60 \
    --run-dir "$tmp/run.$name" --exec "$exec_bin" --mca btl self,sm,tcp \
    -n $np "${app[@]}" > "$tmp/$name.rerun.out" 2>&1
is "$?" 0 "$name: the rerun of the same command exits 0" ||
    tail -n 30 "$tmp/$name.rerun.out" | sed 's/^/# /'
is "$(checksum_of "$tmp/$name.rerun.out")" "$ref" "$name: ... with the failure-free checksum"

# preempted after the end: rank 1 stops itself inside MPI_Finalize (the
# work is done, the checksum printed), then SIGTERM.  Every wrapper counts
# its rank as finished: the job completed, exit 0 (the campaign saw such a
# late SIGTERM end "failed", every wrapper exiting 75 with 0 of 1 suspended)
name=late-term
ELASTIC_TEST_KILL=1:0:finalize:STOP ELASTIC_SNAPSHOT_DIR=$tmp/snap.$name TMPDIR=$tmp/tmp \
    "$empirun" --run-dir "$tmp/run.$name" --exec "$exec_bin" --mca btl self,sm,tcp \
    -n $np "${app[@]}" > "$tmp/$name.out" 2>&1 &
job=$!
stopped() { p=$(rank_pid "$name" 1) && [ "$(awk '{print $3}' "/proc/$p/stat" 2> /dev/null)" = T ]; }
wait_for_grep '^checksum ' "$tmp/$name.out" 180 && wait_until 60 stopped && kill -TERM "$job"
ok $? "$name: SIGTERM once rank 1 is stopped inside MPI_Finalize"
end_job "$name" "the job ended after the SIGTERM" 120
is "$rc" 0 "$name: exit 0 (the work was done)" || tail -n 30 "$tmp/$name.out" | sed 's/^/# /'
is "$(checksum_of "$tmp/$name.out")" "$ref" "$name: the failure-free checksum"
grep -a -q "summary: completed (exit 0) after 1 attempt" "$tmp/$name.out"
ok $? "$name: the summary says completed"
grep -a -q "warn: every worker had finished its work before the preemption notice: nothing to suspend" \
    "$tmp/$name.out"
ok $? "$name: the wrappers say why" || tail -n 30 "$tmp/$name.out" | sed 's/^/# /'
is "$(job_procs)" "" "$name: no process of the job is left"
done_testing
