#!/bin/bash
# t1032-gpu-sim.sh - libelastic's device-array and NCCL code path on real
# MPI ranks with real SIGKILLs (ULFM), without a GPU: gpu_sim_app runs the
# library unchanged up to the CUDA and NCCL calls, which go to simulated
# device memory and a recording NCCL (see its header).  Checked: the
# failure-free checksum after device-array restores (through the placement
# hook); every survivor passes NCCL the same exclude list, in the order
# revoke -> shrink(NCCL_SHRINK_ABORT) -> abort of the parent; a spare's
# takeover, and a grow, make a new communicator on every member; an NCCL error passed
# to elastic_maybe_reshard_down (no process lost) rebuilds it everywhere;
# NCCL refusing the shrink falls back to a new communicator; the handler
# sees the new communicator (size and rank).
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
APP=${top_builddir:-..}/tests/libelastic/gpu_sim_app
[ -x "$APP" ] || skip_all "gpu_sim_app not built (no NCCL/CUDA headers at configure)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=5

# run NAME N [mpirun args --] ARGS: traces in $tmp/NAME/
run() {
    local name=$1 n=$2
    shift 2
    mkdir -p "$tmp/$name"
    local extra=(-x TRACE_DIR="$tmp/$name" -x ELASTIC_EVENT_LOG="$tmp/$name/events")
    if printf '%s\n' "$@" | grep -qx -- '--'; then
        while [ "$1" != "--" ]; do
            extra+=("$1")
            shift
        done
        shift
    fi
    app_run "$tmp/$name/out" "$n" "${extra[@]}" -- "$APP" --steps 60 "$@"
    is "$MPI_RC" 0 "$name: the job succeeded" || show_failure "$tmp/$name/out"
}

# ops R FILE: the NCCL calls of original rank R, "handler-check" lines out
ops() { grep -v -e '^handler-check' -e '^device copies' "$tmp/$1/nccl.$2" | tr '\n' ';'; }

run ref 4
ref=$(checksum_of "$tmp/ref/out")
ok "$([ -n "$ref" ] && echo 0 || echo 1)" "ref: a checksum ($ref)"
for r in 0 1 2 3; do
    is "$(ops ref $r)" "init c=1 n=4 rank=$r;abort c=1;" "ref: rank $r made one communicator of 4, aborted it at the end"
done

# rank 2 is killed at step 23: the survivors shrink NCCL rank 2 away
run kill 4 --fail 2:23
is "$(checksum_of "$tmp/kill/out")" "$ref" "kill: the failure-free checksum (device arrays restored)"
is "$(events "$tmp/kill/events")" "reshard_down 20 4->3 failed=2 spares= attempts=1" "kill: the event"
want_rank() { case $1 in 0) echo 0 ;; 1) echo 1 ;; 3) echo 2 ;; esac; }
for r in 0 1 3; do
    is "$(ops kill $r)" "init c=1 n=4 rank=$r;revoke c=1;shrink c=1 excl=[2] -> c=2 n=3 rank=$(want_rank $r);abort c=1;abort c=2;" \
        "kill: rank $r: revoke, shrink excluding [2], abort the parent"
    grep -q "handler-check rebuild n=3 rank=$(want_rank $r)" "$tmp/kill/nccl.$r"
    ok $? "kill: rank $r: the handler saw the shrunk communicator"
done
ok "$(grep -q ERROR "$tmp"/kill/nccl.* && echo 1 || echo 0)" "kill: NCCL got valid calls only"
# periodic snapshots copy device arrays straight into page-locked L1 slots
is "$(grep -h 'straight into' "$tmp"/ref/nccl.* | sort -u)" "device copies straight into snapshot buffers: yes" \
    "ref: device arrays copied straight into page-locked snapshot buffers"
is "$(grep -h 'staged on the device' "$tmp"/ref/nccl.* | sort -u)" "device copies staged on the device: yes" \
    "ref: a periodic snapshot copies on the device first (ELASTIC_DEVICE_STAGING defaults to 1)"
# without the device-side staging: the same result, copies straight to the host
run direct 4 -x ELASTIC_DEVICE_STAGING=0 -- --fail 2:23
is "$(checksum_of "$tmp/direct/out")" "$ref" "direct: ELASTIC_DEVICE_STAGING=0, a kill: the failure-free checksum"
is "$(grep -h 'staged on the device' "$tmp"/direct/nccl.* | sort -u)" "device copies staged on the device: no" \
    "direct: no device-side copy"
# a bad value: a clear error naming it
run_bad() { mkdir -p "$tmp/bad"; app_run "$tmp/bad.out" 1 -x TRACE_DIR="$tmp/bad" -x ELASTIC_DEVICE_STAGING=yes -- "$APP" --steps 5; }
run_bad
ok "$([ "$MPI_RC" != 0 ] && grep -q "ELASTIC_DEVICE_STAGING: 'yes' is invalid (expected 1" "$tmp/bad.out" && echo 0 || echo 1)" \
    "ELASTIC_DEVICE_STAGING=yes: refused, naming the value"

# NCCL refuses the shrink: the survivors abort what is left and make a new
# communicator of 3 from a fresh unique id
run shrink-fails 4 -x SIM_SHRINK_FAIL=1 -- --fail 2:23
is "$(checksum_of "$tmp/shrink-fails/out")" "$ref" "shrink-fails: the failure-free checksum"
for r in 0 1 3; do
    is "$(ops shrink-fails $r)" "init c=1 n=4 rank=$r;revoke c=1;shrink c=1 excl=[2] failed;abort c=1;init c=2 n=3 rank=$(want_rank $r);abort c=2;" \
        "shrink-fails: rank $r: revoke, shrink refused, abort, a new communicator of 3"
    grep -q "handler-check rebuild n=3 rank=$(want_rank $r)" "$tmp/shrink-fails/nccl.$r"
    ok $? "shrink-fails: rank $r: the handler saw the new communicator"
done

# a spare takes rank 1's place: a new communicator of 4, the spare in it
run spare 5 -x ELASTIC_SPARE_RANKS=1 -- --fail 1:23
is "$(checksum_of "$tmp/spare/out")" "$ref" "spare: the failure-free checksum"
for r in 0 2 3; do
    is "$(ops spare $r)" "init c=1 n=4 rank=$r;revoke c=1;abort c=1;init c=2 n=4 rank=$r;abort c=2;" \
        "spare: rank $r: revoke, abort, a new communicator of 4"
done
is "$(ops spare 4)" "init c=1 n=4 rank=1;abort c=1;" "spare: the spare joined the new communicator as rank 1"

# no takeover: rank 1's loss shrinks NCCL to 3, then the spare joins at
# maybe_reshard_up (a grow): a new communicator of 4, no revoke (no failure)
run grow 5 -x ELASTIC_SPARE_RANKS=1 -x ELASTIC_SPARE_TAKEOVER=0 -- --fail 1:23
is "$(checksum_of "$tmp/grow/out")" "$ref" "grow: the failure-free checksum"
is "$(events "$tmp/grow/events" | tr '\n' ';')" "reshard_down 20 4->3 failed=1 spares= attempts=1;reshard_up 20 3->4 failed= spares=4 attempts=1;" "grow: the events"
for r in 0 2 3; do
    k=$((r == 0 ? 0 : r - 1))
    is "$(ops grow $r)" "init c=1 n=4 rank=$r;revoke c=1;shrink c=1 excl=[1] -> c=2 n=3 rank=$k;abort c=1;abort c=2;init c=3 n=4 rank=$k;abort c=3;" \
        "grow: rank $r: shrunk to 3, then a new communicator of 4"
done
is "$(ops grow 4)" "init c=1 n=4 rank=3;abort c=1;" "grow: the spare joined as rank 3"

# an NCCL error reported by rank 1 at step 17 (no process lost): everyone
# revokes and aborts the communicator and makes a new one of the same
# members (NCCL 2.28 refuses a shrink that excludes nobody)
run nccl-error 4 --nccl-error 1:17
is "$(checksum_of "$tmp/nccl-error/out")" "$ref" "nccl-error: the failure-free checksum"
is "$(events "$tmp/nccl-error/events")" "reshard_down 15 4->4 failed= spares= attempts=1" "nccl-error: the event"
for r in 0 1 2 3; do
    is "$(ops nccl-error $r)" "init c=1 n=4 rank=$r;revoke c=1;abort c=1;init c=2 n=4 rank=$r;abort c=2;" \
        "nccl-error: rank $r: revoke, abort, a new communicator of the same members"
done
done_testing
