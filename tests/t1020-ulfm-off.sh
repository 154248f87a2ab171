#!/bin/bash
# t1020-ulfm-off.sh - a ULFM build in a job started without fault tolerance
#
# Open MPI 5 runs ULFM only when the job asks for it (`mpirun --with-ft
# ulfm`).  Without it MPIX_Comm_agree is not fault tolerant and used to hang
# the job at its end (elastic_manager_destroy's final agreement).  libelastic
# asks the MPIX_FT attribute at run time: the job runs in relaunch-only mode,
# says so, completes with the checksum of the fault-tolerant run, and a
# killed rank ends the job (non-zero) instead of hanging it.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM: nothing to switch off"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
HEAT="$EXAMPLES/heat2d --nx 96 --ny 80 --steps 60"
export ELASTIC_SNAPSHOT_PERIOD=7

app_run "$tmp/ft" 4 $HEAT
ref=$(checksum_of "$tmp/ft")
is "$MPI_RC" 0 "with --with-ft ulfm: exit 0 (checksum $ref)" || show_failure "$tmp/ft"
grep -q 'relaunch-only' "$tmp/ft"
is $? 1 "with --with-ft ulfm: no relaunch-only warning"

export MPI_NO_FT=1
RUN_TIMEOUT=120 app_run "$tmp/noft" 4 $HEAT
is "$MPI_RC" 0 "without --with-ft: the job ends, exit 0 (no hang at the end)" ||
    show_failure "$tmp/noft"
is "$(checksum_of "$tmp/noft")" "$ref" "without --with-ft: the same checksum"
grep -q 'elastic\[rank 0\]: warn: this job runs without ULFM fault tolerance (start it with `mpirun --with-ft ulfm` or elastic-mpirun): relaunch-only mode' "$tmp/noft"
ok $? "without --with-ft: relaunch-only mode is announced, with the way out" ||
    show_failure "$tmp/noft"

RUN_TIMEOUT=120 app_run "$tmp/kill" 4 $HEAT --fail 1:20
[ "$MPI_RC" -ne 0 ] && [ "$MPI_RC" -ne 124 ]
ok $? "without --with-ft, rank 1 killed: the job ends with an error, no hang (exit $MPI_RC)" ||
    show_failure "$tmp/kill"
done_testing
