#!/bin/bash
# t1021-diff.sh - differential snapshots through real SIGKILLs: an array
# mostly static between snapshots (libelastic/diff_app, ELASTIC_DIFF_ON,
# 4 KiB blocks) sends only its changed blocks to the L2 buddy; a rank killed
# after a differential snapshot is restored from its buddy's copy, which
# must hold the blocks changed since the previous snapshot (the app checks
# every restored element against the state it must have at that step, and
# the final checksum against a failure-free run).  Also: two failures (the
# snapshot after a world change is full, the next differential again), a
# kill inside a differential snapshot and inside the snapshot that ends a
# recovery, a spare taking over (a new buddy), and heat2d with a static
# ballast array made differential by ELASTIC_DIFF_THRESHOLD_KIB.
#
# The failure tests of t1* and t3* run with differential snapshots on with
# `make check-diff` (tests/libelastic.am).
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
grep -q '^#define HAVE_XXHASH 1' "${top_builddir:-..}/config.h" ||
    skip_all "built without xxhash (no differential snapshots)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=5 ELASTIC_DIFF_BLOCK_KIB=4
ONE="./libelastic/diff_app --steps 40 --mode one"
TENTH="./libelastic/diff_app --steps 40 --mode tenth"

app_run "$tmp/ref-one" 4 $ONE
is "$MPI_RC" 0 "failure-free run (one block changes per step)" || show_failure "$tmp/ref-one"
ref_one=$(checksum_of "$tmp/ref-one")
app_run "$tmp/ref-tenth" 4 $TENTH
is "$MPI_RC" 0 "failure-free run (a tenth of the blocks change per step)" || show_failure "$tmp/ref-tenth"
ref_tenth=$(checksum_of "$tmp/ref-tenth")
ok $([ -n "$ref_one" ] && [ -n "$ref_tenth" ] && [ "$ref_one" != "$ref_tenth" ]; echo $?) \
    "the two references differ ($ref_one, $ref_tenth)"

# scenario NAME REF WORLD RESTORES ARGS...: run with failures and check
scenario() {
    local name=$1 ref=$2 world=$3 restores=$4 out="$tmp/$1"
    shift 4
    app_run "$out" 4 -x ELASTIC_LOG=debug "$@"
    is "$MPI_RC" 0 "$name: the job succeeded" || show_failure "$out"
    is "$(checksum_of "$out")" "$ref" "$name: the failure-free checksum"
    is "$(final_world_of "$out")" "$world" "$name: final working size $world"
    is "$(tr -d '\0' < "$out" | grep -c 'verify ok (0 bad elements)')" "$restores" \
        "$name: $restores restores, every element as it was at the restored step"
    tr -d '\0' < "$out" | grep -q 'bad elements 0$'
    ok $? "$name: no bad element at the end"
    tr -d '\0' < "$out" | grep -q 'to the buddy: changed blocks; from the ward: changed blocks'
    ok $? "$name: snapshots were differential"
}

# rank 0's chunks 0-4 change at steps 0-4; the differential snapshot of
# step 5 sends only them; rank 0 dies at step 7: its state comes from its
# buddy's L2 copy of step 5, which must hold those changes
scenario one-block "$ref_one" 3 1 -- $ONE --fail 0:7
tr -d '\0' < "$tmp/one-block" | grep -q 'restored step 5 on 3 ranks: verify ok'
ok $? "one-block: rolled back to the differential snapshot of step 5"
scenario two-failures "$ref_tenth" 2 2 -- $TENTH --fail 1:16 --fail 3:27
scenario in-snapshot "$ref_tenth" 3 1 -- $TENTH --fail 2:15:snapshot
scenario in-protect "$ref_tenth" 2 2 -- $TENTH --fail 1:12 --fail 3:10:protect
scenario spare "$ref_tenth" 2 2 -x ELASTIC_SPARE_RANKS=1 -- $TENTH --fail 1:18 --fail 2:33

# heat2d: the grid changes everywhere, the 1 MiB ballast never (its blocks
# are checked after every restore: "ballast ok")
HEAT="$EXAMPLES/heat2d --nx 96 --ny 80 --steps 60 --ballast 1"
app_run "$tmp/heat-ref" 4 -x ELASTIC_SNAPSHOT_PERIOD=7 -- $HEAT
heat_ref=$(checksum_of "$tmp/heat-ref")
app_run "$tmp/heat" 4 -x ELASTIC_SNAPSHOT_PERIOD=7 -x ELASTIC_DIFF_THRESHOLD_KIB=64 \
    -x ELASTIC_LOG=debug -- $HEAT --fail-rank 2 --fail-step 40
is "$MPI_RC" 0 "heat2d: the job succeeded" || show_failure "$tmp/heat"
is "$(checksum_of "$tmp/heat")" "$heat_ref" "heat2d: the checksum of a run without differential snapshots"
tr -d '\0' < "$tmp/heat" | grep -q 'ballast ok (0 bad elements)'
ok $? "heat2d: the restored ballast is intact"
tr -d '\0' < "$tmp/heat" | grep -q 'to the buddy: changed blocks'
ok $? "heat2d: the ballast was snapshotted differentially"
done_testing
