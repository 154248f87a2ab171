#!/bin/bash
# t5003-pmix-init-abort.sh - deaths during MPI_Init, and MPI_Abort, under the hosted PMIx server
#
# A rank that dies before every rank finished MPI_Init cannot be recovered
# in place (the others wait in an init fence): the launcher must see it at
# once, report "restart needed" and, with restarts left, start the group
# again under a new namespace.  MPI_Abort ends the job with its code and
# sends no fault event.  Nothing may be left behind either way.
. "${srcdir:-.}/pmix/lib.sh"

# kill_in_init NAME LAUNCHER-ARGS...: rank 2 enters MPI_Init first and is
# SIGKILLed once it mapped its shared-memory segment (it is then blocked in
# the first init fence); the other ranks start MPI_Init after that
kill_in_init() {
    local name=$1 pid seg
    shift
    pl_start "$name" 4 "$@" -- "$FT_APP" -i 2 -w "$pl_root/go.$name"
    wait_for_grep ' connected rank=2' "$pl_dir/events" 120
    ok $? "$name: rank 2 connected (entered MPI_Init)"
    pid=$(pl_rank_pid 2)
    wait_until 60 grep -q ' /dev/shm/' "/proc/$pid/maps"
    seg=$(grep -o ' /dev/shm/[^ ]*' "/proc/$pid/maps" | head -n 1 | tr -d ' ')
    [ -n "$seg" ]
    ok $? "$name: rank 2 created its segment ($seg)"
    kill -KILL "$pid"
    touch "$pl_root/go.$name"
    pl_wait 120
    [ -z "$seg" ] || [ ! -e "$seg" ]
    ok $? "$name: the dead rank's segment $seg was removed"
}

kill_in_init init-kill
is "$PL_RC" 76 "init-kill: exit 76 (restart needed), no hang" || diag "$(pl_out)" "$(pl_log)"
grep -q 'restart needed: rank 2 died during MPI_Init (signal:9)' "$pl_dir/out"
ok $? "init-kill: reported as 'restart needed' for rank 2" || diag "$(pl_out)"
is "$(grep -c 'verdict=recoverable' "$pl_dir/events")" 0 "init-kill: not treated as recoverable"
is "$(pl_count '^ft-app')" 0 "init-kill: no rank got past MPI_Init"
pl_check_clean "init-kill"

kill_in_init init-kill-restart --max-restarts 1
is "$PL_RC" 0 "init-kill with a restart: exit 0" || diag "$(pl_out)" "$(pl_log)"
grep -q ' restart attempt=1' "$pl_dir/events"
ok $? "init-kill with a restart: the group was restarted"
grep -q ' start rank=0 pid=[0-9]* nspace=elastic\.[^ ]*\.1$' "$pl_dir/events"
ok $? "init-kill with a restart: the new attempt has its own namespace (.1)"
is "$(pl_count '^ft-app: ok size 4 -> 4')" 1 "init-kill with a restart: the second attempt ran"
pl_check_clean "init-kill with a restart"

# a rank that dies before it even calls MPI_Init (it never connects)
pl_start before-init 4 --max-restarts 1 -- "$FT_APP" -b 1
pl_wait 120
is "$PL_RC" 0 "before-init: exit 0 after one restart" || diag "$(pl_out)" "$(pl_log)"
grep -q 'exit rank=1 .*status=signal:9 verdict=restart' "$pl_dir/events"
ok $? "before-init: rank 1's death needed a restart"
is "$(pl_count '^ft-app: ok size 4 -> 4')" 1 "before-init: the second attempt ran"
pl_check_clean "before-init"

# MPI_Init that never ends (here: a program that never calls it)
pl_start init-timeout 2 --init-timeout 2 -- sleep 300
pl_wait 60
is "$PL_RC" 76 "init-timeout: exit 76 (restart needed)"
grep -q 'MPI_Init did not finish within 2 s' "$pl_dir/out"
ok $? "init-timeout: reported" || diag "$(pl_out)"

# MPI_Abort: the job ends with its code, every rank is killed, and nobody
# receives a fault event (the others sit in MPI_Barrier and would print
# "error" if they did)
pl_start abort 4 -- "$FT_APP" -a 1:7
pl_wait 120
is "$PL_RC" 7 "abort: exit status is the MPI_Abort code" || diag "$(pl_out)" "$(pl_log)"
grep -q 'pmix-launch: MPI_Abort by rank 1 with code 7' "$pl_dir/out"
ok $? "abort: reported with rank and code" || diag "$(pl_out)"
grep -q ' abort rank=1 code=7 ' "$pl_dir/events"
ok $? "abort: the server's abort upcall saw it"
is "$(grep -c 'verdict=aborted' "$pl_dir/events")" 4 "abort: all 4 exits are part of the abort"
is "$(pl_count '^error ')" 0 "abort: no rank was sent a fault event"
is "$(pl_count 'still alive after MPI_Abort')" 0 "abort: no rank went on"
pl_check_clean "abort"

done_testing
