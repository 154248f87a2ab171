#!/bin/bash
# t3015-persist-nospace.sh - out of space during L3 writes through the
# manager: a full tmpfs, and a file size limit (ulimit -f).  Each failed
# write is one clear warning line (working rank 0) and a persist_failed
# event; the job goes on to the failure-free checksum; the older snapshots
# stay intact and a resume works from them.  A suspend whose write fails
# still suspends, saying which step a resume will start from.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

tmp=$(mktemp -d)
mounted=
trap 'mpi_kill_job; [ -n "$mounted" ] && umount "$mounted"; rm -rf "$tmp"' EXIT
snap=$top_builddir/src/snapshot/elastic-snapshot
ARGS="--nx 96 --ny 80 --steps 1200"
HEAT="$EXAMPLES/heat2d $ARGS --sleep 3 --progress 50"

app_run "$tmp/ref" 4 $EXAMPLES/heat2d $ARGS
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)"
newest() { (cd "$1" && ls snap-*.h5 2> /dev/null | tail -n 1 | sed 's/snap-0*\([0-9][0-9]*\)\.h5/\1/;s/^$/-1/'); }

# 1. a 4 MiB tmpfs, filled up once step 100 is written
mkdir -p "$tmp/small"
if mount -t tmpfs -o size=4m tmpfs "$tmp/small" 2> /dev/null; then
    mounted=$tmp/small
    d=$tmp/small/snap out=$tmp/full
    mpi_start "$out" 4 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --persist-period 50 --snapshot-dir "$d"
    wait_for_grep '"event":"persist","step":100,' "$out.events" 120
    ok $? "full: step 100 was written" || show_failure "$out"
    dd if=/dev/zero of="$tmp/small/filler" bs=64k > /dev/null 2>&1 # until ENOSPC
    free=$(df -P "$tmp/small" | awk 'NR == 2 {print $4}')
    ok $((free > 64)) "full: the tmpfs is filled up ($free KiB free)"
    mpi_wait 180
    is "$MPI_RC" 0 "full: the job completed" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "full: the failure-free checksum"
    nfail=$(events "$out.events" | grep -c '^persist_failed ')
    ok $((nfail == 0)) "full: $nfail writes failed (persist_failed events)" || diag "$(events "$out.events")"
    is "$(grep -ac 'warn: L3 snapshot of step [0-9]* not written' "$out")" "$nfail" "full: one warning line per failed write"
    is "$(grep -ac '<stderr>: elastic\[rank [1-9][0-9]*\]: warn: L3 snapshot of step [0-9]* not written' "$out")" 0 \
        "full: all from working rank 0"
    grep -aq "warn: L3 snapshot of step [0-9]* not written: cannot reserve [0-9]* bytes for the snapshot of step [0-9]* in '$d': No space left on device.*; the older snapshots are intact (newest: step [0-9]*); continuing" "$out"
    ok $? "full: the warning says what, why, and that the job goes on" || show_failure "$out"
    grep -a -m 1 'not written' "$out" | sed 's/^/# /'
    last=$(newest "$d")
    ok $((last < 100)) "full: the older snapshots are there (newest: step $last)"
    is "$(ls -A "$d" | grep -c '\.tmp$')" 0 "full: no temporary left"
    run_ok "full: elastic-snapshot verify DIR" "$snap" verify "$d"
    rm -f "$tmp/small/filler"
    app_run "$tmp/full-res" 3 -x ELASTIC_RESUME=1 -- $HEAT --snapshot-dir "$d"
    is "$MPI_RC" 0 "full: with space again, a resume at 3 ranks completed" || show_failure "$tmp/full-res"
    grep -aq "<stdout>: resumed from step $last " "$tmp/full-res"
    ok $? "full: it resumed from the newest intact snapshot (step $last)" || show_failure "$tmp/full-res"
    is "$(checksum_of "$tmp/full-res")" "$ref" "full: the failure-free checksum"
    umount "$tmp/small" && mounted=
else
    skip "mount -t tmpfs is not permitted here" 14
fi

# 2. ulimit -f: a run suspended to step S1; resumed under a 1 MiB limit, its
# writes fail, and so does the write of its suspend; a resume starts at S1
d=$tmp/lim out=$tmp/first
mpi_start "$out" 4 -- $HEAT --persist-period 100 --snapshot-dir "$d"
kill_rank_at 1 "<stdout>: step 250\$" 120 TERM
mpi_wait 120
is "$MPI_RC" 75 "ulimit: the first run suspended" || show_failure "$out"
s1=$(newest "$d")
ok $((s1 < 250)) "ulimit: ... to step $s1"
(
    ulimit -f 1024
    # shared-memory segments are files too: tcp only
    MPI_DEFAULT_ARGS=${MPI_DEFAULT_ARGS/self,sm,tcp/self,tcp}
    out=$tmp/limited
    mpi_start "$out" 4 -x ELASTIC_RESUME=1 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --persist-period 100 --snapshot-dir "$d"
    # early: the preemption flag is agreed every few hundred steps of this
    # small grid when the machine is slow (the period is set from the cost
    # of the agreement against the step time), and the run must not end first
    kill_rank_at 2 "<stdout>: step $((s1 / 50 * 50 + 50))\$" 120 TERM
    mpi_wait 120
    echo "$MPI_RC" > "$out.rc"
)
out=$tmp/limited
is "$(cat "$out.rc")" 75 "ulimit: the limited run suspended too" || show_failure "$out"
grep -aq "<stdout>: resumed from step $s1 " "$out"
ok $? "ulimit: it had resumed from step $s1 (reading is not limited)" || show_failure "$out"
grep -aq "warn: L3 snapshot of step [0-9]* not written: the snapshot of step [0-9]* needs up to [0-9]* bytes, over the file size limit (ulimit -f) of 1048576 bytes on rank [0-9]*; the older snapshots are intact (newest: step $s1); continuing" "$out"
ok $? "ulimit: a failed write says so, in one line" || show_failure "$out"
grep -a -m 1 'not written' "$out" | sed 's/^/# /'
grep -aq "warn: suspended at step [0-9]* (SIGTERM) without an L3 snapshot of it (the write failed): a resume starts from step $s1" "$out"
ok $? "ulimit: the suspend says a resume starts from step $s1" || show_failure "$out"
events "$out.events" | tail -n 1 | grep -q "^suspend [0-9]* size=4 reason=SIGTERM file=no$"
ok $? "ulimit: the suspend event has no file" || diag "$(events "$out.events")"
is "$(newest "$d")" "$s1" "ulimit: step $s1 is still the newest snapshot"
run_ok "ulimit: elastic-snapshot verify DIR" "$snap" verify "$d"
app_run "$tmp/lim-res" 2 -x ELASTIC_RESUME=1 -- $HEAT --snapshot-dir "$d"
grep -aq "<stdout>: resumed from step $s1 " "$tmp/lim-res" && [ "$(checksum_of "$tmp/lim-res")" = "$ref" ]
ok $? "ulimit: without the limit, a resume from step $s1 reaches the failure-free checksum" || show_failure "$tmp/lim-res"
done_testing
