#!/bin/bash
# t5016-exec-pmix-start.sh - a rank held before its first progress report
# under `elastic-exec --nproc-per-node 8 --hang-timeout T` ends the job in
# bounded time, with the truth; a program without libelastic is untouched
#
# --hang-timeout judges heartbeats, and a rank that never attached has
# none.  What is known of it instead: its process state (stopped longer
# than --start-timeout: hung), its attached peers (overdue while it never
# reported: it is the first suspect), and the hosted PMIx server (MPI_Init
# not finished within --start-timeout once a rank entered it).  A rank lost
# before MPI_Init completed cannot be recovered in place: the group
# restarts (--max-restarts) or fails; one lost after MPI_Init is recovered
# in place.  Nothing may be left behind.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] || skip_all "the examples are not built"

HOLD=${srcdir:-.}/pmix/start-hold.sh
heat=("$HEAT2D" --nx 64 --ny 64 --steps 400 --sleep 5 --progress 10)
# timeouts with room for MPI_Init and a recovery on a loaded machine
wd=(--hang-timeout 6 --start-timeout 8)

ep_start ref 8 -- "${heat[@]}"
ep_wait 180
ref=$(ep_checksum)
is "$EP_RC" 0 "reference run: exit 0 (checksum $ref)" || diag "$(ep_err)"

# finished NAME RC [WORLD]: exit RC; with WORLD, the checksum in that world
finished() {
    is "$EP_RC" "$2" "$1: exit $2 (not hung)" || diag "$(tail -n 20 "$ep_dir/err")"
    if [ -n "$3" ]; then
        is "$(ep_checksum)" "$ref" "$1: the failure-free checksum" || diag "$(ep_out)"
        grep -q "^final world $3," "$ep_dir/out"
        ok $? "$1: finished in a world of $3" || diag "$(ep_out)"
    fi
}

# 1. stopped before MPI_Init, the others wait inside it: the watchdog finds
# it by its state after --start-timeout, and the group restarts
ep_start stop-init 8 "${wd[@]}" --max-restarts 1 -- "$HOLD" stop 3 "${heat[@]}"
ep_wait 180
finished stop-init 0 8
# by its state, or by MPI_Init's deadline (the same timeout, counted from the
# namespace's creation, so usually first), which names it stopped
is "$(($(ep_ev watchdog_fire kind=start rank=3 attempt=0 stopped=True) +
    $(ep_ev watchdog_fire kind=mpi_init rank=3 attempt=0 in_mpi_init=False)))" 1 \
    "stop-init: rank 3 killed by the start timeout ($(ep_get watchdog_fire kind))"
grep -q "this one had not entered it and is stopped\|stopped for .* before its first progress report" "$ep_dir/err"
ok $? "stop-init: the reason says it was stopped" || diag "$(grep watchdog "$ep_dir/err")"
is "$(ep_ev watchdog_fire)/$(ep_ev restart)" "1/1" \
    "stop-init: nobody else killed (not by MPI_Init's deadline either), one restart"
ep_check_clean stop-init

# 2. the same without a restart left: the group fails, bounded, with the
# watchdog's kill as its root cause
ep_start stop-init-fail 8 "${wd[@]}" --max-restarts 0 -- "$HOLD" stop 3 "${heat[@]}"
ep_wait 180
finished stop-init-fail 137
grep -q "MPI_Init did not finish within .*), start-timeout\|stopped for .* before its first progress report" "$ep_dir/err"
ok $? "stop-init-fail: the failure names the start timeout" || diag "$(ep_err)"
ep_check_clean stop-init-fail

# 3. a rank that is not stopped but keeps MPI_Init from finishing (it has
# not entered it): the PMIx server's MPI_Init deadline, which is the start
# timeout under --hang-timeout, kills it, and the group restarts
ep_start sleep-init 8 "${wd[@]}" --max-restarts 1 -- "$HOLD" sleep 5 "${heat[@]}"
ep_wait 180
finished sleep-init 0 8
is "$(ep_ev watchdog_fire kind=mpi_init rank=5 setting=start-timeout in_mpi_init=False)" 1 \
    "sleep-init: rank 5 killed by MPI_Init's deadline (the start timeout)"
is "$(ep_ev watchdog_fire)/$(ep_ev restart)" "1/1" "sleep-init: nobody else killed, one restart"
ep_check_clean sleep-init

# stop_rank NAME RANK PATTERN FILE: SIGSTOP RANK once PATTERN is in FILE
stop_rank() {
    if wait_for_grep "$3" "$4" 120; then
        kill -STOP "$(ep_rank_pid "$2")"
    else
        diag "$1: '$3' never appeared"
    fi
}

# 4. a rank that never attached, stopped while its peers run: they get
# stuck on it, and of the overdue ranks it is the one that never reported;
# it was through MPI_Init, so the others recover in place
ep_start nohb-run 8 "${wd[@]}" -- "$HOLD" nohb 2 "${heat[@]}"
stop_rank nohb-run 2 '^step 100$' "$ep_dir/out"
ep_wait 180
finished nohb-run 0 7
is "$(ep_ev watchdog_fire kind=hang rank=2 attached=False)/$(ep_ev rank_lost rank=2)" "1/1" \
    "nohb-run: the watchdog killed rank 2 (never attached), lost in place"
is "$(ep_ev watchdog_fire)/$(ep_ev restart)" "1/0" "nohb-run: nobody else killed, no restart"
ep_check_clean nohb-run

# 5. the same rank stopped as soon as MPI_Init finished: its peers may still
# be before their first report too; it is found by its state or as the
# one that never reported, and the job ends with the failure-free result
ep_start nohb-init 8 "${wd[@]}" --max-restarts 1 -- "$HOLD" nohb 2 "${heat[@]}"
stop_rank nohb-init 2 '"mpi_initialized"' "$ep_dir/ev"
ep_wait 180
finished nohb-init 0
is "$(ep_checksum)" "$ref" "nohb-init: the failure-free checksum" || diag "$(ep_out)"
is "$(ep_ev watchdog_fire rank=2 attached=False)/$(ep_ev watchdog_fire)" "1/1" \
    "nohb-init: the watchdog killed rank 2 and nobody else" ||
    diag "$(grep '"watchdog_fire"\|"restart"' "$ep_dir/ev")"
ep_check_clean nohb-init

# 5b. a rank killed inside elastic_manager_create, before its first
# collective (right after MPI_Init; on the first attempt only): nothing can
# be recovered yet.  The others' collectives return the failure (before,
# MPI_COMM_WORLD's fatal handler made them MPI_Abort with
# MPI_ERR_PROC_FAILED, 75, read as "suspended"): elastic_manager_create
# says relaunch, they exit 76, and the group restarts
first_only='if [ "${ELASTIC_RESTART_COUNT:-0}" = 0 ]; then export ELASTIC_TEST_KILL=4:0:create; fi; exec "$0" "$@"'
ep_start create 8 "${wd[@]}" --max-restarts 1 -- /bin/sh -c "$first_only" "${heat[@]}"
ep_wait 180
finished create 0 8
is "$(ep_ev restart)/$(ep_ev job_abort)" "1/0" "create: one restart, nobody called MPI_Abort" ||
    diag "$(grep -i 'abort\|restart' "$ep_dir/err")"
grep -q "a process failed in .*, before the manager was made (nothing to recover from): relaunch" \
    "$ep_dir/err"
ok $? "create: the survivors said why they relaunch" || diag "$(grep heat2d "$ep_dir/err")"
ep_check_clean create

# 6. a program without libelastic never attaches, and runs much longer
# than both timeouts: untouched
ep_start plain 8 --hang-timeout 0.5 --start-timeout 1 -- "${heat[@]}" --no-elastic
ep_wait 180
finished plain 0
is "$(ep_checksum)" "$ref" "plain: the failure-free checksum"
is "$(ep_ev watchdog_fire)" 0 "plain: the watchdog fired on nothing"
ep_check_clean plain

done_testing
