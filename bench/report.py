#!/usr/bin/python3
"""report.py - the benchmark report: summary CSV, Markdown tables, plots.

    bench/report.py OUT

Reads every OUT/*.csv that the drivers wrote (rows
bench,ranks,mib,variant,trial,metric,value,unit), takes medians over the
trials, and writes:
  OUT/summary.csv   one row per headline: id, measure, configuration,
                    elastic median, baseline median, ratio, target, met
  OUT/results.md    the headline table (B1-B9), the detail tables, B8's
                    models (OUT/model.md) and the plots
  OUT/plots/*.png   gnuplot (pngcairo, else png): recovery against ranks and
                    against state size, the recovery phases, L1/L2/L3 cost
                    against bytes
Every ratio is oriented so that larger is better for elastic
(baseline time / elastic time), except B6 and B7, given as the overhead
in percent.  B6's baseline is heat2d --no-elastic where heat2d has it
(flag baseline_no_elastic); its variants idle and p10-sync appear where
the driver ran them (snapshot_overlap: the library overlaps the L2
exchange, p10-sync is the synchronous comparison).  Exit 1 if a
benchmark has no rows at all (the smoke test's check), 0 otherwise;
missed targets are reported, not errors.
"""
import csv
import glob
import math
import os
import random
import shutil
import statistics
import subprocess
import sys

BENCHES = [("recovery", "B1"), ("restart", "B2"), ("snapshot", "B3/B4"), ("l3", "B5"),
           ("steady", "B6"), ("launch", "B7"), ("model", "B8"), ("notice", "B9")]


class Data:
    def __init__(self, out):
        self.v = {}
        self.t = {}  # by trial
        self.flags = {}
        self.present = set()
        for path in sorted(glob.glob(os.path.join(out, "*.csv"))):
            if os.path.basename(path) == "summary.csv":
                continue
            with open(path) as f:
                for r in csv.DictReader(f):
                    b = r.get("bench")
                    if not b:
                        continue
                    self.present.add(b)
                    if r["unit"] == "flag":
                        k = (b, r["ranks"], r["mib"], r["variant"], r["metric"])
                        self.flags.setdefault(k, []).append(r["value"])
                        continue
                    try:
                        val = float(r["value"])
                    except ValueError:
                        continue
                    k = (b, r["ranks"], r["mib"], r["variant"], r["metric"])
                    self.v.setdefault(k, []).append(val)
                    self.t.setdefault(k, {})[r["trial"]] = val

    def all(self, b, ranks, mib, variant, metric):
        return self.v.get((b, str(ranks), str(mib), variant, metric), [])

    def med(self, b, ranks, mib, variant, metric):
        v = self.all(b, ranks, mib, variant, metric)
        return statistics.median(v) if v else None

    def paired(self, b, ranks, mib, variant, base, metric):
        """variant / base of the same trial, for every trial that has both"""
        a = self.t.get((b, str(ranks), str(mib), variant, metric), {})
        z = self.t.get((b, str(ranks), str(mib), base, metric), {})
        return [a[t] / z[t] for t in a if t in z and z[t] > 0]

    def keys(self, b, variant=None, metric=None):
        return sorted({(k[1], k[2]) for k in self.v
                       if k[0] == b and (variant is None or k[3] == variant)
                       and (metric is None or k[4] == metric)},
                      key=lambda x: (float(x[0] or 0), float(x[1] or 0)))

    def failures(self, b):
        return sum(len(v) for k, v in self.flags.items()
                   if k[0] == b and (k[4].startswith("failed") or k[4] == "wrong_checksum"))

    def flag(self, b, metric):
        """the value of the first flag row b/metric, or None"""
        for k, v in self.flags.items():
            if k[0] == b and k[4] == metric:
                return v[0]
        return None


def quantile(v, p):
    """the P-quantile of V (linear interpolation)"""
    s = sorted(v)
    k = (len(s) - 1) * p
    i = int(k)
    return s[i] if i + 1 >= len(s) else s[i] + (s[i + 1] - s[i]) * (k - i)


def fmt_t(s):
    if s is None:
        return "—"
    if s >= 1:
        return "%.2f s" % s
    if s >= 1e-3:
        return "%.1f ms" % (s * 1e3)
    return "%.0f µs" % (s * 1e6)


def sfmt(s):
    """a signed duration (a time lost may be negative within the noise)"""
    if s is None:
        return "—"
    return ("−" + fmt_t(-s)) if s < 0 else fmt_t(s)


def fmt_bw(mib, s):
    if s is None or s <= 0:
        return "—"
    return "%.0f MiB/s" % (mib / s)


def ratio(num, den):
    if num is None or den is None or den <= 0:
        return None
    return num / den


class Report:
    def __init__(self, out):
        self.out = out
        self.d = Data(out)
        self.summary = []
        self.md = []
        self.details = []

    def head(self, bid, measure, config, elastic, baseline, r, target, met, note=""):
        self.summary.append(dict(id=bid, measure=measure, config=config, elastic=elastic,
                                 baseline=baseline, ratio=r, target=target,
                                 met=met if isinstance(met, str) else
                                 ("yes" if met else "no") if met is not None else "n/a",
                                 note=note))

    @staticmethod
    def verdict(lo, hi, lim):
        """A target judged by a confidence interval [lo, hi] of the measure
        (smaller is better): "yes" when all of it is within lim, "no" when
        none of it is, else "not resolved" (the run cannot tell)."""
        if hi <= lim:
            return "yes"
        if lo > lim:
            return "no"
        return "not resolved"

    # --- B1 -----------------------------------------------------------------
    def b1(self):
        d = self.d
        rows, walls = [], []
        for n, m in d.keys("recovery", "inplace", "t_total_ms"):
            ph = [d.med("recovery", n, m, "inplace", k) for k in
                  ("t_detect_ms", "t_revoke_agree_ms", "t_shrink_ms", "t_restore_ms",
                   "t_handler_ms", "t_protect_ms", "t_total_ms")]
            vs = ("inplace", "spare", "relaunch", "restart")
            lost = {v: d.med("recovery", n, m, v, "lost_s") for v in vs}
            wall = {v: d.med("recovery", n, m, v, "lost_wall_s") for v in vs}
            r1, r2 = ratio(lost["relaunch"], lost["inplace"]), ratio(lost["restart"], lost["inplace"])
            r3 = ratio(lost["relaunch"], lost["spare"])
            rows.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                n, m, " / ".join("—" if x is None else ("%.0f" % x if x >= 10 else "%.1f" % x)
                                 for x in ph),
                sfmt(lost["inplace"]), sfmt(lost["spare"]), sfmt(lost["relaunch"]),
                sfmt(lost["restart"]), "%.1f×" % r1 if r1 else "—",
                "%.1f×" % r3 if r3 else "—", "%.1f×" % r2 if r2 else "—"))
            walls.append("| %s | %s | %s | %s | %s | %s | %d |" % (
                n, m, sfmt(wall["inplace"]), sfmt(wall["spare"]), sfmt(wall["relaunch"]),
                sfmt(wall["restart"]), len(d.all("recovery", n, m, "inplace", "lost_s"))))
        self.details.append("### B1: time lost per failure (heat2d, one rank SIGKILLed at "
                            "step 45, snapshots every 10 steps)\n")
        self.details.append("Time lost = how much later the job first reaches step 50 than "
                            "without the failure (medians).\n")
        self.details.append("| ranks | MiB/rank | in-place phases, ms: detect / revoke+agree / "
                            "shrink / restore / handler / protect / total | in place (shrink), "
                            "lost | in place (spare), lost | relaunch from L3, lost | restart "
                            "from step 0, lost | relaunch ÷ in place | relaunch ÷ spare | "
                            "restart ÷ in place |")
        self.details.append("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        self.details.extend(rows)
        self.details.append("\nThe same, as the difference of the whole jobs' wall times "
                            "(launcher start to exit; noisier):\n")
        self.details.append("| ranks | MiB/rank | in place (shrink) | in place (spare) | "
                            "relaunch from L3 | restart | trials |")
        self.details.append("|---:|---:|---:|---:|---:|---:|---:|")
        self.details.extend(walls)
        sp = [(n, m) for n, m in d.keys("recovery", "spare", "t_total_ms")]
        if sp:
            self.details.append("\nIn place with a spare (n working ranks + 1 idle spare that "
                                "takes the dead rank's place), phases in ms:\n")
            self.details.append("| ranks | MiB/rank | detect | revoke+agree | shrink | restore | "
                                "handler | protect | total |")
            self.details.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for n, m in sp:
                self.details.append("| %s | %s | %s |" % (n, m, " | ".join(
                    "%.1f" % (d.med("recovery", n, m, "spare", k) or 0) for k in
                    ("t_detect_ms", "t_revoke_agree_ms", "t_shrink_ms", "t_restore_ms",
                     "t_handler_ms", "t_protect_ms", "t_total_ms"))))
        resume = [(n, m, d.med("recovery", n, m, "relaunch", "t_resume_restore_ms"),
                   d.med("recovery", n, m, "relaunch", "t_persist_write_ms"))
                  for n, m in d.keys("recovery", "relaunch", "lost_s")]
        if any(r[2] is not None for r in resume):
            self.details.append("\nRelaunch from L3: the resume event's restore time and the "
                                "median L3 write of the run:\n")
            self.details.append("| ranks | MiB/rank | L3 restore at resume | L3 write (persist) |")
            self.details.append("|---:|---:|---:|---:|")
            for n, m, rr, w in resume:
                self.details.append("| %s | %s | %s | %s |" % (
                    n, m, fmt_t(rr / 1e3 if rr is not None else None),
                    fmt_t(w / 1e3 if w is not None else None)))
        launcher = "elastic-exec (hosted PMIx, group restart)" \
            if d.flag("recovery", "restart_launcher_elastic-exec") else "elastic-mpirun"
        self.details.append("\nRestart from step 0 ran under %s.  Failed or wrong runs "
                            "(retried once): %d.\n" % (launcher, d.failures("recovery")))
        # headline: 8 x 64 if measured, else the largest configuration with a baseline
        cand = d.keys("recovery", "relaunch", "lost_s") or d.keys("recovery", "inplace", "lost_s")
        pick = ("8", "64") if ("8", "64") in cand else (cand[-1] if cand else None)
        if not pick:
            self.head("B1", "time lost per failure", "—", "—", "—", None, "≥ 10×", False,
                      "no rows")
            return
        n, m = pick
        e = d.med("recovery", n, m, "inplace", "lost_s")
        rel = d.med("recovery", n, m, "relaunch", "lost_s")
        rst = d.med("recovery", n, m, "restart", "lost_s")
        r = ratio(rel, e)
        self.head("B1", "time lost per failure: in place vs relaunch from L3",
                  "%s ranks × %s MiB" % (n, m), sfmt(e),
                  sfmt(rel) if rel is not None else "not run (no L3 in this build)",
                  r, "≥ 10×", r is not None and r >= 10 and pick == ("8", "64"))
        sp = d.med("recovery", n, m, "spare", "lost_s")
        if sp is not None:
            r3 = ratio(rel, sp)
            self.head("B1", "time lost per failure: in place with a spare vs relaunch from L3",
                      "%s ranks (+1 spare) × %s MiB" % (n, m), sfmt(sp), sfmt(rel), r3, "≥ 10×",
                      r3 is not None and r3 >= 10 and pick == ("8", "64"))
        self.head("B1", "time lost per failure: in place vs restart without snapshots",
                  "%s ranks × %s MiB" % (n, m), sfmt(e), sfmt(rst), ratio(rst, e), "—", None)

    # --- B2 -----------------------------------------------------------------
    def b2(self):
        d = self.d
        ks = d.keys("restart", "elastic-exec", "respawn_ms")
        if not ks:
            self.head("B2", "PyTorch restart: respawn", "—", "—", "—", None, "≥ 5×", False,
                      "no rows")
            return
        n = ks[0][0]
        self.details.append("### B2: restart of %s PyTorch (gloo) workers after one crash\n" % n)
        self.details.append("| agent | crash → all respawned | crash → all ready | exit seen → "
                            "new worker started | runs |")
        self.details.append("|---|---:|---:|---:|---:|")
        for v in ("elastic-exec", "torchrun-default", "torchrun-0.1s"):
            rs = d.med("restart", n, "", v, "respawn_ms")
            if rs is None:
                continue
            rd = d.med("restart", n, "", v, "ready_ms")
            dt = d.med("restart", n, "", v, "detect_ms")
            self.details.append("| %s | %s | %s | %s | %d |" % (
                v, fmt_t(rs / 1e3), fmt_t(rd / 1e3), fmt_t(dt / 1e3 if dt else None),
                len(d.all("restart", n, "", v, "respawn_ms"))))
        self.details.append("")
        e_rs = d.med("restart", n, "", "elastic-exec", "respawn_ms")
        e_rd = d.med("restart", n, "", "elastic-exec", "ready_ms")
        for base, label in (("torchrun-default", "torchrun (defaults)"),
                            ("torchrun-0.1s", "torchrun --monitor_interval 0.1")):
            b_rs = d.med("restart", n, "", base, "respawn_ms")
            if b_rs is None:
                continue
            b_rd = d.med("restart", n, "", base, "ready_ms")
            r = ratio(b_rs, e_rs)
            self.head("B2", "restart: crash → all respawned, vs %s" % label,
                      "%s workers" % n, fmt_t(e_rs / 1e3), fmt_t(b_rs / 1e3), r, "≥ 5×",
                      r is not None and r >= 5)
            r2 = ratio(b_rd, e_rd)
            pairs = d.paired("restart", n, "", "elastic-exec", base, "ready_ms")
            slower = sum(1 for x in pairs if x > 1)
            self.head("B2", "restart: crash → all ready, vs %s" % label, "%s workers" % n,
                      fmt_t(e_rd / 1e3), fmt_t(b_rd / 1e3), r2, "never slower",
                      r2 is not None and r2 >= 1 and slower == 0,
                      "elastic-exec slower in %d of %d back-to-back pairs" % (slower, len(pairs)))

    # --- B3/B4 --------------------------------------------------------------
    def b34(self):
        d = self.d
        if not d.keys("snapshot", "elastic", "l1_s"):
            self.head("B3", "L1 snapshot copy bandwidth vs memcpy", "—", "—", "—", None,
                      "≥ 70 %", False, "no rows")
            self.head("B4", "L2 buddy exchange bandwidth vs MPI_Sendrecv", "—", "—", "—",
                      None, "≥ 60 %", False, "no rows")
            return
        self.details.append("### B3/B4: L1 copy and L2 exchange of elastic_maybe_snapshot\n")
        self.details.append("| ranks | MiB/rank | L1 copy | memcpy | L1/memcpy | L2 exchange | "
                            "MPI_Sendrecv | L2/Sendrecv | commit | whole call |")
        self.details.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n, m in d.keys("snapshot", "elastic", "l1_s"):
            mib = float(m)
            l1 = d.med("snapshot", n, m, "elastic", "l1_s")
            mc = d.med("snapshot", n, m, "baseline", "memcpy_s")
            l2 = d.med("snapshot", n, m, "elastic", "l2_s")
            sr = d.med("snapshot", n, m, "baseline", "sendrecv_s")
            cm = d.med("snapshot", n, m, "elastic", "commit_s")
            call = d.med("snapshot", n, m, "elastic", "call_s")
            r1, r2 = ratio(mc, l1), ratio(sr, l2)
            self.details.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                n, m, fmt_bw(mib, l1), fmt_bw(mib, mc), "%.0f %%" % (100 * r1) if r1 else "—",
                fmt_bw(mib, l2), fmt_bw(mib, sr), "%.0f %%" % (100 * r2) if r2 else "—",
                fmt_t(cm), fmt_t(call)))
        self.details.append("")
        ks = d.keys("snapshot", "elastic", "l1_s")
        one = [k for k in ks if k[0] == "1"]
        pick = ("1", "64") if ("1", "64") in one else (one[-1] if one else (ks[-1] if ks else None))
        if pick:
            n, m = pick
            l1 = d.med("snapshot", n, m, "elastic", "l1_s")
            mc = d.med("snapshot", n, m, "baseline", "memcpy_s")
            r = ratio(mc, l1)
            self.head("B3", "L1 snapshot copy bandwidth vs memcpy",
                      "%s rank × %s MiB" % (n, m), fmt_bw(float(m), l1), fmt_bw(float(m), mc),
                      r, "≥ 70 %", r is not None and r >= 0.7)
        else:
            self.head("B3", "L1 snapshot copy bandwidth vs memcpy", "—", "—", "—", None,
                      "≥ 70 %", False, "no rows")
        ks2 = d.keys("snapshot", "elastic", "l2_s")
        pick = ("8", "64") if ("8", "64") in ks2 else (ks2[-1] if ks2 else None)
        if pick:
            n, m = pick
            l2 = d.med("snapshot", n, m, "elastic", "l2_s")
            sr = d.med("snapshot", n, m, "baseline", "sendrecv_s")
            r = ratio(sr, l2)
            bad = l2 is not None and l2 <= 0
            self.head("B4", "L2 buddy exchange bandwidth vs MPI_Sendrecv",
                      "%s ranks × %s MiB" % (n, m), fmt_bw(float(m), l2),
                      fmt_bw(float(m), sr), None if bad else r, "≥ 60 %",
                      r is not None and r >= 0.6 and not bad,
                      "L2 exchange not timed: it overlapped the next call (the driver "
                      "must run with ELASTIC_SNAPSHOT_OVERLAP=0)" if bad else "")
        else:
            self.head("B4", "L2 buddy exchange bandwidth vs MPI_Sendrecv", "—", "—", "—",
                      None, "≥ 60 %", False, "no rows")

    # --- B5 -----------------------------------------------------------------
    def b5(self):
        d = self.d
        if not [k for k in d.keys("l3", "elastic", "write_s") if k[0] != "0"]:
            self.head("B5", "L3 write / read bandwidth vs dd", "—", "—", "—", None, "≥ 60 %",
                      False, "no rows (no parallel HDF5?)")
            return
        self.details.append("### B5: L3 (parallel HDF5) against dd, same bytes, same file "
                            "system, page cache dropped\n")
        self.details.append("| ranks | MiB/rank | L3 write | dd write | ratio | L3 read "
                            "(of which the open) | dd read | ratio |")
        self.details.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
        ks = [k for k in d.keys("l3", "elastic", "write_s") if k[0] != "0"]
        for n, m in ks:
            tot = float(n) * float(m)
            w = d.med("l3", n, m, "elastic", "write_s")
            dw = d.med("l3", n, m, "baseline", "write_s")
            r = d.med("l3", n, m, "elastic", "read_s")
            ov = d.med("l3", n, m, "elastic", "open_verify_s")
            dr = d.med("l3", n, m, "baseline", "read_s")
            rw, rr = ratio(dw, w), ratio(dr, r)
            self.details.append("| %s | %s | %s | %s | %s | %s (%s) | %s | %s |" % (
                n, m, fmt_bw(tot, w), fmt_bw(tot, dw), "%.0f %%" % (100 * rw) if rw else "—",
                fmt_bw(tot, r), fmt_t(ov), fmt_bw(tot, dr),
                "%.0f %%" % (100 * rr) if rr else "—"))
        dropped = d.flag("l3", "page_cache_dropped")
        self.details.append("\nThe read is a resume's restore: open (the file's structure), "
                            "each rank's share read with every block's crc32 checked as it "
                            "arrives, then what was not read verified.  Page cache dropped "
                            "before every write and read: %s.\n" % (
                                "yes" if dropped == "1" else "NO (reads came from memory)"))
        pick = ("8", "64") if ("8", "64") in ks else (ks[-1] if ks else None)
        if not pick:
            self.head("B5", "L3 write / read bandwidth vs dd", "—", "—", "—", None, "≥ 60 %",
                      False, "no rows (no parallel HDF5?)")
            return
        n, m = pick
        tot = float(n) * float(m)
        for what in ("write", "read"):
            e = d.med("l3", n, m, "elastic", what + "_s")
            b = d.med("l3", n, m, "baseline", what + "_s")
            r = ratio(b, e)
            self.head("B5", "L3 %s bandwidth vs dd" % what, "%s ranks × %s MiB" % (n, m),
                      fmt_bw(tot, e), fmt_bw(tot, b), r, "≥ 60 %", r is not None and r >= 0.6)

    # --- B6 -----------------------------------------------------------------
    B6_VARIANTS = (
        ("none", "the baseline"),
        ("idle", "library calls, no periodic snapshot (step 0's only), no signal handling"),
        ("signals", "library calls, no periodic snapshot, preemption-signal agreement on"),
        ("p10", "snapshot every 10 steps (L1+L2)"),
        ("p10-sync", "snapshot every 10 steps, L2 exchange synchronous "
         "(ELASTIC_SNAPSHOT_OVERLAP=0)"),
        ("p100", "snapshot every 100 steps (L1+L2)"),
        ("p10+l3", "snapshot every 10 steps, L3 file every 100"),
    )

    @staticmethod
    def spread(rs):
        """median, min, max, IQR and a bootstrap 95 % CI of the median of the
        ratios RS (2000 resamples, fixed seed: the report is reproducible)"""
        rs = sorted(rs)
        med = statistics.median(rs)
        rng = random.Random(19)
        meds = sorted(statistics.median(rng.choices(rs, k=len(rs))) for _ in range(2000))
        return dict(med=med, lo=rs[0], hi=rs[-1], iqr=quantile(rs, 0.75) - quantile(rs, 0.25),
                    ci=(meds[50], meds[1949]), n=len(rs))

    def b6_pairs(self, n, m, v, metric):
        """the per-trial ratios of variant V's METRIC to the mean of the
        baseline runs around it (the driver's base_METRIC rows)"""
        a = self.d.t.get(("steady", str(n), str(m), v, metric), {})
        z = self.d.t.get(("steady", str(n), str(m), v, "base_" + metric), {})
        return [a[t] / z[t] for t in a if t in z and z[t] > 0]

    def b6_direct_parts(self, n, m, v, inside="lib_s"):
        """{trial: (inside, other)} for variant V, each as a share of the
        baseline runs' time: the time spent inside libelastic's calls per
        rank (bench/mpitime.c's LIB_S, summed over the ranks) or, with
        inside="crit_s", on the calls' critical path (b6-steady.sh's
        crit_s, the job's), and the CPU time of the ranks' other threads
        beyond the baselines' around it per rank (OTHER_CPU_S); {} where
        the driver did not record them"""
        t = self.d.t
        k = ("steady", str(n), str(m), v)
        ins = t.get(k + (inside,), {})
        oth = t.get(k + ("other_cpu_s",), {})
        both = t.get(k + ("base_other_cpu_s",), {})
        base = t.get(k + ("base_run_s",), {})
        per = int(n) if inside == "lib_s" else 1
        return {tr: (ins[tr] / per / base[tr], (oth[tr] - both[tr]) / int(n) / base[tr])
                for tr in ins if tr in oth and tr in both and tr in base and base[tr] > 0}

    def b6_direct(self, n, m, v):
        """{trial: the library's direct cost in variant V}: inside its calls
        plus its threads' extra CPU (b6_direct_parts)"""
        return {tr: a + b for tr, (a, b) in self.b6_direct_parts(n, m, v).items()}

    def b6_crit(self, n, m, v):
        """{trial: the library's critical-path cost in variant V}: the sum
        over its maybe_snapshot calls of the time from the last rank's entry
        to the last rank's exit, plus its threads' extra CPU per rank, over
        the baseline runs' time (b6_direct_parts with crit_s)"""
        return {tr: a + b for tr, (a, b) in self.b6_direct_parts(n, m, v, "crit_s").items()}

    def b6_direct_rows(self, n, m):
        """the direct measure's table and its headlines (issue #19: idle
        <= 1 %, L3 in the background <= 3 % over p10)"""
        def pc(x):
            return "%+.2f %%" % (x * 100)
        dv = {v: self.b6_direct(n, m, v) for v, _ in self.B6_VARIANTS if v != "none"}
        if not any(dv.values()):
            return
        self.details.append(
            "**The library's cost measured directly** (per pair: the time the ranks spent "
            "inside libelastic's calls, plus the CPU time its and MPI's other threads took "
            "beyond the baseline's, per rank, over the baseline runs' time; it leaves out "
            "what the library costs outside its calls on the main threads: an overlapped L2 "
            "exchange progressing inside heat2d's own MPI calls, evicted caches).  Unlike the "
            "wall-time ratio it is not the difference of two run times, so the machine's "
            "run-to-run variation does not enter it.\n")
        self.details.append("| variant | inside the library | other threads' extra CPU | "
                            "direct cost: median [95 % CI] (min..max) | pairs |")
        self.details.append("|---|---:|---:|---:|---:|")
        for v, _ in self.B6_VARIANTS:
            if not dv.get(v):
                continue
            parts = self.b6_direct_parts(n, m, v).values()
            li = statistics.median(a for a, _ in parts)
            ot = statistics.median(b for _, b in parts)
            sp = self.spread(list(dv[v].values()))
            self.details.append("| %s | %s | %s | %s [%s, %s] (%s..%s) | %d |" % (
                v, pc(li), pc(ot), pc(sp["med"]), pc(sp["ci"][0]), pc(sp["ci"][1]),
                pc(sp["lo"]), pc(sp["hi"]), sp["n"]))
        self.details.append("")
        if dv.get("idle"):
            sp = self.spread(list(dv["idle"].values()))
            self.head("B6", "the library's direct cost without snapshots (inside its calls "
                      "+ its threads' CPU)", "%s ranks × %s MiB" % (n, m), pc(sp["med"]), "—",
                      None, "≤ 1 %", self.verdict(sp["ci"][0] * 100, sp["ci"][1] * 100, 1.0),
                      "direct %s [95 %% CI %s, %s] over %d pairs" % (
                          pc(sp["med"]), pc(sp["ci"][0]), pc(sp["ci"][1]), sp["n"]))
        a, b = dv.get("p10+l3"), dv.get("p10")
        if a and b:
            ds = [a[x] - b[x] for x in a if x in b]
            if ds:
                sp = self.spread(ds)
                self.head("B6", "L3 every 100 in the background over period 10 alone, direct "
                          "(same trial)", "%s ranks × %s MiB" % (n, m), pc(sp["med"]), "—",
                          None, "≤ 3 %",
                          self.verdict(sp["ci"][0] * 100, sp["ci"][1] * 100, 3.0),
                          "direct %s [95 %% CI %s, %s] over %d trials" % (
                              pc(sp["med"]), pc(sp["ci"][0]), pc(sp["ci"][1]), sp["n"]))
        a, b = self.b6_crit(n, m, "p10+l3"), self.b6_crit(n, m, "p10")
        ds = [a[x] - b[x] for x in a if x in b]
        if ds:
            sp = self.spread(ds)
            self.details.append(
                "**L3 in the background over period 10 alone, on the critical path** (per "
                "trial: the sum over the maybe_snapshot calls of the time from the last rank's "
                "entry to the last rank's exit, plus the other threads' extra CPU per rank, "
                "over the baseline's time; p10+l3 less p10): %s [95 %% CI %s, %s] (%s..%s), "
                "%d trials.\n" % (pc(sp["med"]), pc(sp["ci"][0]), pc(sp["ci"][1]),
                                  pc(sp["lo"]), pc(sp["hi"]), sp["n"]))
            self.head("B6", "L3 every 100 in the background over period 10 alone, critical "
                      "path (same trial)", "%s ranks × %s MiB" % (n, m), pc(sp["med"]), "—",
                      None, "≤ 3 %", self.verdict(sp["ci"][0] * 100, sp["ci"][1] * 100, 3.0),
                      "%s [95 %% CI %s, %s] over %d trials" % (
                          pc(sp["med"]), pc(sp["ci"][0]), pc(sp["ci"][1]), sp["n"]))

    def b6(self):
        d = self.d
        ks = d.keys("steady", "none", "run_s")
        if not ks:
            self.head("B6", "steady-state slowdown", "—", "—", "—", None, "≤ 3 %", False,
                      "no rows")
            return
        n, m = ks[0]
        base = d.med("steady", n, m, "none", "run_s")
        no_elastic = d.flag("steady", "baseline_no_elastic") == "1"
        oflag = d.flag("steady", "snapshot_overlap")
        overlap = oflag == "1"
        label = "heat2d --no-elastic (no library calls)" if no_elastic else \
            "heat2d, no periodic snapshot (step 0 only)"
        self.details.append("### B6: steady-state slowdown of heat2d (%s ranks, %s MiB per "
                            "rank), baseline: %s\n" % (n, m, label))
        if oflag is not None:
            self.details.append("Periodic snapshots %s.\n" % (
                "overlap their L2 exchange with the next step (p10, p100, p10+l3); p10-sync "
                "is period 10 with ELASTIC_SNAPSHOT_OVERLAP=0" if overlap else
                "are synchronous (this library does not overlap the L2 exchange)"))
        self.details.append(
            "Slowdown = the variant's time over the mean of the two baseline runs around it "
            "(same trial), median over the trials; spread: min..max and IQR of those ratios, "
            "and a bootstrap 95 % confidence interval of the median.  CPU = user + sys of all "
            "ranks (getrusage) over the same interval.  Work = MPI calls started by all ranks "
            "(program and library), variant − baseline; *work check*: runs in which the "
            "variant started more MPI calls than both baseline runs around it.\n")
        self.details.append("| variant | what runs | wall: median | wall slowdown: median "
                            "[95 % CI] (min..max, IQR) | CPU slowdown: median [95 % CI] "
                            "(min..max, IQR) | more MPI calls (bytes) than the baseline | "
                            "work check | pairs |")
        self.details.append("|---|---|---:|---:|---:|---:|---|---:|")

        def pct(x):
            return "%+.1f %%" % ((x - 1) * 100)

        def cell(sp):
            if sp is None:
                return "—"
            return "%s [%s, %s] (%s..%s, %.1f pt)" % (
                pct(sp["med"]), pct(sp["ci"][0]), pct(sp["ci"][1]), pct(sp["lo"]),
                pct(sp["hi"]), sp["iqr"] * 100)

        bcalls = d.med("steady", n, m, "none", "mpi_calls")
        bbytes = d.med("steady", n, m, "none", "mpi_bytes")
        stats = {}
        for v, what in self.B6_VARIANTS:
            t = d.med("steady", n, m, v, "run_s")
            if t is None:
                continue
            if v == "none":
                self.details.append("| none | %s | %s | — | — | %s calls (%s MiB) | — | %d runs |" % (
                    label, fmt_t(t), "%.0f" % bcalls if bcalls is not None else "—",
                    "%.1f" % (bbytes / 2**20) if bbytes is not None else "—",
                    len(d.all("steady", n, m, v, "run_s"))))
                continue
            pw = self.b6_pairs(n, m, v, "run_s")
            pc = self.b6_pairs(n, m, v, "cpu_s")
            sw = self.spread(pw) if pw else None
            sc = self.spread(pc) if pc else None
            stats[v] = (sw, sc)
            calls = d.med("steady", n, m, v, "mpi_calls")
            byts = d.med("steady", n, m, v, "mpi_bytes")
            more = len(d.flags.get(("steady", str(n), str(m), v, "work_more"), []))
            notmore = len(d.flags.get(("steady", str(n), str(m), v, "work_not_more"), []))
            work = "—" if calls is None or bcalls is None else "+%.0f (+%.1f MiB)" % (
                calls - bcalls, (byts - bbytes) / 2**20)
            check = "%d/%d%s" % (more, more + notmore, "" if notmore == 0 else " **failed**")
            contra = sc is not None and sc["ci"][1] < 1.0
            if contra:
                check += "; CPU below the baseline's beyond the CI: **contradicts the work**"
            self.details.append("| %s | %s | %s | %s | %s | %s | %s | %d |" % (
                v, what, fmt_t(t), cell(sw), cell(sc), work, check, len(pw)))
        self.details.append("")
        p10 = "snapshot_period 10 (L1+L2%s)" % (", L2 overlapped" if overlap else "")
        for v, label2, target in (("idle", "library calls without snapshots", "≤ 1 %"),
                                  ("signals", "preemption-signal agreement alone", "—"),
                                  ("p10", p10, "≤ 3 %"),
                                  ("p10-sync", "snapshot_period 10 (L1+L2, synchronous)",
                                   "—"),
                                  ("p100", "snapshot_period 100 (L1+L2)", "—"),
                                  ("p10+l3", "period 10 + L3 every 100", "—")):
            t = d.med("steady", n, m, v, "run_s")
            if t is None or v not in stats or stats[v][0] is None:
                continue
            sw, sc = stats[v]
            s = (sw["med"] - 1) * 100
            lim = {"≤ 1 %": 1.0, "≤ 3 %": 3.0}.get(target)
            self.head("B6", "steady-state slowdown, %s" % label2, "%s ranks × %s MiB" % (n, m),
                      fmt_t(t), fmt_t(base), None, target,
                      self.verdict((sw["ci"][0] - 1) * 100, (sw["ci"][1] - 1) * 100, lim)
                      if lim is not None else None,
                      "wall %s [95 %% CI %s, %s], CPU %s (median of %d interleaved pairs)" % (
                          pct(sw["med"]), pct(sw["ci"][0]), pct(sw["ci"][1]),
                          pct(sc["med"]) if sc else "—", sw["n"]))
        self.b6_direct_rows(n, m)
        self.b6_floor(n, m)

    def b6_floor(self, n, m):
        """Issue #19's per-snapshot cost at period 10 against its floor: the
        snapshot's bytes copied to L1 at memcpy's rate plus the bytes sent
        to the buddy at the exchange's rate.  Where b6-steady.sh measured
        the floor in every trial (variant floor: bench_snapshot_bw at B6's
        ranks and bytes), each trial's cost is set against that trial's
        strict floor, the faster of memcpy and the library's L1 copy plus
        the faster of MPI_Sendrecv and the library's exchange.  Otherwise
        the floor comes from B3/B4 of the same run (the faster of the
        library's exchange and MPI_Sendrecv at the largest size measured
        at B6's number of ranks), scaled to B6's bytes."""
        d = self.d
        steps = d.flag("steady", "steps")
        if steps is None:
            return
        nsnap = int(steps) // 10
        k = ("steady", str(n), str(m), "floor")
        fl = {x: d.t.get(k + (x + "_s",), {}) for x in ("memcpy", "l1", "sendrecv", "l2", "call")}
        trials = [t for t in fl["memcpy"] if all(t in fl[x] for x in ("l1", "sendrecv", "l2"))]
        if trials:
            floors = {t: min(fl["memcpy"][t], fl["l1"][t]) + min(fl["sendrecv"][t], fl["l2"][t])
                      for t in trials}
            floor = statistics.median(floors.values())

            def med(x):
                return sfmt(statistics.median(fl[x][t] for t in trials))
            self.details.append(
                "**Per-snapshot cost at period 10 against its floor** (issue #19: ≤ 1.25×). "
                "The floor is measured in every trial, at %s ranks × %s MiB (bench_snapshot_bw "
                "after the trial's first baseline run; medians over the trials): memcpy %s, the "
                "library's L1 copy %s, MPI_Sendrecv %s, the library's exchange %s; the strict "
                "floor, the faster of each pair, **%s** (the library's whole call there: %s).  "
                "Each trial's cost is set against its own floor.\n" % (
                    n, m, med("memcpy"), med("l1"), med("sendrecv"), med("l2"), sfmt(floor),
                    med("call") if fl["call"] else "—"))
        else:
            ks = [k for k in d.keys("snapshot", "baseline", "memcpy_s") if k[0] == str(n)]
            if not ks:
                return
            r, mib = ks[-1]  # the largest size measured at B6's number of ranks
            mc = d.med("snapshot", r, mib, "baseline", "memcpy_s")
            sr = d.med("snapshot", r, mib, "baseline", "sendrecv_s")
            l2 = d.med("snapshot", r, mib, "elastic", "l2_s")
            if mc is None or (sr is None and l2 is None):
                return
            scale = float(m) / float(mib)
            fast = min(x for x in (sr, l2) if x is not None)
            floor = (mc + fast) * scale
            floor_sr = (mc + sr) * scale if sr is not None else None
            floors = None
            self.details.append(
                "**Per-snapshot cost at period 10 against its floor** (issue #19: ≤ 1.25×). "
                "Floor for %s MiB per rank at %s ranks, from B3/B4 of this run (%s MiB per "
                "rank): L1 copy at memcpy's rate %s + L2 at the faster of the library's "
                "exchange (%s) and MPI_Sendrecv (%s) = **%s** (with MPI_Sendrecv's rate: "
                "%s).\n" % (
                    m, n, mib, sfmt(mc * scale), sfmt(l2 * scale) if l2 else "—",
                    sfmt(sr * scale) if sr else "—", sfmt(floor),
                    sfmt(floor_sr) if floor_sr else "—"))

        def fl_of(t):
            return floors[t] if floors else floor
        self.details.append("| variant | cost per snapshot: median [95 % CI] (min..max) | "
                            "/ floor | target | trials |")
        self.details.append("|---|---:|---:|---|---:|")

        def line(label, costs, headline=None):
            """costs: [(trial, seconds)]; the ratio is per trial"""
            cs = [(c, c / fl_of(t)) for t, c in costs if not floors or t in floors]
            if not cs:
                return
            sc = self.spread([c for c, _ in cs])
            sr_ = self.spread([r for _, r in cs])
            self.details.append("| %s | %s [%s, %s] (%s..%s) | %.2f× [%.2f, %.2f] | ≤ 1.25× | %d |" % (
                label, sfmt(sc["med"]), sfmt(sc["ci"][0]), sfmt(sc["ci"][1]), sfmt(sc["lo"]),
                sfmt(sc["hi"]), sr_["med"], sr_["ci"][0], sr_["ci"][1], sr_["n"]))
            if headline:
                self.head("B6", headline, "%s ranks x %s MiB" % (n, m), sfmt(sc["med"]),
                          sfmt(floor), sr_["med"], "≤ 1.25×",
                          self.verdict(sr_["ci"][0], sr_["ci"][1], 1.25),
                          "%.2f×, 95 %% CI %.2f..%.2f× over %d trials" % (
                              sr_["med"], sr_["ci"][0], sr_["ci"][1], sr_["n"]))
        # from the wall time: (variant - idle) / snapshots, each run over the
        # mean of the baseline runs around it, times their mean
        idle = d.t.get(("steady", str(n), str(m), "idle", "run_s"), {})
        ibase = d.t.get(("steady", str(n), str(m), "idle", "base_run_s"), {})
        for v in ("p10", "p10-sync"):
            a = d.t.get(("steady", str(n), str(m), v, "run_s"), {})
            z = d.t.get(("steady", str(n), str(m), v, "base_run_s"), {})
            line("%s, wall time" % v,
                 [(t, (a[t] / z[t] - idle[t] / ibase[t]) * (z[t] + ibase[t]) / 2 / nsnap)
                  for t in a if t in z and t in idle and t in ibase and z[t] > 0 and ibase[t] > 0],
                 "cost of one snapshot at period 10 / its floor, wall time" if v == "p10" else None)
        # direct: (direct(v) - direct(idle)) x the baseline's time / snapshots;
        # complete for p10-sync (the call holds the L1 copy and the whole
        # exchange), a lower bound for p10
        di = self.b6_direct(n, m, "idle")
        for v in ("p10", "p10-sync"):
            dv = self.b6_direct(n, m, v)
            z = d.t.get(("steady", str(n), str(m), v, "base_run_s"), {})
            line("%s, direct%s" % (v, " (complete: synchronous)" if v == "p10-sync" else
                                   " (lower bound: the overlapped exchange is outside the calls)"),
                 [(t, (dv[t] - di[t]) * z[t] / nsnap) for t in dv if t in di and t in z],
                 "cost of one synchronous snapshot at period 10 / its floor, direct"
                 if v == "p10-sync" else None)
        # on the critical path: per run, the median over its snapshot steps
        # of the time from the last rank's entry to the last rank's exit,
        # less the same over its other steps (a call that takes no snapshot)
        for v in ("p10", "p10-sync"):
            k = ("steady", str(n), str(m), v)
            cs_, co = d.t.get(k + ("crit_snap_s",), {}), d.t.get(k + ("crit_step_s",), {})
            line("%s, critical path%s" % (v, " (complete: synchronous)" if v == "p10-sync" else
                                          " (lower bound: the overlapped exchange is outside "
                                          "the calls)"),
                 [(t, cs_[t] - co[t]) for t in cs_ if t in co],
                 "cost of one synchronous snapshot at period 10 / its floor, critical path"
                 if v == "p10-sync" else None)
        self.details.append("")

    # --- B7 -----------------------------------------------------------------
    def b7(self):
        d = self.d
        ks = d.keys("launch", "mpirun", "wall_s")
        if not ks:
            self.head("B7", "launch overhead", "—", "—", "—", None, "≤ 5 %", False, "no rows")
            return
        n, m = ks[0]
        base = d.med("launch", n, m, "mpirun", "wall_s")
        self.details.append("### B7: launch of an 8-rank MPI_Init/Barrier/Finalize program "
                            "(hyperfine)\n")
        self.details.append("| command | median | overhead | CPU (user + sys, mean per run) "
                            "| CPU overhead: median of rounds [95 % CI] (min..max) | runs |")
        self.details.append("|---|---:|---:|---:|---:|---:|")
        for v in ("mpirun", "elastic-exec", "elastic-mpirun"):
            t = d.med("launch", n, m, v, "wall_s")
            if t is None:
                continue
            cpu = d.med("launch", n, m, v, "cpu_s")
            pc = d.paired("launch", n, m, v, "mpirun", "cpu_s")
            sc = self.spread(pc) if pc and v != "mpirun" else None
            self.details.append("| %s | %s | %s | %s | %s | %d |" % (
                v, fmt_t(t), "—" if v == "mpirun" else "%+.1f %%" % ((t / base - 1) * 100),
                fmt_t(cpu), "—" if sc is None else "%+.1f %% [%+.1f, %+.1f] (%+.1f..%+.1f)" % (
                    (sc["med"] - 1) * 100, (sc["ci"][0] - 1) * 100, (sc["ci"][1] - 1) * 100,
                    (sc["lo"] - 1) * 100, (sc["hi"] - 1) * 100),
                len(d.all("launch", n, m, v, "wall_s"))))
            if v != "mpirun":
                o = (t / base - 1) * 100
                self.head("B7", "launch overhead: %s" % (
                    "mpirun … elastic-exec ./app" if v == "elastic-exec" else
                    "elastic-mpirun ./app"), "%s ranks" % n, fmt_t(t), fmt_t(base), None,
                    "≤ 5 %", o <= 5.0, "overhead %+.1f %%, %s%s per launch%s" % (
                        o, "+" if t >= base else "", sfmt(t - base), "" if sc is None else
                        "; CPU %+.1f %% (median of %d rounds)" % ((sc["med"] - 1) * 100,
                                                                  sc["n"])))
        self.details.append("")

    # --- B9 -----------------------------------------------------------------
    def b9(self):
        d = self.d
        ks = d.keys("notice", "mpirun", "first_ms")
        hosted = "elastic-exec" if d.keys("notice", "elastic-exec", "first_ms") else "pmix-launch"
        if not ks:
            self.head("B9", "failure notice latency", "—", "—", "—", None, "≥ 3×", False,
                      "no rows")
            return
        n, m = ks[0]
        self.details.append("### B9: failure notice and MPI_Init, %s ranks, shared memory\n" % n)
        self.details.append("| launcher | kill → first survivor error | kill → last | "
                            "MPI_Init (slowest) | shrink | whole job | runs |")
        self.details.append("|---|---:|---:|---:|---:|---:|---:|")
        for v in ("elastic-exec", "pmix-launch", "mpirun"):
            f = d.med("notice", n, m, v, "first_ms")
            if f is None:
                continue
            self.details.append("| %s | %s | %s | %s | %s | %s | %d |" % (
                v, fmt_t(f / 1e3), fmt_t(d.med("notice", n, m, v, "last_ms") / 1e3),
                fmt_t(d.med("notice", n, m, v, "init_ms") / 1e3),
                fmt_t(d.med("notice", n, m, v, "shrink_ms") / 1e3),
                fmt_t((d.med("notice", n, m, v, "job_ms") or 0) / 1e3),
                len(d.all("notice", n, m, v, "first_ms"))))
        self.details.append("")
        for metric, label, target in (("first_ms", "failure notice latency (first survivor)",
                                       "≥ 3×"),
                                      ("last_ms", "failure notice latency (last survivor)", "—"),
                                      ("init_ms", "MPI_Init time", "—")):
            e = d.med("notice", n, m, hosted, metric)
            b = d.med("notice", n, m, "mpirun", metric)
            r = ratio(b, e)
            self.head("B9", "%s, hosted PMIx (%s) vs mpirun" % (label, hosted),
                      "%s ranks" % n, fmt_t(e / 1e3 if e else None),
                      fmt_t(b / 1e3 if b else None), r, target,
                      (r is not None and r >= 3) if target != "—" else None)

    # --- B8 -----------------------------------------------------------------
    def b8(self):
        path = os.path.join(self.out, "model.md")
        has = "model" in self.d.present and os.path.exists(path)
        self.head("B8", "growth model (recovery vs ranks, L2/L3 vs bytes)", "fits below",
                  "see B8 section", "—", None, "a stated, measured model", has)
        if has:
            with open(path) as f:
                self.details.append(f.read())

    # --- plots ----------------------------------------------------------------
    def plots(self):
        gp = shutil.which("gnuplot")
        pdir = os.path.join(self.out, "plots")
        os.makedirs(pdir, exist_ok=True)
        if not gp:
            self.details.append("(gnuplot not found: no plots)\n")
            return []
        d = self.d
        made = []
        term = "pngcairo size 900,560 font ',11'"
        probe = subprocess.run([gp, "-e", "set terminal pngcairo"], capture_output=True)
        if probe.returncode != 0:
            term = "png size 900,560"

        def series(name, pts):
            """write one series (x, y) with y > 0 to NAME.dat; its plot
            spec, or None when it has no point"""
            pts = [(x, y) for x, y in pts if y is not None and y > 0]
            if not pts:
                return None
            with open(os.path.join(pdir, name + ".dat"), "w") as f:
                f.write("".join("%g %.9g\n" % p for p in sorted(pts)))
            return "'%s.dat'" % name

        def run(name, head, specs):
            specs = ["%s u 1:2 %s" % (f, style) for f, style in specs if f]
            if not specs:
                return
            sp = os.path.join(pdir, name + ".gp")
            with open(sp, "w") as f:
                f.write("\n".join(["set terminal " + term, "set output '%s.png'" % name,
                                   "set format y '%g'"] +
                                  head + ["plot " + ", ".join(specs)]) + "\n")
            r = subprocess.run([gp, sp], cwd=pdir, capture_output=True, text=True)
            if r.returncode == 0 and os.path.exists(os.path.join(pdir, name + ".png")):
                made.append(name + ".png")
            else:
                sys.stderr.write("report: gnuplot %s failed: %s\n" % (name, r.stderr[-400:]))

        def sec(v, scale=1.0):
            return v * scale if v is not None else None

        # 1. recovery against ranks
        ks = d.keys("recovery", "inplace", "t_total_ms")
        ns = sorted({int(n) for n, _ in ks})
        mibs = sorted({int(m) for _, m in ks})
        if ns:
            big = str(max(mibs))
            specs = []
            for m in mibs:
                specs.append((series("b1-total-%d" % m, [
                    (n, sec(d.med("recovery", n, m, "inplace", "t_total_ms"), 1e-3))
                    for n in ns]), "w lp lw 2 pt 7 t 'in place: recovery (t\\_total), %d MiB/rank'" % m))
            specs.append((series("b1-lost-%s" % big, [
                (n, d.med("recovery", n, big, "inplace", "lost_s")) for n in ns]),
                "w lp lw 2 dt 2 pt 6 t 'in place: time lost, %s MiB'" % big))
            specs.append((series("b1-spare-%s" % big, [
                (n, d.med("recovery", n, big, "spare", "lost_s")) for n in ns]),
                "w lp lw 2 dt 3 pt 4 t 'in place with a spare: time lost, %s MiB'" % big))
            specs.append((series("b1-relaunch-%s" % big, [
                (n, d.med("recovery", n, big, "relaunch", "lost_s")) for n in ns]),
                "w lp lw 2 pt 5 t 'relaunch from L3: time lost, %s MiB'" % big))
            specs.append((series("b1-restart-%s" % big, [
                (n, d.med("recovery", n, big, "restart", "lost_s")) for n in ns]),
                "w lp lw 2 pt 9 t 'restart without snapshots: time lost, %s MiB'" % big))
            run("b1-recovery-vs-ranks", [
                "set title 'B1: cost of one failure against ranks (heat2d)'",
                "set xlabel 'ranks'", "set ylabel 'seconds'", "set logscale x 2",
                "set logscale y 10", "set key top left", "set grid"], specs)
        # 2. recovery against state size at 8 ranks
        sz = sorted({int(m) for n, m in ks if n == "8"})
        if sz:
            run("b1-recovery-vs-size", [
                "set title 'B1: cost of one failure against state size (8 ranks)'",
                "set xlabel 'MiB per rank'", "set ylabel 'seconds'", "set logscale xy",
                "set key top left", "set grid"], [
                (series("b1s-total", [(m, sec(d.med("recovery", 8, m, "inplace", "t_total_ms"), 1e-3)) for m in sz]),
                 "w lp lw 2 pt 7 t 'in place: recovery (t\\_total)'"),
                (series("b1s-lost", [(m, d.med("recovery", 8, m, "inplace", "lost_s")) for m in sz]),
                 "w lp lw 2 dt 2 pt 6 t 'in place: time lost'"),
                (series("b1s-spare", [(m, d.med("recovery", 8, m, "spare", "lost_s")) for m in sz]),
                 "w lp lw 2 dt 3 pt 4 t 'in place with a spare: time lost'"),
                (series("b1s-relaunch", [(m, d.med("recovery", 8, m, "relaunch", "lost_s")) for m in sz]),
                 "w lp lw 2 pt 5 t 'relaunch from L3: time lost'"),
                (series("b1s-restart", [(m, d.med("recovery", 8, m, "restart", "lost_s")) for m in sz]),
                 "w lp lw 2 pt 9 t 'restart without snapshots: time lost'")])
        # 3. phases at the largest state
        if ns:
            names = ("t_detect_ms", "t_revoke_agree_ms", "t_shrink_ms", "t_restore_ms",
                     "t_handler_ms", "t_protect_ms")
            with open(os.path.join(pdir, "b1-phases.dat"), "w") as f:
                f.write("# ranks " + " ".join(names) + "\n")
                for n in ns:
                    v = [d.med("recovery", n, big, "inplace", k) for k in names]
                    f.write("%d %s\n" % (n, " ".join("%.3f" % (x or 0) for x in v)))
            cols = ", ".join("'' u %d t '%s'" % (i + 2, k[2:-3].replace("_", "+"))
                             for i, k in enumerate(names) if i > 0)
            sp = os.path.join(pdir, "b1-phases.gp")
            with open(sp, "w") as f:
                f.write("\n".join([
                    "set terminal " + term, "set output 'b1-phases.png'",
                    "set title 'B1: in-place recovery phases, %s MiB per rank'" % big,
                    "set xlabel 'ranks'", "set ylabel 'milliseconds'",
                    "set style data histograms", "set style histogram rowstacked",
                    "set style fill solid 0.8 border -1", "set boxwidth 0.7",
                    "set key top left", "set grid ytics",
                    "plot 'b1-phases.dat' u 2:xtic(1) t 'detect', " + cols]) + "\n")
            r = subprocess.run([gp, sp], cwd=pdir, capture_output=True, text=True)
            if r.returncode == 0:
                made.append("b1-phases.png")
        # 4. L1/L2/L3 cost against bytes
        def sweep(b, ranks, variant, metric):
            return [(float(m), d.med(b, ranks, m, variant, metric))
                    for n, m in d.keys(b, variant, metric) if n == str(ranks)]
        l2n = "8" if d.keys("snapshot", "elastic", "l2_s") and any(
            n == "8" for n, _ in d.keys("snapshot", "elastic", "l2_s")) else "2"
        l3n = "8" if any(n == "8" for n, _ in d.keys("l3", "elastic", "write_s")) else "2"
        run("b8-cost-vs-bytes", [
            "set title 'B3/B4/B5/B8: snapshot cost against state size'",
            "set xlabel 'MiB per rank (L1: 1 rank; L2: %s ranks; L3: %s ranks)'" % (l2n, l3n),
            "set ylabel 'seconds'", "set logscale xy", "set key top left", "set grid"], [
            (series("c-l1", sweep("snapshot", 1, "elastic", "l1_s")), "w lp lw 2 pt 7 lc 1 t 'L1 copy'"),
            (series("c-memcpy", sweep("snapshot", 1, "baseline", "memcpy_s")), "w lp dt 2 pt 6 lc 1 t 'memcpy'"),
            (series("c-l2", sweep("snapshot", l2n, "elastic", "l2_s")), "w lp lw 2 pt 5 lc 2 t 'L2 exchange'"),
            (series("c-sendrecv", sweep("snapshot", l2n, "baseline", "sendrecv_s")), "w lp dt 2 pt 4 lc 2 t 'MPI\\_Sendrecv'"),
            (series("c-l3w", sweep("l3", l3n, "elastic", "write_s")), "w lp lw 2 pt 9 lc 3 t 'L3 write'"),
            (series("c-ddw", sweep("l3", l3n, "baseline", "write_s")), "w lp dt 2 pt 8 lc 3 t 'dd write'"),
            (series("c-l3r", sweep("l3", l3n, "elastic", "read_s")), "w lp lw 2 pt 11 lc 4 t 'L3 read'"),
            (series("c-ddr", sweep("l3", l3n, "baseline", "read_s")), "w lp dt 2 pt 10 lc 4 t 'dd read'")])
        return made

    # --- output ---------------------------------------------------------------
    def write(self):
        self.b1()
        self.b2()
        self.b34()
        self.b5()
        self.b6()
        self.b7()
        self.b8()
        self.b9()
        order = ["B1", "B2", "B3", "B4", "B5", "B6", "B7", "B8", "B9"]
        self.summary.sort(key=lambda r: order.index(r["id"]))
        with open(os.path.join(self.out, "summary.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "measure", "configuration", "elastic", "baseline", "ratio",
                        "target", "met", "note"])
            for r in self.summary:
                w.writerow([r["id"], r["measure"], r["config"], r["elastic"], r["baseline"],
                            "%.3f" % r["ratio"] if r["ratio"] is not None else "",
                            r["target"], r["met"], r["note"]])
        made = self.plots()
        md = ["## Results\n"]
        meta = os.path.join(self.out, "meta.txt")
        if os.path.exists(meta):
            md.append(open(meta).read().rstrip() + "\n")
        md.append("| id | measure | configuration | elastic | baseline | ratio | target | met |")
        md.append("|---|---|---|---:|---:|---:|---|---|")
        for r in self.summary:
            if r["ratio"] is None:
                rt = r["note"] or "—"
            elif r["target"].endswith("%"):
                rt = "%.0f %%" % (100 * r["ratio"])
            else:
                rt = "%.1f×" % r["ratio"]
            if r["ratio"] is not None and r["note"]:
                rt += " (%s)" % r["note"]
            md.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["id"], r["measure"], r["config"], r["elastic"], r["baseline"], rt,
                r["target"], r["met"]))
        md.append("")
        md.extend(self.details)
        if made:
            md.append("### Plots\n")
            for p in made:
                md.append("![%s](plots/%s)\n" % (p[:-4], p))
        with open(os.path.join(self.out, "results.md"), "w") as f:
            f.write("\n".join(md) + "\n")
        missing = [bid for b, bid in BENCHES if b not in self.d.present]
        return missing


def main():
    if len(sys.argv) != 2:
        print("usage: report.py OUT", file=sys.stderr)
        return 2
    rep = Report(sys.argv[1])
    missing = rep.write()
    if missing:
        print("report: no rows from %s" % ", ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
