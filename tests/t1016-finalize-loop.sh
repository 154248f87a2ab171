#!/bin/bash
# t1016-finalize-loop.sh - ending a job after failures is robust: 20 runs
# with a killed rank (half of them with an idle spare to release) must all
# exit by themselves, with the right checksum.  Open MPI 5.0.7 alone hangs
# in MPI_Finalize about once in ten such runs; libelastic's destroy agrees
# with every survivor and frees the revoked communicators first.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
HEAT="$EXAMPLES/heat2d --nx 64 --ny 64 --steps 60 --quiet"
RUNS=${ELASTIC_FINALIZE_RUNS:-20}

app_run "$tmp/ref" 8 $HEAT
ref=$(checksum_of "$tmp/ref")
good=0
for i in $(seq "$RUNS"); do
    victim=$((1 + i % 7))
    spares=$((i % 2))
    mpi_start "$tmp/run$i" 8 -x ELASTIC_SPARE_RANKS=$spares -- $HEAT --fail $victim:$((20 + i))
    mpi_wait 60
    if [ "$MPI_RC" = 0 ] && [ "$(checksum_of "$tmp/run$i")" = "$ref" ]; then
        good=$((good + 1))
    else
        diag "run $i (rank $victim killed, $spares spares): exit $MPI_RC"
        show_failure "$tmp/run$i"
    fi
done
is "$good" "$RUNS" "$RUNS runs with a killed rank all ended by themselves with the right checksum"
done_testing
