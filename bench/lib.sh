# shellcheck shell=bash disable=SC2034
# lib.sh - shared code of the benchmark drivers (source it; bash)
#
# Every driver is called as
#   bench/bN-NAME.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
# and appends rows to OUT/NAME.csv:
#   bench,ranks,mib,variant,trial,metric,value,unit
# one row per trial and measured value (no aggregation: report.py takes the
# medians).  Logs of every run go to OUT/logs/NAME/.  The build tree is a
# configured and built elastic tree (default: ./build or the current
# directory); the drivers take every program from it.
set -u
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP_SRCDIR=$(cd "$BENCH_DIR/.." && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

MODE=full
BUILD=
OUT=
TRIALS=

bench_die() {
    echo "$(basename "$0"): $*" >&2
    exit 2
}

bench_log() { echo "[$(date +%H:%M:%S)] $(basename "$0" .sh): $*" >&2; }

# bench_parse_args "$@": the options every driver takes
bench_parse_args() {
    while [ $# -gt 0 ]; do
        case $1 in
            --quick) MODE=quick ;;
            --full) MODE=full ;;
            --build) BUILD=${2:?--build needs a directory}; shift ;;
            --build=*) BUILD=${1#--build=} ;;
            --out) OUT=${2:?--out needs a directory}; shift ;;
            --out=*) OUT=${1#--out=} ;;
            --trials) TRIALS=${2:?--trials needs a number}; shift ;;
            --trials=*) TRIALS=${1#--trials=} ;;
            -h | --help)
                sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
                exit 0 ;;
            *) bench_die "'$1' is invalid (expected --quick, --full, --build DIR, --out DIR, --trials N)" ;;
        esac
        shift
    done
    if [ -n "$TRIALS" ] && ! [[ $TRIALS =~ ^[1-9][0-9]*$ ]]; then
        bench_die "--trials: '$TRIALS' is invalid (expected an integer >= 1)"
    fi
    bench_setup
}

# soak_args DEFAULT_RUNS "$@": the options of a test's long run
# (pmix-soak.sh, multikill.sh): --build DIR (default: build/ of this tree),
# --runs N, and --cores DIR where the caller set SOAK_CORES=1 (exported as
# PL_CORE_DIR).  Sets SOAK_BUILD and SOAK_RUNS; a bad value exits 2.
soak_args() {
    SOAK_RUNS=$1
    SOAK_BUILD=$TOP_SRCDIR/build
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
            --build) SOAK_BUILD=${2:?--build needs a directory}; shift 2 ;;
            --runs) SOAK_RUNS=${2:?--runs needs a number}; shift 2 ;;
            --cores)
                [ "${SOAK_CORES:-0}" = 1 ] || bench_die "unknown argument '$1' (see --help)"
                mkdir -p "${2:?--cores needs a directory}" && PL_CORE_DIR=$(cd "$2" && pwd) ||
                    bench_die "--cores: cannot create '$2'"
                export PL_CORE_DIR
                shift 2 ;;
            -h | --help)
                sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
                exit 0 ;;
            *) bench_die "unknown argument '$1' (see --help)" ;;
        esac
    done
    case "$SOAK_RUNS" in
        '' | *[!0-9]* | 0) bench_die "--runs takes a positive integer, not '$SOAK_RUNS'" ;;
    esac
    [ -f "$SOAK_BUILD/tests/Makefile" ] ||
        bench_die "no configured build in '$SOAK_BUILD' (scripts/test.sh makes one in ./build)"
}

# bench_setup: find the build tree and its programs; export MPI settings
bench_setup() {
    if [ -z "$BUILD" ]; then
        if [ -f "$TOP_SRCDIR/build/tests/Makefile" ]; then
            BUILD=$TOP_SRCDIR/build
        else
            BUILD=.
        fi
    fi
    [ -f "$BUILD/tests/Makefile" ] ||
        bench_die "--build: '$BUILD' is not a configured build tree (no tests/Makefile)"
    BUILD=$(cd "$BUILD" && pwd)
    OUT=${OUT:-$PWD/bench-results}
    mkdir -p "$OUT/logs" || bench_die "--out: cannot create '$OUT'"
    OUT=$(cd "$OUT" && pwd)
    MPIRUN=$(sed -n 's/^MPIRUN = //p' "$BUILD/tests/Makefile")
    HAVE_ULFM=$(sed -n 's/^HAVE_ULFM = //p' "$BUILD/tests/Makefile")
    HEAT2D=$BUILD/examples/heat2d
    ELASTIC_EXEC=$BUILD/src/exec/elastic-exec
    ELASTIC_MPIRUN=$BUILD/src/mpirun/elastic-mpirun
    TESTS_DIR=$BUILD/tests
    MPITIME_SO=$BUILD/tests/.libs/libbenchmpitime.so
    # A sanitizer build (--enable-sanitizers): the ASan runtime must come
    # first in LD_PRELOAD, before the timing library, or every rank exits 1
    local asan
    asan=$(ldd "$HEAT2D" 2> /dev/null | sed -n 's/^[[:space:]]*libasan\.so[^ ]* => \([^ ]*\) .*/\1/p')
    MPITIME_PRELOAD=$MPITIME_SO
    if [ -n "$asan" ]; then
        MPITIME_PRELOAD=$asan:$MPITIME_SO
        # The benchmarks measure, they do not look for leaks (the test suite
        # does): at exit LeakSanitizer's tracer crashed on a bogus dynamic-TLS
        # entry in MPI ranks that carry the timing library and were started
        # by elastic-exec's PMIx server (the B1 restart baseline)
        export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1
    unset ELASTIC_EVENT_LOG ELASTIC_RESUME ELASTIC_SNAPSHOT_PERIOD ELASTIC_PERSIST_PERIOD \
        ELASTIC_SNAPSHOT_DIR ELASTIC_RUN_ID ELASTIC_LOG
    # What elastic-mpirun gives mpirun on one host with ULFM (see
    # elastic-mpirun --dry-run); every direct mpirun here uses the same.
    MPI_FT_ARGS=()
    [ "$HAVE_ULFM" = yes ] && MPI_FT_ARGS=(--with-ft ulfm)
    MPI_ARGS=(--oversubscribe --bind-to none --mca pml ob1 --mca btl self,sm,tcp
        --mca coll ^han --mca async_mpi_finalize 1)
}

# bench_need_ulfm: exit 0 with a note when the build has no ULFM
bench_need_ulfm() {
    if [ "$HAVE_ULFM" != yes ]; then
        bench_log "skipped: this build's MPI has no ULFM ($MPIRUN)"
        echo "$1,,,skipped,0,no_ulfm,1,flag" >> "$CSV"
        exit 0
    fi
}

# bench_need_torch BENCH: exit 0 with a `skipped` row when $PY cannot
# import torch.distributed
bench_need_torch() {
    if ! "$PY" -c 'import torch.distributed' 2> /dev/null; then
        bench_log "skipped: $PY cannot import torch (apt-get install python3-torch)"
        row "$1" 0 "" skipped 0 no_torch 1 flag
        exit 0
    fi
}

# bench_csv NAME: start OUT/NAME.csv (appending) and the log directory
bench_csv() {
    CSV=$OUT/$1.csv
    LOGDIR=$OUT/logs/$1
    mkdir -p "$LOGDIR"
    [ -s "$CSV" ] || echo "bench,ranks,mib,variant,trial,metric,value,unit" > "$CSV"
}

# row BENCH RANKS MIB VARIANT TRIAL METRIC VALUE UNIT
row() {
    local IFS=,
    echo "$*" >> "$CSV"
}

# now: epoch seconds with nanoseconds
now() { date +%s.%N; }

# elapsed T0 T1: T1 - T0 in seconds
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

# mpitime_run FILE: the application's run time (latest MPI_Finalize entry -
# latest MPI_Init return) and its MPI_Init time (slowest rank), from the
# lines libbenchmpitime.so appended to FILE: prints "RUN_S INIT_S"
mpitime_run() {
    awk '{ if ($3 > li) li = $3; if ($4 > lf) lf = $4; d = $3 - $2; if (d > init) init = d }
         END { if (NR == 0) exit 1; printf "%.6f %.6f\n", lf - li, init }' "$1"
}

# mpitime_stats FILE: as mpitime_run, and what libbenchmpitime.so counted
# between MPI_Init's return and MPI_Finalize's entry, summed over the
# ranks: prints "RUN_S INIT_S CPU_S NIVCSW CALLS BYTES LIB_S OTHER_CPU_S"
# (CPU_S user + sys seconds, NIVCSW involuntary context switches, CALLS and
# BYTES the MPI communication started, LIB_S the time inside libelastic's
# calls, OTHER_CPU_S the CPU time of the threads but the main one; see
# bench/mpitime.c).  Fails if a line lacks them.
mpitime_stats() {
    awk 'NF < 10 { bad = 1 }
         { if ($3 > li) li = $3; if ($4 > lf) lf = $4; d = $3 - $2; if (d > init) init = d
           cpu += $5; cs += $6; calls += $7; bytes += $8; lib += $9; other += $10 }
         END { if (NR == 0 || bad) exit 1
               printf "%.6f %.6f %.6f %.0f %.0f %.0f %.6f %.6f\n", lf - li, init, cpu, cs, calls,
                   bytes, lib, other }' "$1"
}

# bench_make LOG TARGET...: make TARGETs in the build's tests directory,
# unless BENCH_NO_MAKE=1 (`run.sh --no-build`, used inside `make check`):
# then only check that they exist.  Returns non-zero if one is missing.
bench_make() {
    local log=$1 t
    shift
    if [ "${BENCH_NO_MAKE:-0}" = 1 ]; then
        for t in "$@"; do
            [ -x "$TESTS_DIR/$t" ] || { echo "$TESTS_DIR/$t is not built" >> "$log"; return 1; }
        done
        return 0
    fi
    make -s -C "$TESTS_DIR" "$@" > "$log" 2>&1
}

# bench_build_programs: bring the build tree up to date and build the
# benchmark programs (nothing with BENCH_NO_MAKE=1)
bench_build_programs() {
    [ "${BENCH_NO_MAKE:-0}" = 1 ] && return 0
    make -s -C "$BUILD" > "$OUT/logs/build.log" 2>&1 &&
        make -s -C "$BUILD/tests" bench-programs >> "$OUT/logs/build.log" 2>&1 ||
        { tail -n 20 "$OUT/logs/build.log" >&2; bench_die "building the benchmark programs failed (see $OUT/logs/build.log)"; }
}
