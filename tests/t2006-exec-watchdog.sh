#!/bin/bash
# t2006-exec-watchdog.sh - hanging workers caught by torchelastic's file
# timer (a deadline armed on the FIFO expires: the worker gets the timer's
# signal) and by --hang-timeout (libelastic's heartbeat stops); both count
# as failures and the group restarts.
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT

# 1. file timer: rank 1 arms a 1 s deadline with SIGKILL and hangs
d=$tmp/ft
mkdir -p "$d"
exec_start "$d/out" "$d/err" --nproc-per-node 2 --max-restarts 1 --enable-file-timer \
    --event-log "$d/ev" "$WORKER" "ready:$d" "crash:0:*:hang" "timer:step:1:9" hang
exec_wait 60
is "$EXEC_RC" 137 "rank 1 hung on both attempts: the run failed with its SIGKILL (128+9)" || diag "$(cat "$d/err")"
is "$(ev_count "$d/ev" watchdog_fire kind=file_timer scope=step rank=1 signal=SIGKILL)" 2 \
    "the timer fired on each attempt, with the timer's signal"
is "$(ev_count "$d/ev" worker_exit rank=1 signal=SIGKILL state=FAILED)" 2 "rank 1 died of SIGKILL both times"
grep -q "watchdog: file timer 'step' expired" "$d/err"
ok $? "the report names the expired timer" || diag "$(cat "$d/err")"
t_arm=$(ev_get "$d/ev" worker_start ts 1)
t_fire=$(ev_get "$d/ev" watchdog_fire ts 0)
diag "first fire $(awk -v a="$t_arm" -v b="$t_fire" 'BEGIN { printf "%.2f", b - a }') s after the start"

# 2. a released timer never fires; a timer from a pid that is not a worker is ignored
d=$tmp/rel
mkdir -p "$d"
"$EXEC" --nproc-per-node 2 --enable-file-timer --event-log "$d/ev" \
    "$WORKER" "timer:a:0.5:9" "release:a" "sleep:1.5" 2> "$d/err"
is "$?" 0 "armed, released, ran past the deadline: success"
is "$(ev_count "$d/ev" watchdog_fire)" 0 "no watchdog fired"
"$EXEC" --enable-file-timer --event-log "$d/ev2" sh -c \
    'sleep 300 & printf "{\"version\":1,\"pid\":%d,\"scope_id\":\"x\",\"expiration_time\":0.5,\"signal\":9}\n" $$ > /dev/null; \
     printf "{\"version\":1,\"pid\":1,\"scope_id\":\"init\",\"expiration_time\":1,\"signal\":9}\nnot json at all\n" > "$TORCHELASTIC_TIMER_FILE"; \
     sleep 1; kill $!' 2> "$d/err2"
is "$?" 0 "garbage and a request for a foreign pid (1) did not hurt"
grep -q "not a worker of this agent" "$d/err2" && grep -q "not a JSON object" "$d/err2"
ok $? "both were logged and ignored" || diag "$(cat "$d/err2")"

# 3. --hang-timeout: a libelastic worker reports progress, then stops
if [ -x "$LIBWORKER" ]; then
    d=$tmp/hang
    mkdir -p "$d"
    exec_start "$d/out" "$d/err" --nproc-per-node 2 --max-restarts 1 --hang-timeout 1 \
        --event-log "$d/ev" "$LIBWORKER" "progress:5:20" "crash:0:0:hang" "crash:*:1:exit=0" "progress:10:300" hang
    exec_wait 60
    is "$EXEC_RC" 0 "rank 0 stopped reporting on attempt 0: killed, restarted, success" || diag "$(cat "$d/err")"
    is "$(ev_count "$d/ev" watchdog_fire kind=hang rank=0 step=5)" 1 "the hang watchdog fired for rank 0 at step 5"
    is "$(ev_count "$d/ev" watchdog_fire kind=hang rank=1)" 0 "rank 1, which kept reporting, was not killed"
    is "$(ev_count "$d/ev" restart root_cause_rank=0)" 1 "the restart names rank 0"
    is "$(ev_count "$d/ev" watchdog_victim_alive)" 0 "the victim died at once: no report of a survivor"
else
    for i in 1 2 3 4 5; do skip "libelastic is not built (no MPI)"; done
fi

# 5. a watchdog victim that is still there 5 s after the SIGKILL (#18): the
# worker is a shell that runs the libelastic program in the background and
# then becomes `sleep`; the watchdog SIGKILLs the reporting process (the
# program), the worker's own process lives on.  It is reported with its
# threads, and its process group is SIGKILLed (before, it lived until
# --shutdown-timeout, here 120 s, ran out)
if [ -x "$LIBWORKER" ]; then
    d=$tmp/victim
    mkdir -p "$d"
    exec_start "$d/out" "$d/err" --hang-timeout 1 --shutdown-timeout 120 --max-restarts 0 \
        --event-log "$d/ev" \
        sh -c '"$0" progress:5:20 hang & echo $! > "$1/prog"; exec sleep 300' "$LIBWORKER" "$d"
    exec_wait 90
    is "$EXEC_RC" 137 "the worker died of the group's SIGKILL, long before --shutdown-timeout" ||
        diag "$(cat "$d/err")"
    prog=$(cat "$d/prog" 2> /dev/null)
    is "$(ev_count "$d/ev" watchdog_fire kind=hang rank=0 step=5 target_pid="$prog")" 1 \
        "the watchdog SIGKILLed the reporting process ($prog), not the worker's"
    is "$(ev_count "$d/ev" watchdog_victim_alive rank=0 signal=SIGKILL target_pid="$prog")" 1 \
        "the worker still there after 5 s was reported once"
    grep -q "rank 0: pid $prog still there [0-9][.0-9]* s after the watchdog's SIGKILL (threads: $prog Z); sending SIGKILL to its process group" "$d/err"
    ok $? "the log names it and its thread's state (a zombie: its parent, the worker, does not reap)" ||
        diag "$(grep -a 'still there' "$d/err")"
    t_fire=$(ev_get "$d/ev" watchdog_fire ts 0)
    t_exit=$(ev_get "$d/ev" worker_exit ts 0)
    awk -v a="$t_fire" -v b="$t_exit" 'BEGIN { exit !(b - a >= 4.5 && b - a < 60) }'
    ok $? "the worker ended 5 s after the fire, not at --shutdown-timeout" ||
        diag "fire $t_fire, exit $t_exit"
else
    for i in 1 2 3 4 5; do skip "libelastic is not built (no MPI)"; done
fi

# 4. a worker that never attached to the heartbeat is not judged by it
"$EXEC" --hang-timeout 0.3 "$WORKER" "sleep:1.2" 2> "$tmp/err"
is "$?" 0 "a worker without libelastic may be quiet longer than --hang-timeout"
done_testing
