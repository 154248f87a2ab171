#!/bin/bash
# t0002-ulfm-smoke.sh - ULFM through the project's own build: a rank is
# SIGKILLed from outside while the others wait in MPI_Barrier; they must get
# MPIX_ERR_PROC_FAILED, shrink, and agree on an allreduce.
. "${srcdir:-.}/lib/mpitest.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT

for victim in 2 0; do
    mpi_start "$tmp/out.$victim" 4 ./mpi/ulfm_smoke $victim
    wait_for_grep "ready $victim " "$tmp/out.$victim" 120
    ok $? "rank $victim reached its kill point"
    kill_rank $victim KILL
    ok $? "SIGKILL sent to rank $victim (pid found through /proc)"
    mpi_wait 60
    out=$(cat "$tmp/out.$victim")
    n=$(grep -c 'shrunk 4 -> 3' "$tmp/out.$victim")
    is "$n" 3 "victim $victim: all three survivors shrank 4 -> 3" || diag "$out"
    grep -q 'expected MPIX' "$tmp/out.$victim"
    ok $((!$?)) "victim $victim: no survivor saw a non-ULFM error class"
    grep -o 'error after [0-9.]* ms' "$tmp/out.$victim" | sed 's/^/# /'
done
done_testing
