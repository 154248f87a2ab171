#!/usr/bin/python3
"""b14-report.py - B14's report: OUT/meshcluster.csv -> OUT/meshcluster.md

    bench/b14-report.py OUT

One table per part of bench/b14-meshcluster.sh: for every variant and
metric the number of trials, the median, min and max; then the headline
ratios (baseline median / mesh median, larger is better for the mesh)
against issue #14's targets.  Failed trials (flag rows) are counted and
listed, never averaged in.  Exit 1 if OUT/meshcluster.csv has no rows.
"""
import csv
import os
import statistics
import sys

TARGETS = {
    "notice": "mesh >= 3x faster than mpirun --with-ft ulfm (first survivor's error)",
    "node": "mesh-kill back <= 800 ms and >= 5x faster than the relaunch; "
            "mesh-cut back <= --node-timeout (1 s) + 500 ms",
    "init": "mesh never slower than srun --mpi=pmix or mpirun",
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    path = os.path.join(out, "meshcluster.csv")
    vals, flags, load = {}, {}, []
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["variant"] == "load":
                load.append((r["trial"], r["value"]))
                continue
            if ":" not in r["variant"]:
                flags.setdefault(("", r["variant"], r["ranks"]), []).append(r["metric"])
                continue
            part, var = r["variant"].split(":", 1)
            k = (part, var, r["ranks"], r["metric"])
            if r["unit"] in ("flag", "code"):
                flags.setdefault((part, var, r["ranks"]), []).append(
                    "%s=%s (trial %s)" % (r["metric"], r["value"], r["trial"]))
                if r["metric"] != "checksum_ok":
                    continue
            try:
                vals.setdefault(k, []).append(float(r["value"]))
            except ValueError:
                pass
    if not vals and not flags:
        print("b14-report.py: %s has no rows" % path, file=sys.stderr)
        return 1

    def med(part, var, ranks, metric):
        v = vals.get((part, var, ranks, metric))
        return statistics.median(v) if v else None

    lines = ["# B14: mesh mode across the emulated 3-node Slurm cluster", ""]
    lines.append("Load average (1 min) at: " + ", ".join("%s %s" % t for t in load))
    lines.append("")
    titles = {"notice": "(a) rank SIGKILLed -> survivors' MPI call returns the error (ms)",
              "node": "(b) node lost -> every survivor computing again (ms)",
              "init": "(c) MPI_Init across 3 nodes (ms)"}
    for part in ("notice", "node", "init"):
        keys = sorted(k for k in vals if k[0] == part)
        if not keys:
            continue
        lines += ["## " + titles[part], "", "target: " + TARGETS[part], "",
                  "| variant | ranks | metric | n | median | min | max |",
                  "|---|---|---|---|---|---|---|"]
        for k in sorted(keys, key=lambda k: (int(k[2] or 0), k[3], k[1])):
            v = vals[k]
            lines.append("| %s | %s | %s | %d | %.1f | %.1f | %.1f |" % (
                k[1], k[2], k[3], len(v), statistics.median(v), min(v), max(v)))
        lines.append("")
    # headlines
    lines += ["## Headlines (ratio = baseline median / mesh median)", ""]

    def ratio(a, b):
        return "%.2f" % (a / b) if a and b else "-"

    for m in ("first_ms", "first_remote_ms", "last_ms", "job_ms"):
        a, b = med("notice", "mesh", "6", m), med("notice", "mpirun", "6", m)
        if a is not None and b is not None:
            lines.append("- (a) %s: mesh %.2f, mpirun %.2f, ratio %s (target 3)" % (m, a, b, ratio(b, a)))
    k, c, r = (med("node", v, "6", "back_ms") for v in ("mesh-kill", "mesh-cut", "relaunch"))
    if k is not None:
        lines.append("- (b) node killed: mesh %.0f ms (target <= 800)%s" % (
            k, ", relaunch %.0f ms, ratio %s (target 5)" % (r, ratio(r, k)) if r else ""))
    if c is not None:
        lines.append("- (b) node cut: mesh %.0f ms (target <= 1500: --node-timeout 1 s + 0.5 s)" % c)
    for ranks in sorted({k[2] for k in vals if k[0] == "init"}, key=int):
        for m in ("init_ms", "job_ms"):
            mesh = med("init", "mesh", ranks, m)
            if mesh is None:
                continue
            others = []
            for var in ("srun-pmix", "srun-inherit", "mpirun"):
                o = med("init", var, ranks, m)
                if o is not None:
                    others.append("%s %.1f (ratio %s)" % (var, o, ratio(o, mesh)))
            lines.append("- (c) %s ranks, %s: mesh %.1f; %s" % (ranks, m, mesh, "; ".join(others)))
    bad = {k: v for k, v in flags.items()
           if any(not (x.startswith("checksum_ok=1") or x.startswith("exit_status=0")) for x in v)}
    if bad:
        lines += ["", "## Failed or unclean trials", ""]
        for k, v in sorted(bad.items()):
            lines.append("- %s %s %s: %s" % (k[0], k[1], k[2], ", ".join(
                x for x in v if not (x.startswith("checksum_ok=1") or x.startswith("exit_status=0")))))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "meshcluster.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
