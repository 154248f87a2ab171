#!/usr/bin/python3
"""b7-overhead.py - B7's launch overheads round by round, with their spread.

    bench/b7-overhead.py LAUNCH_CSV [LAUNCH_CSV...]

Reads the launch.csv rows b7-launch.sh wrote (one file per build side of
bench/compare.sh: OUT/a/launch.csv, OUT/b/launch.csv) and, for each file,
takes every hyperfine round on its own: the overhead of elastic-exec and
of elastic-mpirun in a round is the median of its runs over the median of
mpirun's runs in the same round (wall time), and its CPU time (user + sys,
hyperfine's mean over the round) over mpirun's.  A round is the rows
between two cpu_s rows of the same command (the driver writes each
command's wall_s rows, then its cpu_s row).  Prints, per file and command,
the median over the rounds, min..max, IQR and a bootstrap 95 % confidence
interval of the median (2,000 resamples, fixed seed).
"""
import csv
import random
import statistics
import sys


def quantile(v, p):
    s = sorted(v)
    k = (len(s) - 1) * p
    i = int(k)
    return s[i] if i + 1 >= len(s) else s[i] + (s[i + 1] - s[i]) * (k - i)


def spread(rs):
    rng = random.Random(19)
    meds = sorted(statistics.median(rng.choices(rs, k=len(rs))) for _ in range(2000))
    return "%+.1f %% [95 %% CI %+.1f, %+.1f] (min..max %+.1f..%+.1f, IQR %.1f pt, %d rounds)" % (
        (statistics.median(rs) - 1) * 100, (meds[50] - 1) * 100, (meds[1949] - 1) * 100,
        (min(rs) - 1) * 100, (max(rs) - 1) * 100,
        (quantile(rs, 0.75) - quantile(rs, 0.25)) * 100, len(rs))


def rounds(path):
    """[{command: (median wall, cpu)}] in the order of the file"""
    out, cur, walls = [], {}, {}
    for r in csv.DictReader(open(path)):
        if r["bench"] != "launch" or r["unit"] == "flag":
            continue
        c = r["variant"]
        if r["metric"] == "wall_s":
            walls.setdefault(c, []).append(float(r["value"]))
        elif r["metric"] == "cpu_s":
            if c in cur:  # a new round
                out.append(cur)
                cur = {}
            cur[c] = (statistics.median(walls.pop(c, [0.0])), float(r["value"]))
    if cur:
        out.append(cur)
    return out


for path in sys.argv[1:]:
    rs = [x for x in rounds(path) if "mpirun" in x]
    print("%s: mpirun median %.1f ms wall, %.1f ms CPU over %d rounds" % (
        path, statistics.median(x["mpirun"][0] for x in rs) * 1e3,
        statistics.median(x["mpirun"][1] for x in rs) * 1e3, len(rs)))
    for c in ("elastic-exec", "elastic-mpirun"):
        w = [x[c][0] / x["mpirun"][0] for x in rs if c in x and x["mpirun"][0] > 0]
        u = [x[c][1] / x["mpirun"][1] for x in rs if c in x and x["mpirun"][1] > 0]
        if w:
            print("  %-15s wall %s" % (c, spread(w)))
            print("  %-15s CPU  %s" % ("", spread(u)))
