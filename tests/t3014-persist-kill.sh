#!/bin/bash
# t3014-persist-kill.sh - processes killed in the middle of an L3 write
# inside elastic_maybe_snapshot (after their data is in the temporary file,
# before the commit; the synchronous write, ELASTIC_PERSIST_BACKGROUND=0,
# for the ranks killed one at a time: t3025 kills ranks in the background
# write):
#   - one rank (ULFM): the others see the failure as an error (independent
#     MPI-IO writes), recover in place from L1/L2 and finish with the
#     failure-free checksum; the interrupted step is never committed, the
#     older snapshots stay valid, and nothing crashes in MPI_Finalize;
#   - the whole job: the previous snapshot stays valid and the rerun with
#     ELASTIC_RESUME=1 resumes from it, to the failure-free checksum.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
snap=$top_builddir/src/snapshot/elastic-snapshot
ARGS="--nx 48 --ny 40 --steps 100"
HEAT="$EXAMPLES/heat2d $ARGS --persist-period 20"

app_run "$tmp/ref" 4 $EXAMPLES/heat2d $ARGS
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)"

if mpi_have_ulfm; then
    for victim in 2 0; do
        d=$tmp/one$victim.d out=$tmp/one$victim
        app_run "$out" 4 -x ELASTIC_LOG=info -x ELASTIC_PERSIST_BACKGROUND=0 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --snapshot-dir "$d" --fail $victim:40:persist
        is "$MPI_RC" 0 "rank $victim killed in the L3 write of step 40: the job completed" || show_failure "$out"
        grep -aq "ELASTIC_TEST_KILL: killing myself (pid [0-9]*) in persist at step 40" "$out"
        ok $? "rank $victim: it really died inside the write" || show_failure "$out"
        is "$(checksum_of "$out")" "$ref" "rank $victim: the failure-free checksum"
        is "$(events "$out.events")" "persist 0 size=4
persist 20 size=4
reshard_down 40 4->3 failed=$victim spares= attempts=1
persist 60 size=3
persist 80 size=3" "rank $victim: recovered in place; step 40 never committed; 60 and 80 by 3 ranks"
        is "$(grep -ac 'Segmentation fault\|Signal: ' "$out")" 0 "rank $victim: no other process crashed"
        ok "$(test ! -e "$d/snap-000000000040.h5"; echo $?)" "rank $victim: no file of step 40"
        is "$(ls -A "$d" | grep -c '\.tmp$')" 0 "rank $victim: its temporary was removed by the next write"
        run_ok "rank $victim: elastic-snapshot verify DIR" "$snap" verify "$d"
    done
else
    skip "this MPI has no ULFM: a rank's death ends the job" 18
fi

# the whole job dies in the write of step 40: all ranks stop before the
# commit (ELASTIC_TEST_L3_PAUSE), then rank 1 and the job are killed
d=$tmp/job.d out=$tmp/job
count_ge() { [ "$(grep -ac "$1" "$2")" -ge "$3" ]; }
mpi_start "$out" 4 -x ELASTIC_TEST_L3_PAUSE=40 -- $HEAT --snapshot-dir "$d"
wait_until 120 count_ge "paused in l3_write before the commit of step 40" "$out" 4
ok $? "all 4 ranks wrote their data of step 40 and stopped before the commit" || show_failure "$out"
victim=$(mpi_rank_pid 1)
kill -KILL "$victim"
ok $? "SIGKILL to rank 1 (pid $victim) in the middle of the write"
mpi_kill_job
mpi_wait 60
ok "$(test -s "$d/.snap-000000000040.h5.tmp"; echo $?)" "the half-written temporary of step 40 is left"
is "$(readlink "$d/latest")" snap-000000000020.h5 "latest still points at step 20"
run_ok "elastic-snapshot verify DIR: the committed snapshots are valid" "$snap" verify "$d"
cp -a "$d" "$tmp/job.orig"
for n in 4 3; do
    rm -rf "$d"
    cp -a "$tmp/job.orig" "$d"
    app_run "$tmp/res$n" $n -x ELASTIC_RESUME=1 -- $HEAT --snapshot-dir "$d"
    is "$MPI_RC" 0 "rerun at $n ranks with ELASTIC_RESUME=1 completed" || show_failure "$tmp/res$n"
    grep -aq "<stdout>: resumed from step 20 (file $d/snap-000000000020.h5, world 4 -> $n)" "$tmp/res$n"
    ok $? "rerun at $n ranks: resumed from the previous snapshot (step 20)" || show_failure "$tmp/res$n"
    is "$(checksum_of "$tmp/res$n")" "$ref" "rerun at $n ranks: the failure-free checksum"
done
is "$(ls -A "$d" | grep -c '\.tmp$')" 0 "the resumed run's first write removed the stale temporary"
done_testing
