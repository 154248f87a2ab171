#!/bin/bash
# t9002-campaign-quick.sh - a bounded fault campaign (bench/campaign/campaign.py):
# random schedules of real faults against `elastic-exec --nproc-per-node 8
# heat2d` and `elastic-mpirun -n 8 heat2d` - SIGKILLs from outside at random times, SIGKILLs at exact windows
# through libelastic's test hook (a snapshot, a recovery, the protecting
# snapshot, an L3 write, MPI_Finalize), a SIGSTOPped rank with
# --hang-timeout (elastic-exec only), a preemption (to the launcher or to
# its process group) with a resume at another size, and a damaged newest snapshot before the
# resume.  Every run must end with an allowed exit code and the
# failure-free checksum, hang nowhere and leave nothing behind.  The seed
# is fixed, so the schedules are the same each time (their timing is not);
# each run has one fault (--max-faults 1): Open MPI 5.0.7's MPIX_Comm_shrink
# can hang when a second rank dies right after a recovery (about 1 run in
# 10 of that schedule; doc/reliability.md), which the long, random version
# in bench/campaign/campaign.py counts instead.
. "${srcdir:-.}/lib/tap.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
build=$(cd "${top_builddir:-..}" && pwd)
[ -x "$build/examples/heat2d" ] || skip_all "the examples are not built"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
out=$(mktemp -d "${TMPDIR:-/tmp}/t9002.XXXXXX")
trap 'rm -rf "$out"' EXIT

# elastic-exec: every kind (a SIGSTOP at any time, also before MPI_Init or
# the first progress report); elastic-mpirun: kills and preemptions (an
# mpirun that stays after its ranks is stopped after 10 s: t7011)
"$PY" "$srcdir/../bench/campaign/campaign.py" --build "$build" --runs 10 --launchers exec \
    --kinds kill,hook,stop,term,damage --max-faults 1 --nx 128 --steps 8000 --persist-period 1000 \
    --seed 9002 --timeout 180 --out "$out/exec" > "$out/log" 2>&1
rc=$?
"$PY" "$srcdir/../bench/campaign/campaign.py" --build "$build" --runs 6 --launchers mpirun \
    --kinds kill,hook,term --max-faults 1 --nx 128 --steps 8000 --persist-period 1000 \
    --seed 9002 --timeout 180 --out "$out/mpirun" >> "$out/log" 2>&1
rc2=$?
sed 's/^/# /' "$out/log"
is "$rc/$rc2" 0/0 "16 random fault schedules under elastic-exec and elastic-mpirun: every one right"
for kind in kill hook stop term damage; do
    is "$(grep -c "^ *[0-9]* exec *$kind *exit .* ok" "$out/log")" 2 "elastic-exec, $kind: 2 of 2 runs right"
done
for kind in kill hook term; do
    is "$(grep -c "^ *[0-9]* mpirun *$kind *exit .* ok" "$out/log")" 2 "elastic-mpirun, $kind: 2 of 2 runs right"
done
done_testing
