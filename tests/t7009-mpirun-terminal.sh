#!/bin/bash
# t7009-mpirun-terminal.sh - mpirun runs in a session of its own and only
# elastic-mpirun signals it; what a user at a terminal expects still holds:
#   Ctrl-C (SIGINT to the process group) stops the job, nothing is left;
#   a second Ctrl-C kills an mpirun that does not stop (here: SIGSTOPped),
#   and the ranks it leaves behind are killed too;
#   Ctrl-Z (SIGTSTP to the group) stops elastic-mpirun and the ranks,
#   SIGCONT continues them, and the job still suspends on SIGTERM;
#   SIGKILL to elastic-mpirun: mpirun and the ranks go too (PR_SET_PDEATHSIG);
#   the attempt's directory of Open MPI segments in /dev/shm, which the
#   killed elastic-mpirun could not remove, goes with the next
#   elastic-mpirun run (its name holds the dead one's pid).
. "${srcdir:-.}/mpirun/lib.sh"
command -v setsid > /dev/null || skip_all "no setsid(1) to give a job its own process group"
trap 'pkill -KILL -f "$tmp/" 2> /dev/null; em_cleanup' EXIT

# start_job ID ARGS...: elastic-mpirun in its own session (its pid is its
# process group); sets em_pid
start_job() {
    local out=$tmp/out.$1
    shift
    setsid "$EM" "$@" > "$out" 2>&1 &
    em_pid=$!
}
app() { echo --no-wrap --run-dir "$tmp/run.$1" -n 3 $EM_MPI_ARGS "$LOOPAPP" --state "$tmp/state.$1" --steps 100000 --persist 10 --step-ms 25; }
job_procs() { pgrep -f "$tmp/" | grep -v -x "$$" | tr '\n' ' '; }
no_job_procs() { [ -z "$(job_procs)" ]; }
ranks() { pgrep -f "^$LOOPAPP .*$tmp/state.$1"; }
# all_state ID STATE: every rank of job ID (and there are 3) is in STATE
all_state() {
    local p n=0
    for p in $(ranks "$1"); do
        [ "$(sed 's/.*) \(.\).*/\1/' "/proc/$p/stat" 2> /dev/null)" = "$2" ] || return 1
        n=$((n + 1))
    done
    [ "$n" = 3 ]
}
proc_state() { sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2> /dev/null; }

# Ctrl-C
start_job int $(app int)
wait_for_grep '^persisted 10$' "$tmp/out.int" 120
ok $? "Ctrl-C: the job runs"
kill -INT -- "-$em_pid"
em_wait 120
is "$EM_RC" 130 "Ctrl-C: elastic-mpirun stops the job, exit 130" || sed 's/^/# /' "$tmp/out.int"
grep -q 'Interrupt received: stopping the job (no relaunch)' "$tmp/out.int"
ok $? "Ctrl-C: it was elastic-mpirun that stopped mpirun"
is "$(job_procs)" "" "Ctrl-C: no process of the job is left"

# a second Ctrl-C when mpirun does not stop
start_job int2 $(app int2)
wait_for_grep '^persisted 10$' "$tmp/out.int2" 120
mpirun_pid=$(pgrep -P "$em_pid" | head -n 1)
ok $([ -n "$mpirun_pid" ] && kill -STOP "$mpirun_pid"; echo $?) "second Ctrl-C: mpirun (pid $mpirun_pid) SIGSTOPped: it cannot stop the job"
kill -INT -- "-$em_pid"
wait_for_grep 'Interrupt received: stopping the job' "$tmp/out.int2" 60
kill -INT -- "-$em_pid"
em_wait 60
is "$EM_RC" 130 "second Ctrl-C: exit 130" || sed 's/^/# /' "$tmp/out.int2"
grep -q 'Interrupt received again: killing mpirun' "$tmp/out.int2"
ok $? "second Ctrl-C: mpirun was killed"
grep -q 'processes of the job outlived mpirun (.*): killing them (SIGKILL)' "$tmp/out.int2"
ok $? "second Ctrl-C: the ranks it left behind were killed"
is "$(job_procs)" "" "second Ctrl-C: no process of the job is left"
left=$(grep -o '/dev/shm/[^ ]* was left behind by the job: removing it' "$tmp/out.int2" | wc -l)
ok $([ "$left" -ge 3 ]; echo $?) "second Ctrl-C: the ranks' $left /dev/shm segments, which the killed mpirun could not remove, were removed"
gone=1
for f in $(grep -o '/dev/shm/[^ ]* was left' "$tmp/out.int2" | cut -d' ' -f1); do [ -e "$f" ] && gone=0; done
ok $([ "$gone" = 1 ]; echo $?) "second Ctrl-C: none of them is left"

# Ctrl-Z, then fg/bg
start_job tstp $(app tstp)
wait_for_grep '^persisted 10$' "$tmp/out.tstp" 120
kill -TSTP -- "-$em_pid"
wait_until 60 all_state tstp T
ok $? "Ctrl-Z: the ranks stopped"
is "$(proc_state "$em_pid")" T "Ctrl-Z: elastic-mpirun stopped"
p=$(sed -n 's/^persisted //p' "$tmp/out.tstp" | tail -n 1)
kill -CONT -- "-$em_pid"
wait_until 60 eval "! all_state tstp T"
ok $? "SIGCONT: the ranks run again"
wait_until 120 eval "[ \$(sed -n 's/^persisted //p' '$tmp/out.tstp' | tail -n 1) -gt $p ]"
ok $? "SIGCONT: the job computes again (past step $p)"
kill -TERM "$em_pid"
em_wait 120
is "$EM_RC" 75 "after Ctrl-Z and SIGCONT, SIGTERM still suspends the job (exit 75)" || sed 's/^/# /' "$tmp/out.tstp"

# SIGKILL to elastic-mpirun
start_job kill $(app kill)
wait_for_grep '^persisted 10$' "$tmp/out.kill" 120
ok $([ -n "$(job_procs)" ]; echo $?) "SIGKILL: the job runs (pids $(job_procs))"
# its attempt's directory, named by its pid, while it runs
left=$(ls -d /dev/shm/elastic-mpirun."$em_pid".* 2> /dev/null)
ok $([ -n "$left" ]; echo $?) "SIGKILL: the job's directory of Open MPI segments is $left"
killed=$em_pid
kill -KILL "$em_pid"
wait "$em_pid" 2> /dev/null
em_pid=
wait_until 60 no_job_procs
ok $? "SIGKILL to elastic-mpirun: mpirun and the ranks are gone within 60 s" || diag "left: $(job_procs)"
# the killed one could not remove it; the next elastic-mpirun on the host
# does (one of a test running beside this one may do it first)
"$EM" --no-wrap --run-dir "$tmp/run.after" -n 1 $EM_MPI_ARGS "$LOOPAPP" --state "$tmp/state.after" \
    --steps 3 --persist 3 --step-ms 0 > "$tmp/out.after" 2>&1
is "$?" 0 "the next elastic-mpirun run completes"
ok $([ -n "$left" ] && [ ! -e "$left" ]; echo $?) "... and the killed one's directory is gone" || ls -la /dev/shm | grep elastic-mpirun | sed 's/^/# /'
# which one removed it and what it said, where no other test's
# elastic-mpirun can see the directory: a /dev/shm of its own (a mount
# namespace with a fresh tmpfs), holding a directory of the killed pid
stale=/dev/shm/elastic-mpirun.$killed.t7009x
if unshare -m true 2> /dev/null; then
    unshare -m sh -c 'mount -t tmpfs -o size=256m tmpfs /dev/shm && mkdir "$0" || exit 99
        "$@"; rc=$?; [ ! -e "$0" ] || exit 98; exit $rc' "$stale" \
        "$EM" --no-wrap --run-dir "$tmp/run.private" -n 1 $EM_MPI_ARGS "$LOOPAPP" \
        --state "$tmp/state.private" --steps 3 --persist 3 --step-ms 0 > "$tmp/out.private" 2>&1
    is "$?" 0 "in a /dev/shm of its own, the run completes and removes $stale (98: left; 99: no tmpfs)" ||
        tr -d '\0' < "$tmp/out.private" | tail -n 5 | sed 's/^/# /'
    grep -aq "removed $stale, left by elastic-mpirun $killed, which is gone" "$tmp/out.private"
    ok $? "... saying so" || tr -d '\0' < "$tmp/out.private" | tail -n 5 | sed 's/^/# /'
else
    skip "no mount namespace here (unshare -m) for a /dev/shm of its own" 2
fi
done_testing
