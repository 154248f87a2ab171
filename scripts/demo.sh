#!/usr/bin/env bash
# demo.sh - the README's demo command: heat2d on 8 ranks under elastic-mpirun
# survives real failures and a preemption, and ends with the checksum of a
# failure-free run.
#
#   1. a failure-free reference run (8 ranks) gives the expected checksum;
#   2. the elastic run starts (8 ranks, L1/L2 every 5 steps, L3 every 20);
#   3. one rank is SIGKILLed from outside: in-place recovery, 8 -> 7;
#   4. a rank and its L2 buddy are SIGKILLed together: in place is impossible,
#      the job exits 76 and elastic-mpirun relaunches it from the HDF5 snapshot;
#   5. a preemption signal (SIGTERM to elastic-mpirun): the ranks write a
#      snapshot and exit 75 (suspended);
#   6. the same command is rerun with 6 ranks: it resumes from the snapshot at
#      the new world size and finishes; the checksums are compared.
# Act 2, where network namespaces can be made (scripts/slurm-cluster.sh):
#   7. an emulated 3-node Slurm cluster; `srun --no-kill -N3 elastic-exec
#      --nproc-per-node 2 heat2d` runs 6 ranks as one job across the nodes
#      (mesh mode); every process of node n2 is SIGKILLed (its slurmd
#      too): the survivors recover in place (6 -> 4), every node's
#      elastic-exec prints the same summary and the checksum matches.
#
# Installs what is missing (scripts/bootstrap.sh) and builds first.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
T0=$(date +%s%3N)
now() { echo "scale=2; ($(date +%s%3N) - $T0) / 1000" | bc -l; }
say() { printf '[demo %7.2fs] %s\n' "$(now)" "$*"; }
timeline=()
mark() { timeline+=("$(printf '%7.2fs  %s' "$(now)" "$*")"); say "$*"; }

bash scripts/bootstrap.sh | sed 's/^/  /'
say "building"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then autoreconf -fi > /dev/null; fi
build=$top/build
[ -f config.status ] && build=$top
mkdir -p "$build"
(cd "$build" && { [ -f config.status ] || "$top/configure" > configure.out 2>&1; } &&
    make -j"$(nproc)" > make.out 2>&1) || {
    echo "build failed; see $build/configure.out and $build/make.out"
    exit 1
}
heat2d=$build/examples/heat2d
empirun=$build/src/mpirun/elastic-mpirun
mpirun=$(sed -n "s/^MPIRUN = //p" "$build/tests/Makefile")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

work=$(mktemp -d /tmp/elastic-demo.XXXXXX)
job_pid=
cluster=
cleanup() {
    [ -n "$job_pid" ] && kill -KILL "$job_pid" 2> /dev/null
    [ -n "$cluster" ] && "$top/scripts/slurm-cluster.sh" down "$cluster" > /dev/null 2>&1
    pkill -KILL -f "$heat2d" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
app=("$heat2d" --nx 256 --ny 256 --steps 400 --sleep 15 --progress 10)
export ELASTIC_SNAPSHOT_PERIOD=5 ELASTIC_PERSIST_PERIOD=20 ELASTIC_SNAPSHOT_DIR=$work/snapshots
export ELASTIC_RUN_ID=demo ELASTIC_EVENT_LOG=$work/events.jsonl

# rank_pid R: the PID of the heat2d process of original rank R of our job
rank_pid() {
    local f p
    for f in /proc/[0-9]*/environ; do
        p=${f#/proc/}
        p=${p%/environ}
        grep -qxz -e "OMPI_COMM_WORLD_RANK=$1" "$f" 2> /dev/null || continue
        grep -qxz -e "ELASTIC_SNAPSHOT_DIR=$ELASTIC_SNAPSHOT_DIR" "$f" 2> /dev/null || continue
        grep -q heat2d "/proc/$p/cmdline" 2> /dev/null && echo "$p" && return 0
    done
    echo "no heat2d process of original rank $1 is running" >&2
    return 1
}
# wait_line PATTERN FILE [TIMEOUT]: wait for a line in FILE
wait_line() {
    local deadline=$(($(date +%s) + ${3:-180}))
    until grep -a -q -e "$1" "$2" 2> /dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] || {
            echo "timed out waiting for '$1' in $2"
            tail -n 20 "$2"
            exit 1
        }
        sleep 0.05
    done
}
checksum_of() { grep -a -o 'checksum [0-9a-f]*' "$1" | tail -n 1 | cut -d' ' -f2; }

say "1/6 failure-free reference run: ${app[*]##*/} on 8 ranks (no library events)"
ELASTIC_EVENT_LOG=$work/ref.jsonl ELASTIC_SNAPSHOT_DIR=$work/ref "$empirun" -q --no-wrap \
    --run-dir "$work/ref-run" -n 8 "${app[@]}" --sleep 0 > "$work/ref.out" 2>&1
ref=$(checksum_of "$work/ref.out")
mark "reference checksum $ref"

say "2/6 the elastic run: elastic-mpirun -n 8 heat2d (L1/L2 every 5 steps, HDF5 every 20)"
"$empirun" --no-wrap --run-dir "$work/run" -n 8 "${app[@]}" > "$work/run.out" 2>&1 &
job_pid=$!
wait_line '^step 60$' "$work/run.out"

victim=$(rank_pid 2)
mark "3/6 kill -9 rank 2 (pid $victim)"
kill -KILL "$victim"
wait_line 'resharded at step' "$work/run.out"
mark "    in place: $(grep -a -m1 'resharded at step' "$work/run.out")"
wait_line '^step 150$' "$work/run.out"

# After the first recovery the working ranks are the original 0,1,3,4,...,7
# renumbered 0..6; L2 buddies are the next working rank, so original ranks 4
# and 5 hold each other's only copy.
a=$(rank_pid 4)
b=$(rank_pid 5)
mark "4/6 kill -9 ranks 4 and 5 together (pids $a $b): a rank and its L2 buddy"
kill -KILL "$a" "$b"
wait_line 'attempt 2' "$work/run.out" 240
mark "    in place impossible (exit 76): elastic-mpirun relaunched from the HDF5 snapshot"
wait_line 'resumed from step' "$work/run.out" 240
mark "    $(grep -a 'resumed from step' "$work/run.out" | tail -n 1)"
wait_line '^step 260$' "$work/run.out" 240

mark "5/6 preemption: SIGTERM to elastic-mpirun"
kill -TERM "$job_pid"
rc=0
wait "$job_pid" || rc=$?
job_pid=
grep -a -q 'suspended at step' "$work/run.out" && mark "    $(grep -a 'suspended at step' "$work/run.out" | tail -n 1), elastic-mpirun exit $rc"
[ "$rc" -eq 75 ] || {
    echo "expected the suspend exit code 75, got $rc"
    tail -n 30 "$work/run.out"
    exit 1
}

say "6/6 rerun the same command with 6 ranks: it resumes at the new world size"
rc=0
"$empirun" --no-wrap --run-dir "$work/run" -n 6 "${app[@]}" --sleep 0 > "$work/resume.out" 2>&1 || rc=$?
mark "    $(grep -a 'resumed from step' "$work/resume.out" | tail -n 1)"
got=$(checksum_of "$work/resume.out")
mark "    finished (exit $rc), checksum $got"

echo
echo "Timeline (seconds since the demo started):"
printf '  %s\n' "${timeline[@]}"
echo
echo "elastic-mpirun's summaries:"
sed -n '/summary:/,/run directory/p' "$work/run.out" "$work/resume.out" | sed 's/^/  /'
echo
echo "Library events (JSON lines in ELASTIC_EVENT_LOG):"
/usr/bin/python3 - "$work/events.jsonl" << 'EOF'
import json, sys
print("  %-13s %6s %11s %10s %10s" % ("event", "step", "world", "failed", "total ms"))
persisted = []
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("event") == "persist":
        persisted.append(str(e.get("step")))
        continue
    print("  %-13s %6s %4s -> %-3s %10s %10s" % (e.get("event"), e.get("step"), e.get("old_size"),
          e.get("new_size"), ",".join(map(str, e.get("failed", []))) or "-",
          "%.1f" % e["t_total_ms"] if "t_total_ms" in e else "-"))
print("  HDF5 snapshots written at steps: " + " ".join(persisted))
EOF
echo
if [ -n "$got" ] && [ "$got" = "$ref" ] && [ "$rc" -eq 0 ]; then
    say "RESULT: checksums match ($got): nothing was lost to 3 killed ranks, a relaunch and a preemption"
else
    say "RESULT: MISMATCH: reference $ref, elastic run $got (exit $rc)"
    exit 1
fi

# ---- act 2: a node lost, recovered in place across nodes -----------------
echo
cluster=$work/cluster
if ! "$top/scripts/slurm-cluster.sh" up "$cluster" --nodes 3 --cpus 4 --mode netns \
    > "$work/cluster.log" 2>&1; then
    cluster=
    say "act 2 skipped: no emulated cluster here (network namespaces: $(tail -n 1 "$work/cluster.log"))"
    exit 0
fi
timeline=()
ctl() { "$top/scripts/slurm-cluster.sh" ctl "$cluster" "$@"; }
mesh_app=("$heat2d" --nx 64 --ny 48 --steps 3000 --sleep 1 --progress 100)
ref2=$("$heat2d" --nx 64 --ny 48 --steps 3000 2>&1 | sed -n 's/^checksum //p')
mark "7/7 act 2: 3 emulated Slurm nodes; srun --no-kill -N3 elastic-exec --nproc-per-node 2 heat2d (6 ranks, one job across the nodes)"
(
    unset ELASTIC_SNAPSHOT_DIR ELASTIC_PERSIST_PERIOD ELASTIC_RUN_ID
    ELASTIC_EVENT_LOG=$work/mesh-events.jsonl
    rc=0
    ctl srun --no-kill -N3 --ntasks-per-node=1 "$build/src/exec/elastic-exec" --nproc-per-node 2 \
        --oversubscribe --mpi-btl tcp --node-timeout 1 --status-file "$work/status" \
        "${mesh_app[@]}" > "$work/mesh.out" 2>&1 || rc=$?
    echo "$rc" > "$work/mesh.rc"
) &
job_pid=$!
wait_line '^step 300$' "$work/mesh.out" 120 || {
    say "act 2: the job did not start; its output:"
    tail -n 20 "$work/mesh.out"
    exit 1
}
t_kill=$(date +%s.%N)
"$top/scripts/slurm-cluster.sh" kill-node "$cluster" n2
mark "    every process of node n2 SIGKILLed (slurmd, elastic-exec, its 2 ranks)"
wait "$job_pid"
job_pid=
# when it was seen, from the members' log lines and libelastic's event
t_lost=$(grep -a -m1 'mesh: node n2 (member 1) lost' "$work/mesh.out" | cut -d' ' -f1)
t_lost=$(date -d "$t_lost" +%s.%N 2> /dev/null || echo "$t_kill")
t_back=$(/usr/bin/python3 -c 'import calendar, json, sys, time
for l in open(sys.argv[1]):
    try: e = json.loads(l)
    except ValueError: continue
    if e.get("event") == "reshard_down":
        t = e["time"].rstrip("Z")
        base, ms = t.split(".")
        print("%.3f" % (calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(ms) / 1000.0))
        break' "$work/mesh-events.jsonl" 2> /dev/null)
say "    the other nodes lost n2 $(echo "($t_lost - $t_kill) * 1000 / 1" | bc) ms after the kill;" \
    "its ranks declared failed, the survivors computing again (6 -> 4) $(echo "(${t_back:-$t_kill} - $t_kill) * 1000 / 1" | bc) ms after it"
mark "    $(grep -a -m1 '^resharded at step' "$work/mesh.out")"
got2=$(checksum_of "$work/mesh.out")
rc2=$(cat "$work/mesh.rc")
mark "    finished (srun exit $rc2), checksum $got2"
echo
echo "Timeline of act 2:"
printf '  %s\n' "${timeline[@]}"
echo
echo "What every node's elastic-exec said at the end:"
grep -a '^elastic-exec: job ' "$work/mesh.out" | sed 's/^/  /'
echo "--status-file: $(cat "$work/status" 2> /dev/null)"
echo
if [ -n "$got2" ] && [ "$got2" = "$ref2" ] && [ "$(cut -d' ' -f1 "$work/status" 2> /dev/null)" = 0 ]; then
    say "RESULT (act 2): checksums match ($got2): a whole node lost, recovered in place across the nodes"
else
    say "RESULT (act 2): MISMATCH: reference $ref2, got '$got2' (srun exit $rc2)"
    tail -n 30 "$work/mesh.out"
    exit 1
fi
