#!/bin/bash
# t3016-relaunch-resume.sh - in-place recovery impossible (a rank and its L2
# buddy killed together): the job ends with ELASTIC_EXIT_RELAUNCH (76), and
# the same command rerun with ELASTIC_RESUME=1 resumes from the newest L3
# snapshot, at the same or another size, to the failure-free checksum:
# heat2d, sgd, and blob_app, whose per-rank blobs are fetched by old rank
# from the L3 file.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM: every failure is a relaunch (t3012 covers resume)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
RELAUNCH=76

# scenario NAME FATAL-STEP RESUME-STEP FAIL-ARGS -- CMD...: run with the
# failures, then resume.  (Ranks 3 and 4 are buddies at 8 ranks.)
scenario() {
    local name=$1 fstep=$2 rstep=$3 fail=() cmd out=$tmp/$1 d=$tmp/$1.d ref
    shift 3
    while [ "$1" != -- ]; do
        fail+=("$1")
        shift
    done
    shift
    cmd=("$@")
    app_run "$out.ref" 8 "${cmd[@]}"
    ref=$(checksum_of "$out.ref")
    is "$MPI_RC" 0 "$name: failure-free run (checksum $ref)"
    # L3 written synchronously: in the background (the default) an L3 file
    # commits at a later snapshot step once every rank's thread is done,
    # which on a loaded machine can be after the kill, and the resume step
    # would depend on the load
    app_run "$out" 8 -x ELASTIC_PERSIST_BACKGROUND=0 -x ELASTIC_PERSIST_PERIOD=10 -x ELASTIC_SNAPSHOT_DIR="$d" -x ELASTIC_EVENT_LOG="$out.events" \
        -- "${cmd[@]}" "${fail[@]}"
    is "$MPI_RC" "$RELAUNCH" "$name: ranks 3 and 4 killed together (${fail[*]}): exit 76" || show_failure "$out"
    events "$out.events" | tail -n 1 | grep -q "^fatal $fstep 8->0 failed=3,4 "
    ok $? "$name: the fatal event names both, at step $fstep" || diag "$(events "$out.events")"
    is "$(checksum_of "$out")" "" "$name: no result is claimed"
    for n in 8 5; do
        rm -rf "$d.$n"
        cp -a "$d" "$d.$n" # each rerun writes snapshots of its own
        app_run "$out.res$n" $n -x ELASTIC_RESUME=1 -x ELASTIC_PERSIST_PERIOD=10 -x ELASTIC_SNAPSHOT_DIR="$d.$n" -- "${cmd[@]}"
        is "$MPI_RC" 0 "$name: rerun at $n ranks with ELASTIC_RESUME=1 completed" || show_failure "$out.res$n"
        tr -d '\0' < "$out.res$n" | grep -q "resumed from step $rstep \|resharded at step $rstep: world 8 -> $n"
        ok $? "$name: at $n ranks it resumed from step $rstep" || show_failure "$out.res$n"
        is "$(checksum_of "$out.res$n")" "$ref" "$name: at $n ranks, the failure-free checksum"
    done
}

# killed at the top of step 40, after its L1/L2 and L3 snapshots
scenario heat2d 40 40 --fail 3:40 --fail 4:40 -- "$EXAMPLES/heat2d" --nx 96 --ny 80 --steps 100
# killed inside the snapshot of step 40: L1/L2 has 35, L3 has 30
scenario sgd 35 30 --fail 3:40:snapshot --fail 4:40:snapshot -- "$EXAMPLES/sgd" --samples 2000 --steps 100
scenario blob 35 30 --fail 3:40:snapshot --fail 4:40:snapshot -- ./libelastic/blob_app --steps 100 --items 300
tr -d '\0' < "$tmp/blob.res5" | grep -q "resharded at step 30: world 8 -> 5, [0-9]* blobs fetched here"
ok $? "blob: the blobs of the 8 old ranks were fetched from the L3 file" || show_failure "$tmp/blob.res5"
done_testing
