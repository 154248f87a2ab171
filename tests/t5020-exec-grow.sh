#!/bin/bash
# t5020-exec-grow.sh - `elastic-exec --nproc-per-node 8` jobs lose ranks in
# place and grow back with new processes
#
# heat2d, sgd and the blob application kill ranks of their own (real
# SIGKILLs); libelastic shrinks, then finds the room elastic-exec writes
# into the heartbeat files (the slots of the dead ranks), spawns that many
# new processes of the same program (MPI_Comm_spawn, served by
# elastic-exec's PMIx server), merges them, re-shards every array and
# calls the handler: the job ends with 8 working ranks, two of them new
# processes (new pids, original ranks 8 and 9), and the failure-free
# checksum.  A new process killed in its join, a working rank killed after
# the spawn, grow_policy never.  Nothing may be left behind.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] && [ -x "$SGD" ] || skip_all "the examples are not built"
BLOB=./libelastic/blob_app
PY=/usr/bin/python3
EVENTS=${srcdir:-.}/libelastic/check_events.py

# the room is agreed at every step; snapshots every 7, checks every 5
export ELASTIC_SNAPSHOT_PERIOD=7 ELASTIC_RESHARD_CHECK_PERIOD=5 ELASTIC_SIGNAL_CHECK_PERIOD=1 ELASTIC_GROW_JOIN_TIMEOUT=20
export ELASTIC_GROW_POLICY=at-once # the default (pmix/exec.sh says never for the others)
# Open MPI's sm BTL does not reach a spawned job: a job that grows needs tcp
grow_btl=(--mpi-btl sm,tcp)
heat=("$HEAT2D" --nx 64 --ny 64 --steps 120)
sgd=("$SGD" --steps 60)
blob=("$BLOB" --steps 60 --items 203)

# ref NAME APP ARGS...: the failure-free checksum of an 8-rank run
ref() {
    local name=$1
    shift
    ep_start "$name" 8 -- "$@"
    ep_wait 180
    is "$EP_RC" 0 "$name: exit 0" >&2 || diag "$(ep_err)" >&2
    ep_checksum
}
heat_ref=$(ref heat-ref "${heat[@]}")
sgd_ref=$(ref sgd-ref "${sgd[@]}")
blob_ref=$(ref blob-ref "${blob[@]}")

# events FILE: libelastic's events, one line each, the steps after the
# first event's as S: the room is agreed at the first step after
# elastic-exec reaped the dead ranks and wrote it, and which step that is
# depends on the machine's load (the first rollback's step does not); the
# job's last line, libelastic's "completed", is checked on its own
events() { "$PY" "$EVENTS" "$1" | grep -v '^completed ' | awk 'NR > 1 { $2 = "S" } 1'; }

# grow NAME WORLD EVENTS SPAWNED APP ARGS...: 8 ranks, the app's own
# failures; the job ends in a world of WORLD with the failure-free checksum,
# libelastic's events EVENTS, and SPAWNED (a list) started by elastic-exec.
# Two ranks that die at once free their slots as elastic-exec reaps each: a
# case that names both new ranks of one growth sets BATCH=2
# (ELASTIC_GROW_MIN_BATCH), or a loaded machine can agree the room between
# the two reaps and grow one rank at a time
grow() {
    local name=$1 world=$2 want=$3 spawned=$4 sum
    shift 4
    case $1 in "$SGD") sum=$sgd_ref ;; "$BLOB") sum=$blob_ref ;; *) sum=$heat_ref ;; esac
    ELASTIC_GROW_MIN_BATCH=${BATCH:-1} ELASTIC_EVENT_LOG=$ep_root/$name.lev ep_start "$name" 8 "${grow_btl[@]}" -- "$@"
    ep_wait 240
    is "$EP_RC" 0 "$name: exit 0" || diag "$(ep_err)"
    is "$(ep_checksum)" "$sum" "$name: the failure-free checksum" || diag "$(ep_out)"
    grep -q "^final world $world," "$ep_dir/out"
    ok $? "$name: finished in a world of $world" || diag "$(ep_out)"
    is "$(events "$ep_root/$name.lev")" "$want" "$name: libelastic's events"
    "$PY" "$EVENTS" "$ep_root/$name.lev" | tail -n 1 | grep -q "^completed [0-9]* size=$world\$"
    ok $? "$name: the event log ends with the job's completion at $world ranks"
    is "$(ep_get workers_spawned ranks 2>/dev/null | tr -d ' []')" "$spawned" \
        "$name: elastic-exec started ranks $spawned" || diag "$(ep_log | grep spawn)"
    ep_check_clean "$name"
}

# two ranks lost at once, two new processes (8 and 9) into their slots
BATCH=2 grow heat 8 "reshard_down 35 8->6 failed=3,5 spares= attempts=1
reshard_up S 6->8 failed= spares= attempts=1 new=8,9" "8,9" \
    "${heat[@]}" --fail 3:40 --fail 5:40
for r in 8 9; do
    p=$(ep_rank_pid $r)
    ok $([ -n "$p" ] && ! grep -qw "$p" <<< "$(for o in 0 1 2 3 4 5 6 7; do ep_rank_pid $o; done)" && echo 0 || echo 1) \
        "heat: rank $r is a new process (pid $p)"
done
is "$(ep_ev worker_exit state=SUCCEEDED)" 8 "heat: 8 workers ended with the work done (6 old, 2 new)"
is "$(ep_ev restart)" 0 "heat: no restart"
grep -q "SUCCEEDED: 10 ranks (2 spawned), 2 lost and recovered in place (ranks 3 5)" "$ep_dir/err"
ok $? "heat: the agent's summary names the spawned ranks and the losses" || diag "$(ep_err)"

grow sgd 8 "reshard_down 14 8->7 failed=2 spares= attempts=1
reshard_up S 7->8 failed= spares= attempts=1 new=8" "8" "${sgd[@]}" --fail 2:20
grow blob 8 "reshard_down 14 8->7 failed=1 spares= attempts=1
reshard_up S 7->8 failed= spares= attempts=1 new=8" "8" "${blob[@]}" --fail 1:20

# the new process dies in its join: grow_failed, then another (rank 9)
grow join-dies 8 "reshard_down 35 8->7 failed=3 spares= attempts=1
grow_failed S 7->7 failed=8 spares= attempts=1 new=8
reshard_up S 7->8 failed= spares= attempts=1 new=9" "9" \
    "${heat[@]}" --fail 3:40 --fail 8:0:join

# a working rank dies after the spawn, before the merge: the new process
# (8) is not taken in and ends (through MPI_Finalize, as finished), the
# survivors recover, then grow back to 8.  Rank 1's slot is free at once,
# rank 3's once process 8 has ended: one growth by two (9, 10) or two by
# one, as the machine's timing has it
ELASTIC_EVENT_LOG=$ep_root/grow-dies.lev ep_start grow-dies 8 "${grow_btl[@]}" -- "${heat[@]}" --fail 3:40 --fail 1:0:grow
ep_wait 240
is "$EP_RC" 0 "grow-dies: exit 0" || diag "$(ep_err)"
is "$(ep_checksum)" "$heat_ref" "grow-dies: the failure-free checksum" || diag "$(ep_out)"
grep -q "^final world 8," "$ep_dir/out"
ok $? "grow-dies: finished in a world of 8" || diag "$(ep_out)"
evs=$(events "$ep_root/grow-dies.lev")
is "$(head -n 2 <<< "$evs")" "reshard_down 35 8->7 failed=3 spares= attempts=1
reshard_down S 7->6 failed=1 spares= attempts=1" "grow-dies: rank 3 lost, then rank 1 in the growth"
is "$(tail -n +3 <<< "$evs" | sed -n 's/^reshard_up S [67]->[78] failed= spares= attempts=1 new=//p' | tr '\n' ',')" \
    "9,10," \
    "grow-dies: then back to 8 with new processes 9 and 10" || diag "$evs"
is "$(ev_get "$ep_dir/ev" workers_spawned ranks 0 | tr -d ' []')" 8 "grow-dies: elastic-exec started rank 8 first"
is "$(ep_ev worker_exit rank=8 state=SUCCEEDED)" 1 \
    "grow-dies: the new process that was not taken in ended as finished" || diag "$(ep_log | grep worker_exit)"
ep_check_clean grow-dies

# grow_policy never: the room stays unused
ELASTIC_GROW_POLICY=never grow never 7 "reshard_down 35 8->7 failed=3 spares= attempts=1" "" \
    "${heat[@]}" --fail 3:40
is "$(ep_ev workers_spawned)" 0 "never: nothing spawned"

# the default transport on one node (sm) does not reach spawned processes:
# the room stays 0, the agent says why once, the job ends at 7
ELASTIC_EVENT_LOG=$ep_root/sm.lev ep_start sm-only 8 -v -- "${heat[@]}" --fail 3:40
ep_wait 240
is "$EP_RC" 0 "sm only: exit 0" || diag "$(ep_err)"
grep -q "^final world 7," "$ep_dir/out"
ok $? "sm only: finished in a world of 7" || diag "$(ep_out)"
is "$(grep -c 'grows back into new processes only with --mpi-btl sm,tcp' "$ep_dir/err")/$(ep_ev workers_spawned)" \
    "1/0" "sm only: the agent said once why the slot stays empty; nothing spawned" || diag "$(ep_err)"

# a grown job suspended (SIGTERM to elastic-exec: exit 75, the L3 file
# written by all 8 ranks, the two new ones among them), resumed at 5 ranks
# from that file: the failure-free checksum
long=("$HEAT2D" --nx 64 --ny 64 --steps 600 --sleep 5)
long_ref=$(ref long-ref "$HEAT2D" --nx 64 --ny 64 --steps 600)
mkdir -p "$ep_root/snaps"
ELASTIC_GROW_MIN_BATCH=2 ELASTIC_EVENT_LOG=$ep_root/suspend.lev ELASTIC_SNAPSHOT_DIR=$ep_root/snaps \
    ep_start suspend 8 "${grow_btl[@]}" --health-port 0 -- "${long[@]}" --fail 3:40 --fail 5:40
if wait_for_grep '"reshard_up"' "$ep_root/suspend.lev" 120; then
    # the growth in /metrics: 2 lost, 2 spawned, no room left
    port=$(ep_get agent_start health_port)
    $PY "${srcdir:-.}/exec/httpcheck.py" metrics "$port" > "$ep_root/metrics" 2>&1
    is "$(grep -E '^elastic_agent_(ranks_lost_total|ranks_spawned_total|spawn_capacity) ' "$ep_root/metrics" |
        awk '{ printf "%s ", $2 }')" "2 2 0 " "suspend: /metrics: 2 ranks lost, 2 spawned, capacity 0" ||
        diag "$(cat "$ep_root/metrics")"
    # ... and libelastic's world changes, from the workers' heartbeats: the
    # shrink and the growth, the last one 6 -> 8 with 2 new ranks, its
    # spawn and restore timed
    is "$(sed -n 's/^elastic_agent_world_changes //p' "$ep_root/metrics")" 2 \
        "suspend: /metrics: 2 world changes" || diag "$(cat "$ep_root/metrics")"
    is "$(sed -n 's/^elastic_agent_last_world_change_size{kind="reshard_up",size="\(old\|new\|new_ranks\)"} //p' \
        "$ep_root/metrics" | tr '\n' ' ')" "6 8 2 " \
        "suspend: /metrics: the last one is reshard_up 6 -> 8 with 2 new ranks" ||
        diag "$(grep world_change "$ep_root/metrics")"
    awk '/^elastic_agent_last_world_change_seconds\{kind="reshard_up",phase="(spawn|restore|total)"\}/ { if ($2 > 0) n++ }
        END { exit n == 3 ? 0 : 1 }' "$ep_root/metrics"
    ok $? "suspend: /metrics: its spawn, restore and total times" ||
        diag "$(grep world_change "$ep_root/metrics")"
    kill -TERM "$ep_pid"
fi
ep_wait 180
is "$EP_RC" 75 "suspend: the grown job suspended (exit 75)" || diag "$(ep_err)"
f=$(ls "$ep_root"/snaps/snap-*.h5 2> /dev/null | tail -n 1)
is "$(events "$ep_root/suspend.lev" | sed -n 's/^suspend S size=\([0-9]*\) .*file=yes$/\1/p')" 8 \
    "suspend: the snapshot was written by the 8 ranks of the grown world" ||
    diag "$(events "$ep_root/suspend.lev")"
ELASTIC_RESUME_FROM=$f ep_start resume 5 -- "${long[@]}"
ep_wait 180
is "$EP_RC" 0 "resume at 5 ranks: exit 0" || diag "$(ep_err)"
grep -q "^resumed from step [0-9]* (file .*, world 8 -> 5)" "$ep_dir/out"
ok $? "resume at 5 ranks: from the grown job's file (world 8 -> 5)" || diag "$(ep_out)"
is "$(ep_checksum)" "$long_ref" "resume at 5 ranks: the failure-free checksum" || diag "$(ep_out)"
ep_check_clean resume

done_testing
