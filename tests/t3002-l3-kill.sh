#!/bin/bash
# t3002-l3-kill.sh - a rank SIGKILLed in the middle of an L3 write (its data
# in the temporary file, before the commit): the previous snapshot stays
# valid and is the one restored, the temporary is never picked, the tool is
# happy with the directory, and the next write removes the stale temporary.
. "${srcdir:-.}/lib/mpitest.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
dir=$tmp/snap
t=./l3/l3_test
snap=$top_builddir/src/snapshot/elastic-snapshot

count_ge() { [ "$(grep -ac "$1" "$2")" -ge "$3" ]; }

mpi_run "$tmp/w" 4 $t write "$dir" 10 --run k
is "$MPI_RC" 0 "4 ranks committed step 10" || diag "$(cat "$tmp/w")"

export ELASTIC_TEST_L3_PAUSE=20
mpi_start "$tmp/k" 4 -x ELASTIC_TEST_L3_PAUSE -- $t write "$dir" 20 --run k
unset ELASTIC_TEST_L3_PAUSE
wait_until 120 count_ge "paused in l3_write before the commit of step 20" "$tmp/k" 4
ok $? "all 4 ranks wrote their data of step 20 and stopped before the commit" || diag "$(cat "$tmp/k")"
ok "$(test -s "$dir/.snap-000000000020.h5.tmp"; echo $?)" "the temporary holds data"
victim=$(mpi_rank_pid 1)
kill -KILL "$victim"
ok $? "SIGKILL sent to rank 1 (pid $victim) in the middle of the write"
wait_for_exit "$victim" 30
ok $? "rank 1 is dead"
mpi_kill_job # the launcher ends the job
mpi_wait 60

ok "$(test -e "$dir/.snap-000000000020.h5.tmp"; echo $?)" "the temporary of step 20 is left behind"
ok "$(test ! -e "$dir/snap-000000000020.h5"; echo $?)" "step 20 was never committed"
is "$(readlink "$dir/latest")" snap-000000000010.h5 "latest still points at step 10"
"$snap" verify "$dir/.snap-000000000020.h5.tmp" > "$tmp/vt" 2>&1
rc=$?
ok $((rc != 1)) "the half-written temporary does not pass verify (exit $rc)"
diag "$(cat "$tmp/vt")"

"$snap" list "$dir" > "$tmp/list" 2>&1
is $? 0 "elastic-snapshot list exits 0"
grep -aq 'snap-000000000010.h5 *ok$' "$tmp/list"
ok $? "list: step 10 ok" || diag "$(cat "$tmp/list")"
grep -aq '\.snap-000000000020.h5.tmp *temporary' "$tmp/list"
ok $? "list: the temporary is shown as uncommitted" || diag "$(cat "$tmp/list")"
"$snap" verify "$dir" > "$tmp/verify" 2>&1
is $? 0 "elastic-snapshot verify DIR exits 0" || diag "$(cat "$tmp/verify")"
grep -aq "1 of 1 snapshots valid" "$tmp/verify"
ok $? "verify DIR: the one committed snapshot is valid, the temporary skipped" || diag "$(cat "$tmp/verify")"

mpi_run "$tmp/r" 3 $t read "$dir" --step 10 --world 4 --run k
is "$MPI_RC" 0 "restore at world size 3" || diag "$(cat "$tmp/r")"
grep -aq "read ok: .*snap-000000000010.h5 step 10, world 4 -> 3" "$tmp/r"
ok $? "the previous snapshot (step 10) is the one restored, every element checked" || diag "$(cat "$tmp/r")"
ok "$(grep -aq 'unusable\|\.tmp' "$tmp/r"; echo $((!$?)))" "the temporary was not even considered" || diag "$(cat "$tmp/r")"

mpi_run "$tmp/w2" 2 $t write "$dir" 30 --run k
is "$MPI_RC" 0 "a later write (2 ranks) commits step 30" || diag "$(cat "$tmp/w2")"
is "$(ls -A "$dir" | grep -c '\.tmp$')" 0 "... and removed the stale temporary"
mpi_run "$tmp/r2" 4 $t read "$dir" --step 30 --world 2 --run k
is "$MPI_RC" 0 "step 30 restores at world size 4" || diag "$(cat "$tmp/r2")"
done_testing
