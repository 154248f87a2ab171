#!/usr/bin/python3
"""l3bg_report.py CSV - the summary of bench/b6-l3.sh's rows (markdown):
per variant its time over the p10 runs around it (wall and CPU: the median
over the trials, min..max, interquartile range), and the background L3
writes' bandwidth next to dd's."""
import csv
import statistics
import sys


def q(xs, f):
    xs = sorted(xs)
    k = (len(xs) - 1) * f
    i = int(k)
    return xs[i] if i + 1 >= len(xs) else xs[i] + (xs[i + 1] - xs[i]) * (k - i)


def spread(xs, fmt):
    return "%s (min..max %s..%s, IQR %s..%s, n=%d)" % tuple(
        [fmt % statistics.median(xs), fmt % min(xs), fmt % max(xs), fmt % q(xs, 0.25), fmt % q(xs, 0.75), len(xs)])


rows = list(csv.DictReader(open(sys.argv[1])))
val = {}
for r in rows:
    val.setdefault((r["variant"], r["trial"], r["metric"]), []).append(r["value"])
print("| variant | wall time / p10 around it | CPU time / p10 around it |")
print("|---|---|---|")
for v in ("l3bg", "l3bgpc", "l3bg10", "l3sync"):
    wall, cpu = [], []
    for (vv, t, m), x in val.items():
        if vv != v or m != "run_s" or (v, t, "base_run_s") not in val:
            continue
        wall.append(float(x[0]) / float(val[(v, t, "base_run_s")][0]))
        cpu.append(float(val[(v, t, "cpu_s")][0]) / float(val[(v, t, "base_cpu_s")][0]))
    if wall:
        pct = lambda xs: [100 * (y - 1) for y in xs]
        print("| %s | %s %% | %s %% |" % (v, spread(pct(wall), "%+.1f"), spread(pct(cpu), "%+.1f")))


def bw(v):
    return [float(x) for (vv, t, m), xs in val.items() if vv == v and m == "bw_mib_s" for x in xs if x != "inf"]


dd = bw("dd")
size = [float(x) for (v, t, m), xs in val.items() if m == "file_mib" for x in xs]
print()
if dd:
    print("| write of %.1f MiB (rank 0's thread: start to fdatasync) | MiB/s | / dd |" % statistics.median(size))
    print("|---|---|---|")
    for v, what in (("l3bg", "during l3bg (nice 0, cores busy)"),
                    ("l3bgpc", "during l3bgpc (page cache, nice 0, cores busy)"),
                    ("l3bg10", "during l3bg10 (nice 10, cores busy)"),
                    ("idle10", "job sleeping 20 ms a step, nice 10"), ("idle0", "job sleeping 20 ms a step, nice 0")):
        if bw(v):
            print("| %s | %s | %.0f %% |" % (what, spread(bw(v), "%.0f"), 100 * statistics.median(bw(v)) / statistics.median(dd)))
    print("| dd conv=fdatasync, same bytes, same directory, after each run | %s | |" % spread(dd, "%.0f"))
