#!/bin/bash
# bench-recovery.sh - median duration of each recovery phase, from libelastic's
# JSON event log, over several runs of heat2d in which one rank is SIGKILLed.
#
# usage: bench-recovery.sh [-n RANKS] [-r RUNS] [-b BALLAST_MIB] [-k RANK:STEP]
#                          [-s SPARES] [-- HEAT2D-ARGS...]
#   -n  ranks (8)    -r  runs (7)    -b  extra state per rank in MiB (64)
#   -k  the failure (3:35)            -s  spare ranks (0)
# Environment: MPIRUN (default: mpirun on PATH), HEAT2D (default: heat2d
# beside this script), MPIRUN_ARGS (default: oversubscribed ob1, ULFM).
# Prints one line per run and the medians; t_total is from the last
# progress before the failure to the end of the handler's protection snapshot.
set -u
n=8 runs=7 ballast=64 fail=3:35 spares=0
while getopts "n:r:b:k:s:" o; do
    case $o in
        n) n=$OPTARG ;;
        r) runs=$OPTARG ;;
        b) ballast=$OPTARG ;;
        k) fail=$OPTARG ;;
        s) spares=$OPTARG ;;
        *) sed -n '2,12s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
here=$(cd "$(dirname "$0")" && pwd)
HEAT2D=${HEAT2D:-$here/heat2d}
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_ARGS=${MPIRUN_ARGS:---with-ft ulfm --oversubscribe --bind-to none --mca pml ob1 --mca btl self,sm,tcp --mca coll ^han}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for i in $(seq "$runs"); do
    # shellcheck disable=SC2086
    ELASTIC_EVENT_LOG=$tmp/events ELASTIC_SNAPSHOT_PERIOD=${ELASTIC_SNAPSHOT_PERIOD:-10} \
        ELASTIC_SPARE_RANKS=$spares ELASTIC_SNAPSHOT_BUFFER_SIZE=2 \
        timeout 600 "$MPIRUN" $MPIRUN_ARGS -n "$n" "$HEAT2D" --nx 64 --ny 256 --steps 50 \
        --ballast "$ballast" --fail "$fail" --quiet "$@" > "$tmp/out.$i" 2>&1
    rc=$?
    line=$(tail -n 1 "$tmp/events" 2> /dev/null)
    echo "run $i: exit $rc $(grep -h 'ballast\|checksum' "$tmp/out.$i" | tr '\n' ' ')"
    [ "$rc" = 0 ] && [ -n "$line" ] && echo "$line" >> "$tmp/all"
    rm -f "$tmp/events"
done
[ -s "$tmp/all" ] || { echo "no successful run" >&2; exit 1; }
"$PY" - "$tmp/all" "$n" "$ballast" << 'PYEOF'
import json, statistics, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
keys = ["t_detect_ms", "t_revoke_agree_ms", "t_shrink_ms", "t_restore_ms",
        "t_handler_ms", "t_protect_ms", "t_total_ms"]
print("%s ranks, %s MiB extra state per rank, %d events (%s)" % (
    sys.argv[2], sys.argv[3], len(ev), ", ".join(sorted({"%d->%d" % (e["old_size"], e["new_size"]) for e in ev}))))
for k in keys:
    v = [e[k] for e in ev]
    print("  %-18s median %9.1f ms   (min %.1f, max %.1f)" % (k, statistics.median(v), min(v), max(v)))
PYEOF
