#!/bin/bash
# t1023-grow.sh - growth into new processes, the library's side, under
# mpirun --with-ft ulfm: the test stands in for the supervisor and writes
# the room for new ranks into the heartbeat file (version 3's `capacity`,
# src/common/heartbeat.h) that every rank maps; elastic_maybe_reshard_up
# grows into it with MPI_Comm_spawn (PRRTE starts the new processes), the
# new processes join, the arrays are re-sharded and the job ends with the
# failure-free checksum.  The room is written once, before the job starts,
# so nothing races with the job: a full world does not grow (the limit),
# a shrunk one grows at its next check.  elastic-exec's side (the room from
# the slots of ranks lost in place, MPI_Comm_spawn served by its PMIx
# server) is t5020.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
# the room is agreed at every step (with the preemption notices): the
# growth comes at the first check step after a loss, the same in every run
export ELASTIC_SNAPSHOT_PERIOD=7 ELASTIC_RESHARD_CHECK_PERIOD=5 ELASTIC_SIGNAL_CHECK_PERIOD=1
HEAT=("$EXAMPLES/heat2d" --nx 96 --ny 80 --steps 120)

# room FILE N: a heartbeat file whose capacity is N (offset 52, 4 bytes,
# little-endian; the rest zero): version 3's 56 bytes, as an older
# elastic-exec made it (libelastic grows it to version 4's size)
room() {
    head -c 56 /dev/zero > "$1"
    printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($2 & 255)) $(($2 >> 8 & 255)) 0 0)" |
        dd of="$1" bs=1 seek=52 conv=notrunc status=none
}

app_run "$tmp/ref" 4 "${HEAT[@]}"
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)"

# scenario NAME ROOM FINAL-WORLD EVENTS [mpirun args --] PROG ARGS...
# The heartbeat file is in mpirun's environment, not a -x: PRRTE gives a
# spawn its own environment, and the new processes need the file too.
scenario() {
    local name=$1 cap=$2 world=$3 want=$4 out="$tmp/$1" sum=$ref
    shift 4
    room "$out.hb" "$cap"
    ELASTIC_HEARTBEAT_FILE="$out.hb" app_run "$out" 4 -x ELASTIC_EVENT_LOG="$out.events" "$@"
    is "$MPI_RC" 0 "$name: the job succeeded" || show_failure "$out"
    case "$*" in *sgd*) sum=$sgd_ref ;; *blob_app*) sum=$blob_ref ;; esac
    is "$(checksum_of "$out")" "$sum" "$name: the failure-free checksum" || show_failure "$out"
    is "$(final_world_of "$out")" "$world" "$name: final working size $world"
    is "$(events "$out.events")" "$want" "$name: the event log"
}

# rank 3 dies at step 40: 4 -> 3, then a new process (original rank 4)
scenario heat 1 4 "reshard_down 35 4->3 failed=3 spares= attempts=1
reshard_up 35 3->4 failed= spares= attempts=1 new=4" -- "${HEAT[@]}" --fail 3:40
grep -q 'resharded at step [0-9]*: world 3 -> 4' "$tmp/heat"
ok $? "heat: the handler ran in the world of 4"
# the growth took no protecting snapshot: the new layout waits for the
# next snapshot step (grow_eager_snapshots 0, the default)
grep '"event":"reshard_up"' "$tmp/heat.events" | grep -q '"t_protect_ms":0.000,"protect_deferred":true'
ok $? "heat: the growth's protect is left to the next snapshot step"

# window: rank 1 dies at 41, six steps after the growth at 35 and before
# the next snapshot step (42): the survivors recover step 35 from the
# snapshot the old ranks hold in the old layout (the growth deferred its
# protect), and grow again
scenario window 1 4 "reshard_down 35 4->3 failed=3 spares= attempts=1
reshard_up 35 3->4 failed= spares= attempts=1 new=4
reshard_down 35 4->3 failed=1 spares= attempts=1
reshard_up 35 3->4 failed= spares= attempts=1 new=5" \
    -- "${HEAT[@]}" --fail 3:40 --fail 1:41
# ... and the new process dies there (original rank 4, the one the growth
# started): the old ranks hold every block of step 35.  mpirun's exit code
# is not checked: PRRTE 3.0 counts a spawned process's death in it
room "$tmp/window-new.hb" 1
ELASTIC_HEARTBEAT_FILE="$tmp/window-new.hb" app_run "$tmp/window-new" 4 \
    -x ELASTIC_EVENT_LOG="$tmp/window-new.events" -- "${HEAT[@]}" --fail 3:40 --fail 4:41
is "$(checksum_of "$tmp/window-new")" "$ref" "window-new: the failure-free checksum" ||
    show_failure "$tmp/window-new"
is "$(events "$tmp/window-new.events")" "reshard_down 35 4->3 failed=3 spares= attempts=1
reshard_up 35 3->4 failed= spares= attempts=1 new=4
reshard_down 35 4->3 failed=4 spares= attempts=1
reshard_up 35 3->4 failed= spares= attempts=1 new=5" "window-new: the event log"
# ... the same with the protecting snapshot inside the growth
# (grow_eager_snapshots 1; the new process takes the setting from the growth, not
# from its environment): recovered from the new layout's snapshot of 35
scenario window-eager 1 4 "reshard_down 35 4->3 failed=3 spares= attempts=1
reshard_up 35 3->4 failed= spares= attempts=1 new=4
reshard_down 35 4->3 failed=1 spares= attempts=1
reshard_up 35 3->4 failed= spares= attempts=1 new=5" \
    -x ELASTIC_GROW_EAGER_SNAPSHOTS=1 -- "${HEAT[@]}" --fail 3:40 --fail 1:41
grep '"event":"reshard_up"' "$tmp/window-eager.events" | grep -v -q '"protect_deferred"'
ok $? "window-eager: the growth took its protecting snapshot"

# rewind: rank 3 dies at 52, the survivors roll back to the snapshot of 49;
# the growth comes at the check step 50, one step after it.  Redoing that
# step costs far less than a snapshot of 32 MiB per rank (the agreed
# mean step against the agreed cost of the last snapshot): the growth
# starts from 49's snapshot, takes none, and says so
scenario rewind 1 4 "reshard_down 49 4->3 failed=3 spares= attempts=1
reshard_up 49 3->4 failed= spares= attempts=1 new=4" -- "${HEAT[@]}" --ballast 32 --fail 3:52
grep '"event":"reshard_up"' "$tmp/rewind.events" | grep -q '"t_snapshot_ms":0.000,"rewound_steps":1,"t_rewind_ms"'
ok $? "rewind: reshard_up took no snapshot and names the step it went back" ||
    diag "$(grep reshard_up "$tmp/rewind.events")"
# ... not with grow_eager_snapshots 1: a snapshot of 50 first
scenario rewind-eager 1 4 "reshard_down 49 4->3 failed=3 spares= attempts=1
reshard_up 50 3->4 failed= spares= attempts=1 new=4" \
    -x ELASTIC_GROW_EAGER_SNAPSHOTS=1 -- "${HEAT[@]}" --ballast 32 --fail 3:52
# ... nor when a step costs more than a snapshot (100 ms steps, a small
# state): a snapshot of 50 first
scenario slow-steps 1 4 "reshard_down 49 4->3 failed=3 spares= attempts=1
reshard_up 50 3->4 failed= spares= attempts=1 new=4" -- "${HEAT[@]}" --sleep 100 --fail 3:52
grep '"event":"reshard_up"' "$tmp/slow-steps.events" | grep -v -q '"rewound_steps"'
ok $? "slow-steps: the growth took a snapshot of its own step"

# A new process killed in its join, and a working rank killed during the
# growth, are t5020's (under elastic-exec, the product's path): PRRTE 3.0
# counts the dead spawned process in mpirun's exit code, and has been seen
# to end a working rank of its own accord in the second case.

# grow_policy never: room, and it stays at 3
scenario never 1 3 "reshard_down 35 4->3 failed=3 spares= attempts=1" \
    -x ELASTIC_GROW_POLICY=never -- "${HEAT[@]}" --fail 3:40

# grow_min_batch 2: two ranks lost, room for one: it waits (stays at 2)
scenario batch-wait 1 2 "reshard_down 35 4->2 failed=1,3 spares= attempts=1" \
    -x ELASTIC_GROW_MIN_BATCH=2 -- "${HEAT[@]}" --fail 1:40 --fail 3:40
# ... room for two: both at once
scenario batch 2 4 "reshard_down 35 4->2 failed=1,3 spares= attempts=1
reshard_up 35 2->4 failed= spares= attempts=1 new=4,5" \
    -x ELASTIC_GROW_MIN_BATCH=2 -- "${HEAT[@]}" --fail 1:40 --fail 3:40

# max_world_size 6: grows past its size at creation at the first check,
# and back to 6 after a loss
scenario beyond 2 6 "reshard_up 0 4->6 failed= spares= attempts=1 new=4,5
reshard_down 35 6->5 failed=3 spares= attempts=1
reshard_up 35 5->6 failed= spares= attempts=1 new=6" \
    -x ELASTIC_MAX_WORLD_SIZE=6 -- "${HEAT[@]}" --fail 3:40

# sgd and the blob application (its own cyclic layout) grow back too
app_run "$tmp/sgd-ref" 4 "$EXAMPLES/sgd" --steps 60
sgd_ref=$(checksum_of "$tmp/sgd-ref")
scenario sgd 1 4 "reshard_down 35 4->3 failed=2 spares= attempts=1
reshard_up 35 3->4 failed= spares= attempts=1 new=4" -- "$EXAMPLES/sgd" --steps 60 --fail 2:40
app_run "$tmp/blob-ref" 4 ./libelastic/blob_app --steps 60 --items 203
blob_ref=$(checksum_of "$tmp/blob-ref")
scenario blob 1 4 "reshard_down 35 4->3 failed=1 spares= attempts=1
reshard_up 35 3->4 failed= spares= attempts=1 new=4" -- ./libelastic/blob_app --steps 60 --items 203 --fail 1:40

done_testing
