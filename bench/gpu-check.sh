#!/bin/bash
# gpu-check.sh - every check of libelastic's GPU part that needs a GPU, and
# the device snapshot benchmark, in one run (about 2-5 minutes on one GPU).
#
# usage: bench/gpu-check.sh [--build DIR] [--src DIR] [--lib DIR]... [--out DIR]
#                           [--quick]
#   --build DIR  the build tree (default: the current directory if it has
#                examples/heat2d_cuda, else ./build): DIR/examples/heat2d,
#                DIR/examples/heat2d_cuda, DIR/tests/bench_gpu_snapshot_bw
#   --src DIR    the source tree (default: this script's ../): its
#                tests/lib/mpitest.sh and tests/libelastic/check_events.py
#   --lib DIR    prepended to LD_LIBRARY_PATH (libelastic, Open MPI, HDF5,
#                CUDA, NCCL of a relocated bundle); exported to the ranks
#   --out DIR    keep every log there (default: a temporary directory,
#                kept when a check fails)
#   --quick      the benchmark smaller (256 MiB, fewer steps)
# environment: MPIRUN (default: mpirun on the PATH), an Open MPI 5 with
# ULFM; the ranks run under `mpirun --with-ft ulfm --oversubscribe` with
# tests/lib/mpitest.sh's settings (ob1, coll ^han, async_mpi_finalize).
#
# Checks (one line each: PASS, FAIL or SKIP, with the reason and numbers):
#   device          a CUDA device is there (else everything is SKIP, exit 77)
#   checksum        heat2d_cuda on 4 ranks sharing the GPU = CPU heat2d's
#                   failure-free checksum, bit for bit
#   kill            a rank SIGKILLed: device arrays restored (L1/L2), checksum
#   spare           a spare takes a killed rank's place: same
#   suspend-resume  SIGUSR1 -> L3 file -> exit 75; resumed on 3 ranks into
#                   device memory: checksum
#   h5py            the suspend's L3 file read by h5py: /arrays/u [ny][nx] (SKIP
#                   without h5py)
#   nccl-kill       one-rank NCCL communicators (ELASTIC_TEST_NCCL_GROUP=1):
#                   created at start, revoked + shrunk + parent aborted after
#                   a killed rank, ncclAllReduce checked every step, checksum
#   nccl-error      ELASTIC_NCCL_ERROR passed to elastic_maybe_reshard_down
#                   (no process lost): every rank rebuilds, checksum
#   bench-bandwidth device -> pinned host through libelastic vs cudaMemcpy of
#                   the same bytes (goal >= 80 %)
#   bench-overhead  heat2d_cuda step times with a device snapshot every 10
#                   steps (staged on the device, and straight to the host)
#                   vs without, for a step shorter and one longer than the
#                   copy (medians of 3 interleaved rounds, their range)
# Exit: 0 all passed, 1 a check failed, 77 no GPU, 2 bad usage.

set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=
SRC=$(cd "$here/.." && pwd)
OUT=
QUICK=0
LIBS=
while [ $# -gt 0 ]; do
    case $1 in
    --build) BUILD=$2; shift 2 ;;
    --src) SRC=$2; shift 2 ;;
    --lib) LIBS="$2${LIBS:+:$LIBS}"; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "gpu-check: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
if [ -z "$BUILD" ]; then
    if [ -x examples/heat2d_cuda ]; then BUILD=.; else BUILD=build; fi
fi
BUILD=$(cd "$BUILD" 2> /dev/null && pwd) || { echo "gpu-check: --build: no such directory" >&2; exit 2; }
HEAT=$BUILD/examples/heat2d
HEATC=$BUILD/examples/heat2d_cuda
BW=$BUILD/tests/bench_gpu_snapshot_bw
for f in "$HEAT" "$HEATC" "$BW" "$SRC/tests/lib/mpitest.sh"; do
    [ -e "$f" ] || { echo "gpu-check: $f is missing (--build, --src)" >&2; exit 2; }
done
export MPIRUN=${MPIRUN:-mpirun}
command -v "$MPIRUN" > /dev/null || { echo "gpu-check: MPIRUN=$MPIRUN not found" >&2; exit 2; }
if [ -n "$LIBS" ]; then
    export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
keep=1
[ -z "$OUT" ] && OUT=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") && keep=0
mkdir -p "$OUT"

# mpitest.sh: mpi_start / mpi_wait with the tests' ULFM settings
export HAVE_ULFM=yes srcdir="$SRC/tests"
# shellcheck source=/dev/null
. "$SRC/tests/lib/mpitest.sh"
trap 'mpi_kill_job' EXIT
XENV=(-x LD_LIBRARY_PATH -x ELASTIC_LOG)
export ELASTIC_LOG=${ELASTIC_LOG:-warn}

nfail=0
result() { # result PASS|FAIL|SKIP NAME TEXT
    printf '%-4s %-16s %s\n' "$1" "$2" "$3"
    [ "$1" = FAIL ] && nfail=$((nfail + 1))
    return 0
}
checksum_of() { tr -d '\0' < "$1" | sed -n 's/.*checksum \([0-9a-f]\{16\}\)$/\1/p' | head -n 1; }
tail_of() { tr -d '\0' < "$1" | tail -n "${2:-15}" | sed 's/^/      | /'; }
# job NAME N [mpirun args --] PROG ARGS: runs it, sets RC, output in $OUT/NAME.out
job() {
    local name=$1 n=$2
    shift 2
    local extra=("${XENV[@]}")
    if printf '%s\n' "$@" | grep -qx -- '--'; then
        while [ "$1" != "--" ]; do extra+=("$1"); shift; done
        shift
    fi
    mpi_start "$OUT/$name.out" "$n" "${extra[@]}" -- "$@"
    mpi_wait "${JOB_TIMEOUT:-120}"
    RC=$MPI_RC
}
events_of() { python3 "$SRC/tests/libelastic/check_events.py" "$1" 2> /dev/null || echo "(no events)"; }

echo "gpu-check: build $BUILD, logs $OUT, mpirun $(command -v "$MPIRUN")"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu-check: GPU /'

# --- device
"$HEATC" --steps 0 > "$OUT/device.out" 2>&1
case $? in
77) result SKIP device "no CUDA device: $(tail -n 1 "$OUT/device.out")"; exit 77 ;;
0) result PASS device "heat2d_cuda found a device" ;;
*) result FAIL device "heat2d_cuda --steps 0 failed:"; tail_of "$OUT/device.out"; exit 1 ;;
esac

G=(--nx 192 --ny 160 --steps 120)
export ELASTIC_SNAPSHOT_PERIOD=10

# --- the CPU reference and the failure-free device run
job ref 4 "$HEAT" "${G[@]}"
REF=$(checksum_of "$OUT/ref.out")
job checksum 4 "$HEATC" "${G[@]}"
got=$(checksum_of "$OUT/checksum.out")
if [ "$RC" = 0 ] && [ -n "$REF" ] && [ "$got" = "$REF" ]; then
    result PASS checksum "heat2d_cuda = heat2d: $REF"
else
    result FAIL checksum "rc $RC, heat2d_cuda $got, heat2d ${REF:-none}"; tail_of "$OUT/checksum.out"
fi

# --- a killed rank, restored into device memory
job kill 4 -x ELASTIC_EVENT_LOG="$OUT/kill.events" -- "$HEATC" "${G[@]}" --fail 2:47
got=$(checksum_of "$OUT/kill.out")
ev=$(events_of "$OUT/kill.events")
if [ "$RC" = 0 ] && [ "$got" = "$REF" ] && [ "$ev" = "reshard_down 40 4->3 failed=2 spares= attempts=1" ]; then
    result PASS kill "rank 2 killed at step 47: $ev; checksum $got"
else
    result FAIL kill "rc $RC, checksum $got (want $REF), events: $ev"; tail_of "$OUT/kill.out"
fi

job spare 5 -x ELASTIC_SPARE_RANKS=1 -x ELASTIC_EVENT_LOG="$OUT/spare.events" -- "$HEATC" "${G[@]}" --fail 1:33
got=$(checksum_of "$OUT/spare.out")
ev=$(events_of "$OUT/spare.events")
if [ "$RC" = 0 ] && [ "$got" = "$REF" ] && [ "$ev" = "reshard_down 30 4->4 failed=1 spares=4 attempts=1" ]; then
    result PASS spare "rank 1 killed at step 33, spare 4 took its place: checksum $got"
else
    result FAIL spare "rc $RC, checksum $got (want $REF), events: $ev"; tail_of "$OUT/spare.out"
fi

# --- suspend to L3, resume into device memory on 3 ranks
rm -rf "$OUT/snap"
mkdir -p "$OUT/snap"
job suspend 4 -x ELASTIC_SIGNAL_CHECK_PERIOD=1 -x ELASTIC_RUN_ID=gpucheck -- \
    "$HEATC" "${G[@]}" --snapshot-dir "$OUT/snap" --suspend-at 55
susp_rc=$RC
job resume 3 -x ELASTIC_RESUME=1 -x ELASTIC_RUN_ID=gpucheck -- "$HEATC" "${G[@]}" --snapshot-dir "$OUT/snap"
got=$(checksum_of "$OUT/resume.out")
file=$(ls "$OUT"/snap/snap-*.h5 2> /dev/null | tail -n 1)
if [ "$susp_rc" = 75 ] && [ "$RC" = 0 ] && [ "$got" = "$REF" ] && grep -q "resumed from step" "$OUT/resume.out"; then
    result PASS suspend-resume "suspended (75) to $(basename "$file"), resumed on 3 ranks: checksum $got"
else
    result FAIL suspend-resume "suspend rc $susp_rc (want 75), resume rc $RC, checksum $got (want $REF)"
    tail_of "$OUT/suspend.out" 8
    tail_of "$OUT/resume.out" 8
fi
# the first python3 with h5py: the system's (Debian's python3-h5py), then the PATH's
PYH5=
for py in /usr/bin/python3 python3; do
    if "$py" -c 'import h5py' 2> /dev/null; then PYH5=$py; break; fi
done
if [ -n "$file" ] && [ -n "$PYH5" ]; then
    shape=$("$PYH5" -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r"); print(f["arrays/u"].shape, f["arrays/u"].dtype)' "$file" 2>&1)
    if [ "$shape" = "(160, 192) float64" ]; then
        result PASS h5py "$(basename "$file"): /arrays/u $shape"
    else
        result FAIL h5py "$(basename "$file"): $shape (want (160, 192) float64)"
    fi
else
    result SKIP h5py "no h5py here (or no L3 file)"
fi

# --- NCCL, one-rank communicators (one GPU: NCCL refuses two ranks of a
# communicator on the same device)
ELASTIC_LOG=info job nccl-kill 4 -x ELASTIC_TEST_NCCL_GROUP=1 -- "$HEATC" "${G[@]}" --nccl --fail 2:47
got=$(checksum_of "$OUT/nccl-kill.out")
# a one-rank communicator never loses a member: after the kill each
# survivor's is revoked, aborted and made anew (NCCL 2.28 refuses a shrink
# that excludes nobody)
created=$(grep -c 'nccl: communicator of 1 ranks (rank 0): new, 0 excluded' "$OUT/nccl-kill.out")
revoked=$(grep -c 'nccl: revoked and aborted' "$OUT/nccl-kill.out")
fellback=$(grep -c 'shrink failed' "$OUT/nccl-kill.out")
if [ "$RC" = 0 ] && [ "$got" = "$REF" ] && [ "$created" = 7 ] && [ "$revoked" = 3 ] && [ "$fellback" = 0 ]; then
    result PASS nccl-kill "4 created; after the kill 3 revoked + aborted + made anew; allreduce checked each step; checksum $got"
else
    result FAIL nccl-kill "rc $RC, checksum $got, created $created (want 4 + 3), revoked $revoked (want 3), shrink failures $fellback"
    grep -h 'nccl' "$OUT/nccl-kill.out" | head -n 12 | sed 's/^/      | /'
    tail_of "$OUT/nccl-kill.out" 8
fi
ELASTIC_LOG=info job nccl-error 4 -x ELASTIC_TEST_NCCL_GROUP=1 -- "$HEATC" "${G[@]}" --nccl --nccl-error 1:33
got=$(checksum_of "$OUT/nccl-error.out")
created=$(grep -c 'nccl: communicator of 1 ranks (rank 0): new, 0 excluded' "$OUT/nccl-error.out")
revoked=$(grep -c 'nccl: revoked and aborted' "$OUT/nccl-error.out")
if [ "$RC" = 0 ] && [ "$got" = "$REF" ] && [ "$created" = 8 ] && [ "$revoked" = 4 ]; then
    result PASS nccl-error "ELASTIC_NCCL_ERROR on rank 1: 4 communicators revoked, aborted and rebuilt; checksum $got"
else
    result FAIL nccl-error "rc $RC, checksum $got (want $REF), created $created (want 4 + 4), revoked $revoked (want 4)"
    grep -h 'nccl' "$OUT/nccl-error.out" | head -n 12 | sed 's/^/      | /'
fi

# --- benchmark: bandwidth
if [ $QUICK = 1 ]; then MIB=256; STEPS=150; NX=2048; else MIB=1024; STEPS=300; NX=4096; fi
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$BW" "$MIB" 10 > "$OUT/bw.out" 2>&1
bw_rc=$?
line=$(grep 'stage/pinned' "$OUT/bw.out")
pct=$(printf '%s\n' "$line" | sed -n 's/.*stage\/pinned \([0-9.]*\) %.*/\1/p')
if [ $bw_rc = 0 ] && [ -n "$pct" ]; then
    st=PASS
    awk -v p="$pct" 'BEGIN { exit !(p >= 80) }' || st=FAIL
    result $st bench-bandwidth "${line#gpu-snapshot-bw: } (goal >= 80 %)"
    grep 'min' "$OUT/bw.out" | sed 's/^/      /'
else
    result FAIL bench-bandwidth "rc $bw_rc"; tail_of "$OUT/bw.out"
fi

# --- benchmark: step-time overhead of a device snapshot every 10 steps,
# side by side: no periodic snapshot, the default (a copy on the device,
# then to the host on a non-blocking stream beside the next step's work),
# and ELASTIC_DEVICE_STAGING=0 (straight to the host: the next step's
# device work waits for it); a light step (1 sweep, shorter than the copy)
# and a heavy one (16 sweeps, longer); 3 interleaved rounds, the median of
# the runs' mean step times and their range
B=(--nx "$NX" --ny "$NX" --steps "$STEPS" --timing --quiet)
mean() { sed -n "s/.*timing $2: .* mean \([0-9.]*\) ms/\1/p" "$1" | head -n 1; }
ovh_ok=1
declare -A M
for round in 1 2 3; do
    for sw in 1 16; do
        for v in base staged direct; do
            case $v in
            base) envs=(-x ELASTIC_SNAPSHOT_PERIOD=1000000000) ;;
            staged) envs=(-x ELASTIC_SNAPSHOT_PERIOD=10 -x ELASTIC_DEVICE_STAGING=1) ;;
            direct) envs=(-x ELASTIC_SNAPSHOT_PERIOD=10 -x ELASTIC_DEVICE_STAGING=0) ;;
            esac
            n=ovh-$sw-$v-$round
            job "$n" 1 "${envs[@]}" -- "$HEATC" "${B[@]}" --sweeps "$sw"
            mm=$(mean "$OUT/$n.out" all-steps)
            if [ "$RC" != 0 ] || [ -z "$mm" ] ||
                [ "$(checksum_of "$OUT/$n.out")" != "$(checksum_of "$OUT/ovh-$sw-base-1.out")" ]; then
                ovh_ok=0
                echo "      $n: rc $RC, mean '${mm}'"
                tail_of "$OUT/$n.out" 5
            fi
            M[$sw,$v]="${M[$sw,$v]:-} $mm"
        done
    done
done
stats() { printf '%s\n' $1 | sort -g | awk '{v[NR]=$1} END {printf "%.4f %.4f %.4f", v[int((NR+1)/2)], v[1], v[NR]}'; }
if [ $ovh_ok = 1 ]; then
    for sw in 1 16; do
        read -r bm blo bhi <<< "$(stats "${M[$sw,base]}")"
        read -r sm slo shi <<< "$(stats "${M[$sw,staged]}")"
        read -r dm dlo dhi <<< "$(stats "${M[$sw,direct]}")"
        so=$(awk -v a="$sm" -v b="$bm" 'BEGIN { printf "%+.1f", (a - b) / b * 100 }')
        do_=$(awk -v a="$dm" -v b="$bm" 'BEGIN { printf "%+.1f", (a - b) / b * 100 }')
        result PASS bench-overhead "${NX}x${NX} grid ($((NX * NX * 8 >> 20)) MiB), $STEPS steps of $sw sweep(s), snapshot every 10: mean step $bm ms without [$blo-$bhi], staged on the device $sm ms [$slo-$shi] ($so %), straight to the host $dm ms [$dlo-$dhi] ($do_ %)"
    done
    for v in base staged direct; do
        grep -h 'timing' "$OUT/ovh-16-$v-1.out" | sed "s/.*timing/      16 sweeps, $v: timing/"
    done
else
    result FAIL bench-overhead "a run failed or its checksum differs (above)"
fi

if [ $nfail -gt 0 ]; then
    echo "gpu-check: $nfail check(s) FAILED; logs in $OUT"
    exit 1
fi
echo "gpu-check: all checks passed"
[ $keep = 0 ] && rm -rf "$OUT"
exit 0
