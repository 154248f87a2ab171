#!/usr/bin/env python3
"""b11-model.py - B11's tables and growth models (bench/b11-meshscale.sh)

    bench/b11-model.py OUT/meshscale.csv > OUT/meshscale.md

Per size: the median and the range (min-max) over the trials of every
metric.  Models, least squares on the per-size medians:
  time metrics (fence, failure broadcast, join):  a*log_8(n) + b (the goal:
      O(log n) rounds; log_8 n = the tree's depth for radix 8) and, to test
      it, c*n + d (what a CPU-bound run on a fixed number of cores gives:
      the work of all n members shares the same 2 cores);
  heartbeat bytes/s per member: a constant (the goal), with its spread.
Both fits are printed with R^2 and their value at 10,000 members; the log
fit is also made over the sizes whose run kept the cores less than half
busy (fence_cpu_util < 0.5), the regime where the numbers are the
protocol's latency and not the machine's throughput.
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

RADIX = 8
TARGET_N = 10000
CORES = 2  # of the machine the CSV was measured on (bench_mesh_scale prints it)


def depth(n, k=RADIX):
    d, cap, width = 0, 1, 1
    while cap < n:
        width *= k
        cap += width
        d += 1
    return d


def fit(xs, ys):
    """least squares y = a*x + b: (a, b, r2)"""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 2 or sxx == 0:
        return None
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    b = my - a * mx
    ss = sum((y - my) ** 2 for y in ys)
    res = sum((y - (a * x + b)) ** 2 for x, y in zip(xs, ys))
    return a, b, (1 - res / ss) if ss > 0 else 1.0


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    data = defaultdict(lambda: defaultdict(list))
    failed = defaultdict(int)
    for r in rows:
        if r["bench"] != "meshscale" or r["variant"] != "radix8":
            continue
        n = int(r["ranks"])
        if r["metric"] == "failed":
            failed[n] += 1
            continue
        data[r["metric"]][n].append(float(r["value"]))
    sizes = sorted(data["fence_ms"])
    if not sizes:
        print("B11: no rows")
        return 1
    med = lambda m, n: statistics.median(data[m][n]) if data[m][n] else float("nan")

    def cell(m, n, fmt="%.1f"):
        v = data[m][n]
        if not v:
            return "-"
        return (fmt + " [" + fmt + "-" + fmt + "]") % (statistics.median(v), min(v), max(v))

    print("### B11: the mesh protocol alone, radix %d, node timeout 2 s\n" % RADIX)
    print("Medians [min-max] over the trials; one machine, every member on 127.0.0.1.\n")
    print("| members | depth | trials (failed) | join ms | fence ms | failure: first survivor ms "
          "| failure: last survivor ms | fence after the loss ms | fence CPU use (of all cores) "
          "| CPU per member per fence, us | fds | load average |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        print("| %d | %d | %d (%d) | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            n, depth(n), len(data["fence_ms"][n]), failed[n], cell("join_ms", n, "%.0f"),
            cell("fence_ms", n), cell("lost_first_ms", n, "%.2f"), cell("lost_last_ms", n),
            cell("fence_after_loss_ms", n), cell("fence_cpu_util", n, "%.2f"),
            "%.0f" % (1e3 * med("fence_cpu_util", n) * CORES * med("fence_ms", n) / n),
            "%.0f" % med("fds", n), cell("load1", n)))
    print()
    print("| members | heartbeat B/s per member: median member | mean over members | busiest (root) "
          "| idle CPU, % of one core (all members) |")
    print("|---|---|---|---|---|")
    for n in sizes:
        print("| %d | %s | %s | %s | %s |" % (n, cell("hb_Bps_median", n, "%.0f"),
                                             cell("hb_Bps_mean", n, "%.0f"),
                                             cell("hb_Bps_max", n, "%.0f"),
                                             cell("idle_cpu_pct", n)))
    print()
    print("#### Models (least squares on the medians), extrapolated to %d members "
          "(depth %d)\n" % (TARGET_N, depth(TARGET_N)))
    print("| metric | a*log_8(n)+b | R^2 | at %d | c*n+d | R^2 | at %d | log fit, uncontended sizes only |" % (TARGET_N, TARGET_N))
    print("|---|---|---|---|---|---|---|---|")
    calm = [n for n in sizes if med("fence_cpu_util", n) < 0.5]
    for m, label in (("fence_ms", "fence"), ("lost_last_ms", "failure known by all"),
                     ("fence_after_loss_ms", "fence after the loss"), ("join_ms", "join")):
        ns = [n for n in sizes if data[m][n]]
        ys = [med(m, n) for n in ns]
        lg = fit([math.log(n, RADIX) for n in ns], ys)
        li = fit([float(n) for n in ns], ys)
        if not lg or not li:
            continue
        cl = [n for n in calm if data[m][n]]
        lc = fit([math.log(n, RADIX) for n in cl], [med(m, n) for n in cl]) if len(cl) >= 2 else None
        calm_s = ("%.2f*log_8(n)%+.2f ms over n=%s: %.1f ms at %d" % (
            lc[0], lc[1], ",".join(map(str, cl)), lc[0] * math.log(TARGET_N, RADIX) + lc[1],
            TARGET_N)) if lc else "fewer than 2 sizes"
        print("| %s (ms) | %.2f*log_8(n)%+.2f | %.3f | %.0f | %.4f*n%+.2f | %.3f | %.0f | %s |" % (
            label, lg[0], lg[1], lg[2], lg[0] * math.log(TARGET_N, RADIX) + lg[1],
            li[0], li[1], li[2], li[0] * TARGET_N + li[1], calm_s))
    munge = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["bench"] == "meshscale" and r["variant"] == "munge" and r["metric"] != "failed":
            munge[r["metric"]][int(r["ranks"])].append(float(r["value"]))
    if munge["join_ms"]:
        print()
        print("#### Munge authentication (a private munged), against the shared secret\n")
        print("| members | trials | join ms munge / secret | fence ms munge / secret "
              "| failure: last survivor ms munge / secret | fence after the loss ms munge / secret |")
        print("|---|---|---|---|---|---|")
        for n in sorted(munge["join_ms"]):
            mm = lambda m: statistics.median(munge[m][n]) if munge[m][n] else float("nan")
            print("| %d | %d | %.0f / %.0f | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f |" % (
                n, len(munge["join_ms"][n]), mm("join_ms"), med("join_ms", n), mm("fence_ms"),
                med("fence_ms", n), mm("lost_last_ms"), med("lost_last_ms", n),
                mm("fence_after_loss_ms"), med("fence_after_loss_ms", n)))
    hb = [med("hb_Bps_mean", n) for n in sizes]
    hbm = [med("hb_Bps_median", n) for n in sizes]
    print()
    print("Heartbeats: mean bytes/s per member %.0f-%.0f over n=%d..%d (constant model: %.0f B/s "
          "per member, %.1f MB/s for the whole mesh at %d members); the median member (a leaf: "
          "one link) sends %.0f-%.0f B/s." % (
              min(hb), max(hb), sizes[0], sizes[-1], statistics.mean(hb),
              statistics.mean(hb) * TARGET_N / 1e6, TARGET_N, min(hbm), max(hbm)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
