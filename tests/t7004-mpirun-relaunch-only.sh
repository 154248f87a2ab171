#!/bin/bash
# t7004-mpirun-relaunch-only.sh - relaunch-only mode with Debian's Open MPI
# 4.1 (no ULFM): elastic-mpirun says so at start, a SIGKILLed rank makes
# mpirun abort the job, its exit report (rank, host, signal) is parsed, and
# the job is relaunched from the newest persisted step to the clean result.
. "${srcdir:-.}/mpirun/lib.sh"

ompi4=/usr/bin/mpirun.openmpi
cc4=/usr/bin/mpicc.openmpi
[ -x "$ompi4" ] && [ -x "$cc4" ] || skip_all "Debian's Open MPI 4.1 ($ompi4, $cc4) is not installed"
"$ompi4" --version 2>&1 | grep -q '(OpenRTE) 4\.' || skip_all "$ompi4 is not Open MPI 4"
# the program must be built against the MPI that runs it
"$cc4" -O1 -o "$tmp/loopapp41" "${srcdir:-.}/mpirun/loopapp.c" > "$tmp/cc.log" 2>&1
ok $? "loopapp built with Open MPI 4.1's mpicc" || { sed 's/^/# /' "$tmp/cc.log"; done_testing; exit 1; }

app() { echo "$tmp/loopapp41" --state "$tmp/state.$1" --steps 12 --persist 3 --step-ms 20; }

em_run "$tmp/clean" 300 --no-wrap --mpirun "$ompi4" --run-dir "$tmp/run.clean" -n 3 $(app clean)
want=$(checksum_of "$tmp/clean")
ok $([ "$EM_RC" = 0 ] && [ -n "$want" ]; echo $?) "clean run under Open MPI 4.1: exit 0, checksum $want"
grep -q 'relaunch-only mode: .*mpirun.openmpi (Open MPI 4\.1\.[0-9]*) has no ULFM, so every failure is a relaunch' "$tmp/clean"
ok $? "relaunch-only mode is announced at start"
grep -q -- '--with-ft' "$tmp/run.clean/attempt-1/command"
ok $((!$?)) "no --with-ft for an mpirun without ULFM"

em_run "$tmp/loop" 300 --no-wrap --mpirun "$ompi4" --run-dir "$tmp/run" -n 3 \
    $(app loop) --fail 1:kill:1:4 --fail 2:exit76:2:7
is "$EM_RC" 0 "two failures, two relaunches, exit 0" || sed 's/^/# /' "$tmp/loop"
is "$(checksum_of "$tmp/loop")" "$want" "the relaunched job ends with the clean checksum"
host=$(hostname)
grep -q "attempt 1: .*(mpirun exit 137) - rank 1 on ${host%%.*}[^ ]* killed by signal 9" "$tmp/loop"
ok $? "attempt 1: mpirun's report parsed: rank 1 on this host killed by signal 9" || grep 'attempt 1' "$tmp/loop" | sed 's/^/# /'
grep -q 'it is the only host: it stays' "$tmp/loop"
ok $? "the only host is not excluded"
grep -q '^launch 2 resume 1 world 3 from step 3$' "$tmp/loop"
ok $? "attempt 2 resumed from step 3"
grep -q '^launch 3 resume 1 world 3 from step 6$' "$tmp/loop"
ok $? "attempt 3 resumed from step 6"
grep -q 'attempt 2: .*exit 76) - rank [0-9] exited with code 76' "$tmp/loop"
ok $? "attempt 2: mpirun's non-zero-exit report parsed (exit code 76)"
grep -q 'failures: 0 in place (0.0 ms lost to recovery), 2 relaunches' "$tmp/loop"
ok $? "summary: 0 in place, 2 relaunches"
test -s "$tmp/run/attempt-1/report.txt"
ok $? "mpirun's failure report kept in the run directory"
done_testing
