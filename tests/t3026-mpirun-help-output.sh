#!/bin/bash
# t3026-mpirun-help-output.sh - a help message a rank shows reaches the
# output as whole, tagged lines and leaves no byte behind.  A resume opens
# the snapshot with MPI-IO, and under --with-ft ulfm Open MPI warns once
# ("The selected 'io' module 'ompio' is not tested for post-failure
# operation") through PMIx_Log.  The OpenPMIx bundled with Open MPI 5.0.7
# handed that text to the output stream with its NUL terminator and glued
# the NUL to the rank's next line on any stream ("<stdout>: \0resumed from
# step ..."); scripts/patches/openmpi-5.0.7-pmix-iof-nul.patch fixes both.
# Which rank shows the message depends on timing: several resumes.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
ARGS="--nx 32 --ny 32 --progress 10"

app_run "$tmp/first" 2 $EXAMPLES/heat2d $ARGS --steps 40 --persist-period 10 --snapshot-dir "$tmp/snap"
is "$MPI_RC" 0 "a run that writes L3 snapshots completed"
for i in 1 2 3; do
    out=$tmp/resume.$i
    app_run "$out" 2 -x ELASTIC_RESUME=1 -- $EXAMPLES/heat2d $ARGS --steps 60 --snapshot-dir "$tmp/snap"
    is "$MPI_RC" 0 "resume $i completed"
    grep -aq "<stderr>: WARNING: The selected 'io' module 'ompio' is not tested for post-failure" "$out"
    ok $? "resume $i: the help message was shown (the path under test ran)" || show_failure "$out"
    is "$(tr -cd '\0' < "$out" | wc -c)" 0 "resume $i: no NUL byte in the output" || show_failure "$out"
    # every line is a tagged line of one rank and stream
    bad=$(tr -d '\0' < "$out" | grep -cv '^\[[0-9]*,[0-9]*\]<std\(out\|err\)>: ')
    is "$bad" 0 "resume $i: every line starts with its rank's tag" || show_failure "$out"
    grep -q "^\[1,0\]<stdout>: resumed from step 30 " "$out"
    ok $? "resume $i: the line after the message is whole" || show_failure "$out"
done
done_testing
