#!/bin/bash
# run.sh - the elastic benchmark suite: every benchmark, one command.
#
#   bench/run.sh [--quick|--full] [--build DIR] [--out DIR] [--only LIST]
#
#   --quick      a smoke run (about a minute): every benchmark runs at its
#                smallest size, once, with its baseline; checks that each
#                one works, not its speed
#   --full       (default) the measurements of doc/benchmarks.md (15-25
#                minutes on 2 cores)
#   --build DIR  a configured elastic build tree (default: ./build under the
#                source tree if it exists, else the current directory); the
#                tree is brought up to date and the benchmark programs built
#   --out DIR    results (default ./bench-results): one CSV per benchmark,
#                summary.csv, results.md, plots/*.png, logs/
#   --only LIST  comma-separated subset of B1,B2,B3,B4,B5,B6,B6L3,B7,B8,B9,B11
#                (the default), or B12, B13, B14, B15, B15C (run only when
#                named)
#   --no-build   build nothing, use the programs the build tree has (for
#                `make check`, which builds them first)
#
# Benchmarks (each a driver in bench/, each with its baseline in the same
# run; see doc/benchmarks.md):
#   B1 b1-recovery.sh  time lost per failure: in place vs relaunch from L3
#                      vs restart without snapshots
#   B2 b2-restart.sh   PyTorch restart: elastic-exec vs torchrun
#   B3/B4 b34-snapshot.sh  L1 copy vs memcpy, L2 exchange vs MPI_Sendrecv
#   B5 b5-l3.sh        L3 write/read vs dd
#   B6 b6-steady.sh    heat2d slowdown from snapshots
#   B6L3 b6-l3.sh      snapshot every 10 + L3 every 100 next to every 10
#                      alone (L3 in the background and synchronous), and
#                      the background L3 bandwidth next to dd
#   B7 b7-launch.sh    launch overhead vs mpirun (hyperfine)
#   B8 b8-model.py     growth models from B1, B3/B4, B5
#   B9 b9-notice.sh    failure notice and MPI_Init: hosted PMIx vs mpirun
#   B11 b11-meshscale.sh  the mesh protocol alone at 64-1024 members: join,
#                      fence, failure broadcast, heartbeat bytes; growth
#                      models to 10,000 (b11-model.py, OUT/meshscale.md)
#   B12 b12-diff.sh    differential snapshots vs full ones (only with --only)
#   B13 b13-fastpath.sh  no-op maybe_snapshot/maybe_reshard_up calls: ns,
#                      system calls, instructions (only with --only)
#   B14 b14-meshcluster.sh  elastic-exec's mesh mode on the emulated 3-node
#                      Slurm cluster: rank-loss notice vs mpirun --with-ft
#                      ulfm, node loss in place vs elastic-mpirun's
#                      relaunch, MPI_Init vs srun --mpi=pmix and mpirun
#                      (root, Slurm; only with --only; OUT/meshcluster.md)
#   B15 b15-torchnodes.sh  a node lost under multi-node PyTorch training:
#                      elastic-exec's elastic rendezvous vs torchrun c10d
#                      (only with --only; OUT/torchnodes.md)
#   B15C b15-torchnodes.sh --cluster  the same on the emulated 3-node Slurm
#                      cluster, both launchers under srun (root, Slurm;
#                      only with --only; OUT/torchcluster.md)
#   B16 b16-grow.sh    growing back into new processes under elastic-exec
#                      vs relaunching at the larger size from L3 (only with
#                      --only; OUT/grow.md)
# Exit status: 0 when every selected benchmark produced rows (targets met
# or not: see summary.csv), 1 when one produced none, 2 on bad usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
mode=--full
build=
out=
only=B1,B2,B3,B4,B5,B6,B6L3,B7,B8,B9,B11
while [ $# -gt 0 ]; do
    case $1 in
        --quick | --full) mode=$1 ;;
        --build) build=${2:?--build needs a directory}; shift ;;
        --build=*) build=${1#--build=} ;;
        --out) out=${2:?--out needs a directory}; shift ;;
        --out=*) out=${1#--out=} ;;
        --only) only=${2:?--only needs a list}; shift ;;
        --only=*) only=${1#--only=} ;;
        --no-build) export BENCH_NO_MAKE=1 ;;
        -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: '$1' is invalid (expected --quick, --full, --build DIR, --out DIR, --only LIST, --no-build)" >&2; exit 2 ;;
    esac
    shift
done
for b in ${only//,/ }; do
    case $b in
        B1 | B2 | B3 | B4 | B5 | B6 | B6L3 | B7 | B8 | B9 | B11 | B12 | B13 | B14 | B15 | B15C | B16) ;;
        *) echo "run.sh: --only: '$b' is invalid (expected a comma-separated list of B1 ... B9, B6L3, B11, B12, B13, B14, B15, B15C, B16)" >&2; exit 2 ;;
    esac
done
want() { [[ ",$only," == *",$1,"* ]]; }

# the options every driver takes; lib.sh resolves the defaults
set -- "$mode"
[ -n "$build" ] && set -- "$@" --build "$build"
[ -n "$out" ] && set -- "$@" --out "$out"
. "$here/lib.sh"
bench_parse_args "$@"
common=("$mode" --build "$BUILD" --out "$OUT")

# fresh results (logs of earlier runs are replaced)
for f in recovery restart snapshot l3 steady l3bg launch notice meshscale model summary diff fastpath meshcluster \
    torchnodes torchcluster; do
    rm -f "$OUT/$f.csv"
done
rm -rf "$OUT/logs" "$OUT/plots" "$OUT/scratch" "$OUT/results.md" "$OUT/l3bg.md" "$OUT/model.md" "$OUT/meshscale.md" "$OUT/meshcluster.md" \
    "$OUT/torchnodes.md" "$OUT/torchcluster.md" "$OUT/meta.txt"
mkdir -p "$OUT/logs"
bench_log "building the benchmark programs in $BUILD"
bench_build_programs

start=$(date +%s)
{
    echo "Run: $(date -u +%Y-%m-%dT%H:%M:%SZ), mode ${mode#--}, $(hostname)"
    echo
    echo "- machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)), $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) memory"
    echo "- file system of the results and L3 files: $(df -PT "$OUT" | awk 'NR == 2 { print $2 " on " $1 }')"
    echo "- kernel $(uname -r); $("$MPIRUN" --version 2> /dev/null | head -n 1) ($MPIRUN), ULFM: $HAVE_ULFM"
    echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/meta.txt"

status=0
drive() {
    local id=$1
    shift
    bench_log "== $id: $*"
    "$@" "${common[@]}" || { bench_log "$id: driver exited $?"; status=1; }
}
want B1 && drive B1 "$here/b1-recovery.sh"
want B2 && drive B2 "$here/b2-restart.sh"
if want B3 || want B4; then drive B3/B4 "$here/b34-snapshot.sh"; fi
want B5 && drive B5 "$here/b5-l3.sh"
want B6 && drive B6 "$here/b6-steady.sh"
want B6L3 && drive B6L3 "$here/b6-l3.sh"
want B7 && drive B7 "$here/b7-launch.sh"
want B9 && drive B9 "$here/b9-notice.sh"
want B11 && drive B11 "$here/b11-meshscale.sh"
want B12 && drive B12 "$here/b12-diff.sh"
want B13 && drive B13 "$here/b13-fastpath.sh"
want B14 && drive B14 "$here/b14-meshcluster.sh"
want B15 && drive B15 "$here/b15-torchnodes.sh"
want B15C && drive B15C "$here/b15-torchnodes.sh" --cluster
want B16 && drive B16 "$here/b16-grow.sh"
if want B8; then
    bench_log "== B8: models"
    "$PY" "$here/b8-model.py" "$OUT" || status=1
fi
{
    echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg); suite wall time $(($(date +%s) - start)) s"
} >> "$OUT/meta.txt"
rm -rf "$OUT/scratch"

bench_log "report: $OUT/results.md"
"$PY" "$here/report.py" "$OUT"
rc=$?
if [ "$only" != B1,B2,B3,B4,B5,B6,B6L3,B7,B8,B9,B11 ] && [ $rc -eq 1 ]; then
    rc=0 # a subset: the benchmarks not selected have no rows
fi
[ $rc -ne 0 ] && status=1
"$PY" - "$OUT/summary.csv" << 'PYEOF'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print("%-3s %-4s %-62.62s %s vs %s  ratio %s  target %s%s" % (
        r["id"], r["met"], r["measure"] + ", " + r["configuration"], r["elastic"],
        r["baseline"], r["ratio"] or "-", r["target"], ("  (" + r["note"] + ")") if r["note"] else ""))
PYEOF
exit $status
