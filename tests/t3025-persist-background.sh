#!/bin/bash
# t3025-persist-background.sh - periodic L3 writes in the background from L1
# (ELASTIC_PERSIST_BACKGROUND), under real mpirun, with real kills, signals
# and a really full file system:
#   - the files are the synchronous write's, dataset for dataset (h5py);
#   - a rank SIGKILLed while the writes of step 40 are held in their
#     threads (ELASTIC_TEST_L3_BG_HOLD): the others recover in place while
#     the hold still stands (the recovery does not wait for the write),
#     step 40 is never committed, the next files are complete;
#   - a rank that kills itself in its thread after writing its data;
#   - a rank SIGKILLed in the step after a persist step, the persist
#     step's snapshot still in its overlapped L2 exchange: the write of
#     that step never starts (it starts once the snapshot commits), the
#     job rolls back to the snapshot before it;
#   - SIGTERM while a write is held: the suspend waits for it, commits it,
#     writes its own file synchronously, and the resume is exact;
#   - the file system filling up while a write is held: the reserved write
#     still commits, the next ones fail with a warning and an event, the
#     job completes; without the reservation the held write itself fails.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

tmp=$(mktemp -d)
fs=$tmp/fs
trap 'mpi_kill_job; mountpoint -q "$fs" && umount "$fs"; rm -rf "$tmp"' EXIT
snap=$top_builddir/src/snapshot/elastic-snapshot
READ="$PY ${srcdir:-.}/l3/read_every.py"
ARGS="--nx 96 --ny 80 --steps 100"
HEAT="$EXAMPLES/heat2d $ARGS --persist-period 20"
count_ge() { [ "$(tr -d '\0' < "$2" | grep -c "$1")" -ge "$3" ]; }
has_event() { events "$1" | grep -qx "$2"; }

app_run "$tmp/ref" 4 $EXAMPLES/heat2d $ARGS
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)"

# 1. a clean run: the background files are the synchronous ones
app_run "$tmp/sync" 4 -x ELASTIC_PERSIST_BACKGROUND=0 -x ELASTIC_SNAPSHOT_KEEP=0 -- $HEAT --snapshot-dir "$tmp/sync.d"
is "$MPI_RC" 0 "synchronous run" || show_failure "$tmp/sync"
out=$tmp/bg
app_run "$out" 4 -x ELASTIC_LOG=info -x ELASTIC_SNAPSHOT_KEEP=0 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --snapshot-dir "$tmp/bg.d"
is "$MPI_RC" 0 "background run" || show_failure "$out"
is "$(checksum_of "$out")" "$ref" "background run: the failure-free checksum"
is "$(events "$out.events")" "persist 0 size=4
persist 20 size=4
persist 40 size=4
persist 60 size=4
persist 80 size=4" "background run: steps 0..80 committed"
is "$(tr -d '\0' < "$out" | grep -c 'written in the background')" 5 "background run: all five in the background"
run_ok "background run: elastic-snapshot verify DIR" "$snap" verify "$tmp/bg.d"
run_ok "h5py: every file read, every block's crc32, the same data and attributes as the synchronous files" $READ "$tmp/bg.d" "$tmp/sync.d"

if mpi_have_ulfm; then
    # 2. rank 2 SIGKILLed while every rank's write of step 40 is held
    # before it reads its L1 copy.  A persist step finding it in flight
    # skips it (policy 2), and a ring of 64 L1 slots leaves the held copy
    # alone (with 2, the snapshot of step 60 would wait for the held
    # thread to read it, and the survivors would wait there instead of
    # noticing the death)
    # (a long job: it must still be computing when the kill comes; at its
    # end it would wait for the held write)
    out=$tmp/kill d=$tmp/kill.d
    KARGS="--nx 96 --ny 80 --steps 2000"
    app_run "$tmp/kref" 4 $EXAMPLES/heat2d $KARGS
    kref=$(checksum_of "$tmp/kref")
    touch "$tmp/hold"
    mpi_start "$out" 4 -x ELASTIC_LOG=info -x ELASTIC_PERSIST_BACKGROUND=2 -x ELASTIC_SNAPSHOT_BUFFER_SIZE=64 -x ELASTIC_TEST_L3_BG_HOLD="40:$tmp/hold" -x ELASTIC_EVENT_LOG="$out.events" -- $EXAMPLES/heat2d $KARGS --persist-period 20 --snapshot-dir "$d" --sleep 5
    wait_until 120 count_ge "holds the background L3 write of step 40" "$out" 4
    ok $? "kill: all 4 ranks hold their write of step 40" || show_failure "$out"
    victim=$(mpi_rank_pid 2)
    kill -KILL "$victim"
    ok $? "kill: SIGKILL to rank 2 (pid $victim) with the write in flight"
    mpi_wait 180
    is "$MPI_RC" 0 "kill: the job completed with the hold still in place" || show_failure "$out"
    ok "$(test -e "$tmp/hold"; echo $?)" "kill: (the hold file was never removed)"
    is "$(checksum_of "$out")" "$kref" "kill: the failure-free checksum"
    ok "$(events "$out.events" | grep -q '^reshard_down [0-9]* 4->3 failed=2 spares= attempts=1$'; echo $?)" "kill: recovered in place, 4 -> 3" || diag "$(events "$out.events")"
    ok "$(tr -d '\0' < "$out" | grep -q 'background L3 write of step 40 is abandoned'; echo $?)" "kill: the write of step 40 was abandoned"
    ok "$(! events "$out.events" | grep -q '^persist 40 '; echo $?)" "kill: step 40 never committed (no event)"
    ok "$(test ! -e "$d/snap-000000000040.h5"; echo $?)" "kill: no file of step 40"
    ok "$(has_event "$out.events" 'persist 1980 size=3'; echo $?)" "kill: the last persist step (1980) committed by the 3 survivors" || diag "$(events "$out.events")"
    is "$(ls -A "$d" | grep -c '\.tmp$')" 0 "kill: the temporary of step 40 was removed by a later write"
    run_ok "kill: elastic-snapshot verify DIR" "$snap" verify "$d"
    run_ok "kill: h5py reads every file" $READ "$d"
    rm -f "$tmp/hold"

    # 3. rank 1 kills itself in its thread, its data of step 40 written,
    # before the flush (ELASTIC_TEST_KILL persist)
    out=$tmp/self d=$tmp/self.d
    app_run "$out" 4 -x ELASTIC_LOG=info -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --snapshot-dir "$d" --fail 1:40:persist
    is "$MPI_RC" 0 "self: the job completed" || show_failure "$out"
    grep -aq "ELASTIC_TEST_KILL: killing myself (pid [0-9]*) in persist at step 40" "$out"
    ok $? "self: rank 1 really died in its background write" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "self: the failure-free checksum"
    ok "$(test ! -e "$d/snap-000000000040.h5"; echo $?)" "self: no file of step 40"
    ok "$(events "$out.events" | grep -q '^reshard_down [0-9]* 4->3 failed=1 spares= attempts=1$'; echo $?)" "self: recovered in place, 4 -> 3" || diag "$(events "$out.events")"
    ok "$(! events "$out.events" | grep -q '^persist 40 '; echo $?)" "self: step 40 never committed (no event)"
    # (the death is seen at step 50's poll or in step 60's commit, the job
    # rolls back to that step: 80 is the first persist step after it)
    ok "$(has_event "$out.events" 'persist 80 size=3'; echo $?)" "self: step 80 committed by 3 ranks" || diag "$(events "$out.events")"
    run_ok "self: elastic-snapshot verify DIR" "$snap" verify "$d"
    run_ok "self: h5py reads every file" $READ "$d"

    # 3b. rank 2 SIGKILLed during step 40, after its maybe_snapshot
    # returned: the snapshot of the persist step 40 overlaps its L2
    # exchange with the step, and its L3 write waits for it to commit at
    # step 41's call, which instead sees the death
    out=$tmp/next d=$tmp/next.d
    app_run "$out" 4 -x ELASTIC_LOG=debug -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --snapshot-dir "$d" --fail 2:40
    is "$MPI_RC" 0 "next: the job completed" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "next: the failure-free checksum"
    # each rank names the writes it starts (debug): step 40's only by the
    # 3 survivors, after the rollback; none by the 4 ranks before it
    is "$(tr -d '\0' < "$out" | grep -c 'L3 write of step 20 in the background')" 4 "next: (step 20's write started by the 4 ranks)" || show_failure "$out"
    is "$(tr -d '\0' < "$out" | grep -c 'L3 write of step 40 in the background')" 3 "next: step 40's write started only by the 3 survivors, after the rollback"
    ok "$(! grep -aq 'background L3 write of step 40 is abandoned' "$out"; echo $?)" "next: (so nothing was abandoned)"
    ok "$(events "$out.events" | grep -q '^reshard_down 30 4->3 failed=2 spares= attempts=1$'; echo $?)" "next: recovered in place, 4 -> 3, back to step 30 (step 40's snapshot never committed)" || diag "$(events "$out.events")"
    is "$(events "$out.events" | grep '^persist' | grep -v '^persist 20 ')" "persist 0 size=4
persist 40 size=3
persist 60 size=3
persist 80 size=3" "next: step 0 by 4 ranks, 40 (again), 60 and 80 by 3"
    # step 20's write commits at the first snapshot step after every
    # thread finished it: by step 30 or 40, or, on a loaded machine, it is
    # still in flight when rank 2 dies and the recovery abandons it
    if events "$out.events" | grep -q '^persist 20 '; then
        ok "$(has_event "$out.events" 'persist 20 size=4' && ! grep -aq 'background L3 write of step 20 is abandoned' "$out"; echo $?)" "next: step 20 committed by the 4 ranks"
    else
        ok "$(grep -aq 'background L3 write of step 20 is abandoned' "$out" && test ! -e "$d/snap-000000000020.h5"; echo $?)" "next: step 20 still in flight at the death: abandoned, no file"
    fi
    run_ok "next: elastic-snapshot verify DIR" "$snap" verify "$d"
    run_ok "next: h5py reads every file" $READ "$d"
else
    skip "this MPI has no ULFM: a rank's death ends the job" 32
fi

# 4. SIGTERM while the write of step 100 is held: the suspend waits for it
# (64 L1 slots: as in 2, the job goes on computing while the write is held)
out=$tmp/sus d=$tmp/sus.d
SARGS="--nx 96 --ny 80 --steps 1000"
SHEAT="$EXAMPLES/heat2d $SARGS --persist-period 100 --sleep 2"
app_run "$tmp/sref" 4 $EXAMPLES/heat2d $SARGS
sref=$(checksum_of "$tmp/sref")
touch "$tmp/hold"
mpi_start "$out" 4 -x ELASTIC_LOG=info -x ELASTIC_PERSIST_BACKGROUND=2 -x ELASTIC_SNAPSHOT_BUFFER_SIZE=64 -x ELASTIC_TEST_L3_BG_HOLD="100:$tmp/hold" -x ELASTIC_SNAPSHOT_DIR="$d" -x ELASTIC_EVENT_LOG="$out.events" -- $SHEAT
wait_until 120 count_ge "holds the background L3 write of step 100" "$out" 4
ok $? "suspend: all 4 ranks hold their write of step 100" || show_failure "$out"
kill_rank 1 TERM
ok $? "suspend: SIGTERM to rank 1"
wait_until 120 count_ge "waiting for the background L3 write of step 100 to finish" "$out" 1
ok $? "suspend: it waits for the write in flight" || show_failure "$out"
rm -f "$tmp/hold"
mpi_wait 120
is "$MPI_RC" 75 "suspend: the job exits 75" || show_failure "$out"
s=$(tr -d '\0' < "$out" | sed -n 's/.*<stdout>: suspended at step \([0-9]*\).*/\1/p' | head -n 1)
is "$(events "$out.events" | grep -v '^persist_skipped' | tail -n 3)" "persist 100 size=4
persist $s size=4
suspend $s size=4 reason=SIGTERM file=yes" "suspend: step 100 committed, then the suspend's own file of step $s"
run_ok "suspend: elastic-snapshot verify DIR" "$snap" verify "$d"
run_ok "suspend: h5py reads every file" $READ "$d"
app_run "$tmp/sres" 3 -x ELASTIC_RESUME=1 -x ELASTIC_SNAPSHOT_DIR="$d" -- $SHEAT
is "$MPI_RC" 0 "suspend: resumed at 3 ranks" || show_failure "$tmp/sres"
tr -d '\0' < "$tmp/sres" | grep -q "<stdout>: resumed from step $s (file $d/snap-$(printf %012d "$s").h5, world 4 -> 3)"
ok $? "suspend: resumed from step $s" || show_failure "$tmp/sres"
is "$(checksum_of "$tmp/sres")" "$sref" "suspend: the failure-free checksum"

# 5. the file system fills up while a write is held (a 4 MiB tmpfs;
# files of 0.5 MiB, every one kept; the job waits at step 60 for the held
# write, policy 1)
mkdir -p "$fs"
if mount -t tmpfs -o size=4m tmpfs "$fs" 2> "$tmp/mount.err"; then
    FARGS="--nx 256 --ny 256 --steps 100"
    app_run "$tmp/fref" 4 $EXAMPLES/heat2d $FARGS
    fref=$(checksum_of "$tmp/fref")
    for mode in reserved unreserved; do
        out=$tmp/full-$mode d=$fs/$mode
        rm -rf "$fs"/*
        env=()
        [ $mode = unreserved ] && env=(-x ELASTIC_TEST_L3_NO_RESERVE=1)
        touch "$tmp/hold"
        mpi_start "$out" 4 -x ELASTIC_LOG=info -x ELASTIC_SNAPSHOT_KEEP=0 "${env[@]}" -x ELASTIC_TEST_L3_BG_HOLD="40:$tmp/hold" -x ELASTIC_EVENT_LOG="$out.events" -- $EXAMPLES/heat2d $FARGS --persist-period 20 --snapshot-dir "$d"
        wait_until 120 count_ge "holds the background L3 write of step 40" "$out" 4
        ok $? "$mode: all 4 ranks hold their write of step 40" || show_failure "$out"
        dd if=/dev/zero of="$fs/filler" bs=64k 2> /dev/null
        ok "$(test "$(df -k --output=avail "$fs" | tail -n 1)" -lt 64; echo $?)" "$mode: the file system is full"
        rm -f "$tmp/hold"
        mpi_wait 120
        is "$MPI_RC" 0 "$mode: the job completed" || show_failure "$out"
        is "$(checksum_of "$out")" "$fref" "$mode: the failure-free checksum"
        if [ $mode = reserved ]; then
            want="persist 0 size=4
persist 20 size=4
persist 40 size=4
persist_failed 60 size=4
persist_failed 80 size=4"
            what="step 40's reserved blocks held; 60 and 80 failed"
        else
            want="persist 0 size=4
persist 20 size=4
persist_failed 40 size=4
persist_failed 60 size=4
persist_failed 80 size=4"
            what="step 40 failed in its thread; 60 and 80 failed"
            grep -q '"persist_failed","step":40.*No space left on device' "$out.events"
            ok $? "$mode: step 40's event says the thread's write found no space" || diag "$(cat "$out.events")"
            ok "$(test ! -e "$d/.snap-000000000040.h5.tmp"; echo $?)" "$mode: its temporary removed"
        fi
        is "$(events "$out.events")" "$want" "$mode: $what"
        is "$(tr -d '\0' < "$out" | grep -c 'L3 snapshot of step [0-9]* not written.*continuing')" $(echo "$want" | grep -c failed) "$mode: one warning per failed step"
        run_ok "$mode: elastic-snapshot verify DIR" "$snap" verify "$d"
        run_ok "$mode: h5py reads every file" $READ "$d"
    done
    umount "$fs"
else
    skip "cannot mount a tmpfs ($(head -c 120 "$tmp/mount.err"))" 22
fi
done_testing
