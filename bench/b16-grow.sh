#!/bin/bash
# b16-grow.sh - B16: growing back into new processes against relaunching
# the job at the larger size from L3 (#15)
#
#   bench/b16-grow.sh [--quick|--full] [--build DIR] [--out DIR] [--trials N]
#
# heat2d under `elastic-exec --nproc-per-node 8 --mpi-btl sm,tcp` (a job
# that grows needs tcp: Open MPI's sm BTL does not reach a spawned job), every rank with a ballast
# array of MIB MiB (64 in full mode) on top of its grid.  At step 100, k
# ranks (k = 1, 2, 4: the odd ones, so that no rank and its L2 buddy die
# together) SIGKILL themselves; libelastic shrinks to 8 - k, elastic-exec
# writes the room the dead ranks left, and libelastic grows back to 8 with k
# new processes (MPI_Comm_spawn served by elastic-exec, merge, re-shard,
# restore, handler).  By default the growth starts from the newest snapshot
# when redoing the steps since costs less than a snapshot, and leaves the
# new layout's protecting snapshot to the next snapshot step; variant
# eager-kK (ELASTIC_GROW_EAGER_SNAPSHOTS=1, the behaviour before
# 2026-12-07) takes a snapshot of the current step before the spawn and one
# of the new layout inside the growth; the two interleaved.  Per run
# (libelastic's events):
#   grow_ms     the growth itself: reshard_up's t_total_ms (snapshot + spawn
#               + merge + agreement + shrink + restore + handler + protect),
#               and its phases snapshot_ms (the snapshot of the current step
#               taken before the spawn), rewind_ms (instead of it, a growth
#               that starts from an older snapshot: the estimated time to
#               redo the steps since), spawn_ms, merge_ms, restore_ms,
#               handler_ms, protect_ms
#   e2e_ms      reshard_down's end (the world of 8 - k computing, the room
#               written right after the deaths) to reshard_up's end (the
#               world of 8 computing): the wait for the next agreement and
#               check step, and the growth; plus rewind_ms
# Baseline, run right after each growth run (interleaved): the same job
# relaunched at 8 ranks from the newest L3 file that the shrunk job wrote
# (8 - k ranks, the ballast included), as a batch script requeueing the job
# would:
#   relaunch_ms  elastic-exec started -> libelastic's resume event (every
#                rank has its block and the handler ran: computing again);
#                the old job's teardown is not counted; the L3 file in the
#                page cache (it was just written)
#   relaunch_cold_ms  the same again from the same file, its pages dropped
#                from the page cache first (posix_fadvise DONTNEED after
#                fsync; fincore checks it): read from the disk, as a job
#                relaunched on other nodes reads it from storage
# Rows: grow,8,MIB,VARIANT,TRIAL,METRIC,MS,ms with VARIANT grow-kK,
# eager-kK or relaunch-kK.  A summary (medians, min..max, the ratio relaunch/grow per k)
# goes to OUT/grow.md.  Goal (#15): >= 3x faster than the relaunch.
# Quick: 8 ranks x 8 MiB, k = 1 and 2, 1 trial.  Full: 8 x 64 MiB, 3 trials.
. "$(dirname "$0")/lib.sh"
bench_parse_args "$@"
bench_setup
bench_csv grow
bench_need_ulfm grow
if [ "$MODE" = quick ]; then
    mib=8 ks="1 2" trials=${TRIALS:-1}
else
    mib=64 ks="1 2 4" trials=${TRIALS:-3}
fi
victims() { case $1 in 1) echo 1 ;; 2) echo 1 5 ;; 4) echo 1 3 5 7 ;; esac; }
heat=("$HEAT2D" --nx 512 --ny 512 --ballast "$mib")
export ELASTIC_SNAPSHOT_PERIOD=50 ELASTIC_SIGNAL_CHECK_PERIOD=1 ELASTIC_RESHARD_CHECK_PERIOD=1
bench_log "8 ranks x $mib MiB, k in $ks, $trials trial(s)"

# one_grow K TRIAL [eager]: the growth run (eager:
# ELASTIC_GROW_EAGER_SNAPSHOTS=1); its rows
one_grow() {
    local k=$1 t=$2 d=$OUT/scratch/b16/grow-$1-$2 fails=() v variant=grow-k$1 eager=0
    if [ "${3:-}" = eager ]; then
        variant=eager-k$1 eager=1 d=$d-eager
    fi
    rm -rf "$d" && mkdir -p "$d"
    for v in $(victims "$k"); do fails+=(--fail "$v:100"); done
    (cd "$d" && ELASTIC_GROW_EAGER_SNAPSHOTS=$eager ELASTIC_EVENT_LOG=$d/lev ELASTIC_SNAPSHOT_DIR=$d timeout 600 "$ELASTIC_EXEC" \
        --nproc-per-node 8 --mpi-btl sm,tcp --run-id "b16-$k-$t" --event-log "$d/ev" -- \
        "${heat[@]}" --steps 300 "${fails[@]}" > "$d/out" 2> "$d/err")
    cp "$d/err" "$LOGDIR/$variant-$t.err" 2> /dev/null
    "$PY" - "$d/lev" "$k" "$t" "$mib" "$variant" << 'PYEOF' >> "$CSV"
import datetime, json, sys
path, k, t, mib, variant = sys.argv[1:6]
evs = [json.loads(l) for l in open(path)]
down = [e for e in evs if e["event"] == "reshard_down"]
up = [e for e in evs if e["event"] == "reshard_up" and e.get("new_ranks")]
if not down or not up or up[0]["new_size"] != 8:
    print("grow,8,%s,%s,%s,failed,1,flag" % (mib, variant, t))
    sys.exit(0)
u = up[0]
ts = lambda e: datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
p = "grow,8,%s,%s,%s," % (mib, variant, t)
print(p + "grow_ms,%.3f,ms" % u["t_total_ms"])
for m in ("snapshot", "rewind", "spawn", "merge", "restore", "handler", "protect"):
    if "t_%s_ms" % m in u:
        print(p + "%s_ms,%.3f,ms" % (m, u["t_%s_ms" % m]))
# a growth that started from an older snapshot redoes the steps since:
# their time (the library's estimate, the agreed mean step) is counted
print(p + "e2e_ms,%.3f,ms" % ((ts(u) - ts(down[0])) * 1e3 + u.get("t_rewind_ms", 0)))
PYEOF
}

# relaunch_once D K TRIAL NAME: the job relaunched at 8 ranks from D's
# newest L3 file; its rows as relaunch-kK metric NAME
relaunch_once() {
    local d=$1 k=$2 t=$3 name=$4 t0
    rm -f "$d/lev"
    t0=$(date +%s.%N)
    (cd "$d" && ELASTIC_RESUME=1 ELASTIC_EVENT_LOG=$d/lev ELASTIC_SNAPSHOT_DIR=$d timeout 600 \
        "$ELASTIC_EXEC" --nproc-per-node 8 --run-id "b16r-$k-$t" --event-log "$d/ev" -- \
        "${heat[@]}" --steps 152 > "$d/out" 2> "$d/err")
    cp "$d/err" "$LOGDIR/$name-$k-$t.err" 2> /dev/null
    "$PY" - "$d/lev" "$k" "$t" "$mib" "$t0" "$name" << 'PYEOF' >> "$CSV"
import datetime, json, sys
path, k, t, mib, t0, name = sys.argv[1:7]
evs = [json.loads(l) for l in open(path)] if path else []
r = [e for e in evs if e["event"] == "resume"]
p = "grow,8,%s,relaunch-k%s,%s," % (mib, k, t)
if not r or r[0]["old_size"] != 8 - int(k) or r[0]["new_size"] != 8:
    print(p + "failed_%s,1,flag" % name)
    sys.exit(0)
ts = datetime.datetime.fromisoformat(r[0]["time"].replace("Z", "+00:00")).timestamp()
print(p + "%s_ms,%.3f,ms" % (name, (ts - float(t0)) * 1e3))
print(p + "%s_restore_ms,%.3f,ms" % (name, r[0]["t_restore_ms"]))
PYEOF
}

# one_relaunch K TRIAL: the shrunk job writes L3 and stops; the relaunch at
# 8 ranks resumes from it (the file in the page cache), then again with the
# file's pages dropped; their rows
one_relaunch() {
    local k=$1 t=$2 d=$OUT/scratch/b16/relaunch-$1-$2 fails=() v f
    rm -rf "$d" && mkdir -p "$d"
    for v in $(victims "$k"); do fails+=(--fail "$v:100"); done
    (cd "$d" && ELASTIC_GROW_POLICY=never ELASTIC_SNAPSHOT_DIR=$d timeout 600 "$ELASTIC_EXEC" \
        --nproc-per-node 8 --run-id "b16r-$k-$t" --event-log "$d/ev0" -- \
        "${heat[@]}" --steps 151 --persist-period 150 "${fails[@]}" > "$d/out0" 2> "$d/err0")
    cp "$d/err0" "$LOGDIR/shrunk-$k-$t.err" 2> /dev/null
    relaunch_once "$d" "$k" "$t" relaunch
    # the same file, read from the disk (the relaunch only reads it: it
    # stops at step 152 with no L3 step of its own)
    for f in $(find "$d" -name '*.h5'); do
        "$PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$f"
        bench_log "cold: $(fincore --noheadings --output RES,FILE "$f" 2> /dev/null || echo "$f")"
    done
    relaunch_once "$d" "$k" "$t" relaunch_cold
}

for t in $(seq 1 "$trials"); do
    for k in $ks; do
        bench_log "trial $t, k=$k: growth"
        one_grow "$k" "$t"
        bench_log "trial $t, k=$k: growth, eager snapshots"
        one_grow "$k" "$t" eager
        bench_log "trial $t, k=$k: relaunch from L3"
        one_relaunch "$k" "$t"
    done
done

"$PY" - "$CSV" "$OUT/grow.md" "$mib" << 'PYEOF'
import collections, csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
mib = sys.argv[3]
v = collections.defaultdict(list)
for r in rows:
    if r["bench"] == "grow" and r["mib"] == mib and r["unit"] == "ms":
        v[(r["variant"], r["metric"])].append(float(r["value"]))
fails = [r for r in rows if r["bench"] == "grow" and r["metric"].startswith("failed")]
def cell(x):
    return "%.0f (%.0f..%.0f, n=%d)" % (statistics.median(x), min(x), max(x), len(x)) if x else "-"
out = ["# B16: growing back into new processes vs relaunching from L3",
       "", "8 ranks x %s MiB ballast (heat2d 512x512), elastic-exec --nproc-per-node 8;" % mib,
       "medians (min..max, trials) in ms; ratio = relaunch / e2e (goal >= 3);",
       "relaunch: the L3 file in the page cache; cold: the same file read from the",
       "disk.", "",
       "| k | grow_ms | snapshot | rewind | spawn | merge | restore | handler | protect | e2e_ms | relaunch_ms | ratio | relaunch_cold_ms | ratio |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
ks = sorted({r["variant"].split("-k")[1] for r in rows if r["variant"].startswith("grow-k")}, key=int)
for k in ks:
    rl = v[("relaunch-k" + k, "relaunch_ms")]
    rc = v[("relaunch-k" + k, "relaunch_cold_ms")]
    for name, label in (("grow", k), ("eager", k + ", eager")):
        g = lambda m: v[(name + "-k" + k, m)]
        e = g("e2e_ms")
        if not e:
            continue
        ratio = lambda b: "%.1fx" % (statistics.median(b) / statistics.median(e)) if e and b else "-"
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, cell(g("grow_ms")), cell(g("snapshot_ms")), cell(g("rewind_ms")),
            cell(g("spawn_ms")),
            cell(g("merge_ms")), cell(g("restore_ms")),
            cell(g("handler_ms")), cell(g("protect_ms")), cell(e), cell(rl), ratio(rl), cell(rc),
            ratio(rc)))
if fails:
    out += ["", "failed runs: " + ", ".join("%s trial %s" % (r["variant"], r["trial"]) for r in fails)]
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PYEOF
rm -rf "$OUT/scratch/b16"
