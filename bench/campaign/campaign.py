#!/usr/bin/python3
"""campaign.py - a fault campaign: random schedules against the real launchers

    bench/campaign/campaign.py --build DIR [--runs N] [--launchers exec,mpirun]
        [--kinds kill,rank0,hook,stop,term,damage] [--ranks 8] [--steps N]
        [--persist-period N] [--seed S] [--out DIR] [--timeout SEC]

Each run starts heat2d (examples/heat2d.c) under a launcher, injects one
random schedule of faults into real processes, and checks the outcome
against a failure-free run of the same configuration:

  kill    1-3 SIGKILLs of random ranks at random times, from outside (any
          window: MPI_Init, a step, a snapshot, an L3 write, a recovery,
          MPI_Finalize);
  rank0   recoveries in quick succession with rank 0 among the victims
          (the run of issue #18 defect 6): SIGKILL rank 0 at a random
          time, then 1-2 random ranks, each 0.5-1.5 s after the one
          before, from outside;
  hook    1-2 SIGKILLs at exact windows through libelastic's test hook
          (ELASTIC_TEST_KILL: snapshot, recovery, protect, persist,
          finalize) at random steps;
  stop    SIGSTOP of one random rank (a hang) at a random time (also
          before MPI_Init or the first progress report) with --hang-timeout
          and --start-timeout (elastic-exec only: elastic-mpirun has no
          progress watchdog);
  term    SIGTERM (preemption) at a random time, to the launcher or to its
          whole process group, then a rerun at a random other size that
          must resume;
  damage  as term, then the newest snapshot file is damaged before the
          rerun, which must fall back to an older one.

A run is right when its exit code is one the schedule allows (0 after
in-place recoveries and relaunches - how many runs needed a group restart
under elastic-exec is counted apart; 75 for a preemption, then 0 for the
rerun), the final checksum is the failure-free one, nothing hung (the
timeout), Open MPI did not abort a rank for a message from outside its
communicator ("context id reused": a message of a freed communicator
handed to a newer one), and nothing was left behind: no process carrying the run's mark,
no file in its TMPDIR (run and PMIx session directories), no new /dev/shm
entry.  The report (OUT/report.md, OUT/runs.jsonl) counts runs per launcher
and fault kind.  Every loop is bounded; the campaign stops by itself.
Exit status: 0 when every run was right, 1 otherwise, 2 on bad usage.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HOOK_WHERE = ["snapshot", "recovery", "protect", "persist", "finalize"]


def parse_args():
    p = argparse.ArgumentParser(description="random fault schedules against the launchers")
    p.add_argument("--build", required=True, help="a built elastic build tree")
    p.add_argument("--runs", type=int, default=40, help="schedules in all (default 40)")
    p.add_argument("--launchers", default="exec,mpirun")
    p.add_argument("--kinds", default="kill,rank0,hook,stop,term,damage")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--nx", type=int, default=256)
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--persist-period", type=int, default=2000)
    p.add_argument("--snapshot-period", type=int, default=100)
    p.add_argument("--hang-timeout", type=float, default=2.0)
    p.add_argument("--start-timeout", type=float, default=8.0,
                   help="elastic-exec's --start-timeout for the stop kind (default 8)")
    p.add_argument("--max-faults", type=int, default=3,
                   help="at most this many kills a run (kill: 1-N, hook: 1-min(2,N))")
    p.add_argument("--max-restarts", type=int, default=3,
                   help="elastic-exec's --max-restarts (0: a lost buddy pair ends with 76)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--timeout", type=float, default=300.0, help="a run that takes longer hung")
    a = p.parse_args()
    for name in ("runs", "ranks", "steps", "persist_period", "snapshot_period"):
        if getattr(a, name) < 1:
            p.error("--%s: '%s' is invalid (expected an integer >= 1)"
                    % (name.replace("_", "-"), getattr(a, name)))
    if a.max_faults < 1:
        p.error("--max-faults: '%d' is invalid (expected an integer >= 1)" % a.max_faults)
    if a.max_restarts < 0:
        p.error("--max-restarts: '%d' is invalid (expected an integer >= 0)" % a.max_restarts)
    if a.ranks < 3:
        p.error("--ranks: '%d' is invalid (expected >= 3: a shrink needs survivors)" % a.ranks)
    a.launchers = a.launchers.split(",")
    for l in a.launchers:
        if l not in ("exec", "mpirun"):
            p.error("--launchers: '%s' is invalid (expected exec, mpirun)" % l)
    a.kinds = a.kinds.split(",")
    for k in a.kinds:
        if k not in ("kill", "rank0", "hook", "stop", "term", "damage"):
            p.error("--kinds: '%s' is invalid (expected kill, rank0, hook, stop, term, damage)"
                    % k)
    return a


class Campaign:
    def __init__(self, a):
        self.a = a
        b = os.path.abspath(a.build)
        self.exec = os.path.join(b, "src/exec/elastic-exec")
        self.mpirun = os.path.join(b, "src/mpirun/elastic-mpirun")
        self.heat2d = os.path.join(b, "examples/heat2d")
        for prog in (self.exec, self.mpirun, self.heat2d):
            if not os.access(prog, os.X_OK):
                sys.exit("campaign: %s is not built (build the tree first)" % prog)
        self.seed = a.seed if a.seed is not None else int(time.time())
        self.rng = random.Random(self.seed)
        self.root = os.path.abspath(a.out or tempfile.mkdtemp(prefix="elastic-campaign."))
        os.makedirs(self.root, exist_ok=True)
        self.runs = []
        self.ref = {}

    # ---- processes -------------------------------------------------------

    @staticmethod
    def environ(pid):
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                return f.read().split(b"\0")
        except OSError:
            return None

    def marked(self, mark):
        """PIDs of the processes that carry the run's mark."""
        want = ("CAMPAIGN_MARK=" + mark).encode()
        pids = []
        for d in os.listdir("/proc"):
            if d.isdigit() and int(d) != os.getpid():
                env = self.environ(int(d))
                if env and want in env:
                    pids.append(int(d))
        return pids

    def ranks(self, mark):
        """{rank: pid} of the run's live heat2d processes (not stopped ones'
        children, not zombies)."""
        out = {}
        for pid in self.marked(mark):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    argv0 = f.read().split(b"\0")[0]
                with open("/proc/%d/stat" % pid) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if os.path.basename(argv0) != b"heat2d" or state == "Z":
                continue
            env = self.environ(pid) or []
            for e in env:
                m = re.match(rb"(?:PMIX_RANK|OMPI_COMM_WORLD_RANK)=(\d+)$", e)
                if m:
                    out[int(m.group(1))] = pid
                    break
        return out

    # ---- one job ---------------------------------------------------------

    # the test hook's kills belong to the schedule, once: armed in the
    # first attempt only (a group restart or a relaunch would fire them again
    # in every attempt, until the restarts run out)
    FIRST_ONLY = ('if [ "${ELASTIC_RESTART_COUNT:-0}" = 0 ] && [ "${ELASTIC_ATTEMPT:-1}" = 1 ]; '
                  'then export ELASTIC_TEST_KILL="$CAMPAIGN_TEST_KILL"; fi; exec "$0" "$@"')

    def command(self, launcher, n, rid, d, extra_exec=(), hooks=False):
        app = [self.heat2d, "--nx", str(self.a.nx), "--ny", str(self.a.nx), "--progress", "100",
               "--steps", str(self.a.steps), "--persist-period", str(self.a.persist_period),
               "--snapshot-dir", os.path.join(d, "snap")]
        if hooks:
            app = ["/bin/sh", "-c", self.FIRST_ONLY] + app
        if launcher == "exec":
            return [self.exec, "--nproc-per-node", str(n), "--run-id", rid,
                    "--max-restarts", str(self.a.max_restarts), "--event-log",
                    os.path.join(d, "events"),
                    *extra_exec, "--"] + app
        return [self.mpirun, "-q", "--run-dir", os.path.join(d, "run"), "-n", str(n)] + app

    def start(self, launcher, n, rid, d, mark, tag, extra_exec=(), env_extra=None):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("ELASTIC_") or k.startswith("PMIX_") or k.startswith("OMPI_COMM"):
                del env[k]
        env.update({"TMPDIR": os.path.join(d, "tmp"), "CAMPAIGN_MARK": mark,
                    "ELASTIC_RUN_ID": rid, "ELASTIC_SNAPSHOT_PERIOD": str(self.a.snapshot_period),
                    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_opal_cuda_support": "0"})
        env.update(env_extra or {})
        os.makedirs(env["TMPDIR"], exist_ok=True)
        out = open(os.path.join(d, tag + ".out"), "wb")
        err = open(os.path.join(d, tag + ".err"), "wb")
        # its own session: a signal "to the process group" reaches exactly the job
        p = subprocess.Popen(self.command(launcher, n, rid, d, extra_exec,
                                          "CAMPAIGN_TEST_KILL" in env), env=env,
                             stdout=out, stderr=err, start_new_session=True)
        out.close()
        err.close()
        return p

    def wait(self, p, t0, mark):
        """Wait for the job until the timeout; returns (exit code, seconds),
        exit code None when it hung (then everything of it is killed)."""
        while time.time() - t0 < self.a.timeout:
            rc = p.poll()
            if rc is not None:
                return (rc if rc >= 0 else 128 - rc), time.time() - t0
            time.sleep(0.05)
        self.kill_all(p, mark)
        p.wait()
        return None, time.time() - t0

    def kill_all(self, p, mark):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        for pid in self.marked(mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    @staticmethod
    def checksum(d, tag):
        m = re.findall(rb"^checksum ([0-9a-f]+)$", open(os.path.join(d, tag + ".out"), "rb").read(),
                       re.M)
        return m[-1].decode() if m else ""

    def leftovers(self, d, mark, shm_before):
        left = []
        for _ in range(200):  # 20 s for the teardown
            if not self.marked(mark):
                break
            time.sleep(0.1)
        pids = self.marked(mark)
        if pids:
            left.append("processes %s" % pids)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        tmp = os.path.join(d, "tmp")
        if os.path.isdir(tmp) and os.listdir(tmp):
            left.append("TMPDIR entries %s" % sorted(os.listdir(tmp)))
        new = self.own_shm(d, set(os.listdir("/dev/shm")) - shm_before)
        if new:
            left.append("/dev/shm %s" % new)
        return left

    @staticmethod
    def in_use():
        """/dev/shm names some process maps or holds open."""
        used = set()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/maps" % pid) as f:
                    for line in f:
                        i = line.find("/dev/shm/")
                        if i >= 0:
                            used.add(line[i + 9:].split()[0])
                for fd in os.listdir("/proc/%s/fd" % pid):
                    t = os.readlink("/proc/%s/fd/%s" % (pid, fd))
                    if t.startswith("/dev/shm/"):
                        used.add(t[9:].split()[0])
            except OSError:
                continue
        return used

    def own_shm(self, d, new):
        """Of the /dev/shm entries that appeared during the run, those it
        left.  Other jobs on the machine create and remove their own, so an
        entry counts only when it is the run's: for elastic-exec, under a
        prefix its event log names (pmix_job_end: the namespaces' Open MPI
        segments; its run and PMIx directories are in the run's TMPDIR,
        checked apart); for elastic-mpirun, an Open MPI segment
        (sm_segment.*, vader_segment.*) nobody maps or holds open any more,
        2 s after the end."""
        ev = os.path.join(d, "events")
        prefixes = []
        if os.path.exists(ev):
            for line in open(ev):
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("event") == "pmix_job_end":
                    prefixes += e.get("shm", [])
            return sorted(f for f in new if f in set(os.listdir("/dev/shm")) and
                          any(f.startswith(p) for p in prefixes))
        time.sleep(2)
        used = self.in_use()
        # (PMIx and elastic-exec directories of the run go to its TMPDIR,
        # checked apart; those in /dev/shm are other jobs')
        mpi = ("sm_segment.", "vader_segment.")
        return sorted(f for f in new if f.startswith(mpi) and os.path.exists("/dev/shm/" + f) and
                      f not in used)

    # ---- faults ----------------------------------------------------------

    def reference(self, launcher, n):
        key = (launcher, n)
        if key not in self.ref:
            d = os.path.join(self.root, "ref-%s-%d" % key)
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            mark = "ref-%d-%s-%d" % (os.getpid(), launcher, n)
            t0 = time.time()
            p = self.start(launcher, n, "ref", d, mark, "run")
            rc, secs = self.wait(p, t0, mark)
            ck = self.checksum(d, "run")
            if rc != 0 or not ck:
                sys.exit("campaign: the failure-free %s run at %d ranks failed (exit %s); see %s"
                         % (launcher, n, rc, d))
            self.ref[key] = (ck, secs)
            print("reference %s n=%d: checksum %s in %.1f s" % (launcher, n, ck, secs), flush=True)
        return self.ref[key]

    def inject_kills(self, p, mark, t0, times, log, first=None):
        """SIGKILL a random live rank at each of the times (seconds after t0);
        rank first (if not None) at the first time."""
        for k, t in enumerate(times):
            while time.time() - t0 < t and p.poll() is None:
                time.sleep(0.01)
            if p.poll() is not None:
                log.append("job ended before %.2f s" % t)
                return
            live = self.ranks(mark)
            if not live:
                log.append("%.2f s: no rank alive to kill" % (time.time() - t0))
                continue
            r = first if k == 0 and first in live else self.rng.choice(sorted(live))
            try:
                os.kill(live[r], signal.SIGKILL)
                log.append("%.2f s: SIGKILL rank %d (pid %d)" % (time.time() - t0, r, live[r]))
            except OSError:
                pass

    def one(self, i, launcher, kind):
        a, rng = self.a, self.rng
        n = a.ranks
        ref, tref = self.reference(launcher, n)
        rid = "c%d-%d" % (os.getpid(), i)
        d = os.path.join(self.root, "%03d-%s-%s" % (i, launcher, kind))
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        mark = rid
        shm_before = set(os.listdir("/dev/shm"))
        log, want = [], {0}
        extra, env = [], {}
        if kind == "hook":
            hooks = []
            for _ in range(rng.randint(1, min(2, a.max_faults))):
                where = rng.choice(HOOK_WHERE)
                step = 0 if where == "finalize" else (
                    rng.randrange(1, a.steps // a.persist_period) * a.persist_period
                    if where == "persist" else
                    rng.randrange(1, a.steps // a.snapshot_period) * a.snapshot_period)
                hooks.append("%d:%d:%s" % (rng.randrange(n), step, where))
            env["CAMPAIGN_TEST_KILL"] = ",".join(hooks)
            log.append("ELASTIC_TEST_KILL=" + env["CAMPAIGN_TEST_KILL"])
        if kind == "stop":
            extra = ["--hang-timeout", str(a.hang_timeout),
                     "--start-timeout", str(a.start_timeout)]
        if launcher == "exec" and a.max_restarts == 0 and kind in ("kill", "hook", "stop"):
            want = {0, 76}  # a rank and its buddy lost: a clean "relaunch me"
        t0 = time.time()
        p = self.start(launcher, n, rid, d, mark, "run", extra, env)
        if kind == "kill":
            times = sorted(rng.uniform(0.02, 0.98) * tref
                           for _ in range(rng.randint(1, a.max_faults)))
            self.inject_kills(p, mark, t0, times, log)
        elif kind == "rank0":
            times = [rng.uniform(0.05, 0.5) * tref]
            for _ in range(rng.randint(1, 2)):
                times.append(times[-1] + rng.uniform(0.5, 1.5))
            self.inject_kills(p, mark, t0, times, log, first=0)
        elif kind == "stop":
            # a hang at any time: before MPI_Init (the watchdog's
            # --start-timeout and the PMIx server's MPI_Init deadline find
            # it; the group restarts), before the first progress report,
            # or in the run (--hang-timeout; recovered in place)
            # (one in three in the start window: the first second)
            early = rng.random() < 1.0 / 3
            t = rng.uniform(0.05, 1.0) if early else rng.uniform(0.02, 0.9) * tref
            while time.time() - t0 < t and p.poll() is None:
                time.sleep(0.005)
            live = self.ranks(mark)
            if live and p.poll() is None:
                r = rng.choice(sorted(live))
                os.kill(live[r], signal.SIGSTOP)
                log.append("%.2f s: SIGSTOP rank %d (pid %d)" % (time.time() - t0, r, live[r]))
        elif kind in ("term", "damage"):
            t = rng.uniform(0.3, 0.8) * tref
            group = rng.random() < 0.5
            while time.time() - t0 < t and p.poll() is None:
                time.sleep(0.01)
            if p.poll() is None:
                try:
                    if group:
                        os.killpg(p.pid, signal.SIGTERM)
                    else:
                        os.kill(p.pid, signal.SIGTERM)
                    log.append("%.2f s: SIGTERM to the %s" % (time.time() - t0,
                               "process group" if group else "launcher"))
                except OSError:
                    pass
            want = {0, 75}
        rc, secs = self.wait(p, t0, mark)
        ck = self.checksum(d, "run")
        res = {"run": i, "launcher": launcher, "kind": kind, "schedule": log, "exit": rc,
               "seconds": round(secs, 2), "dir": d}
        problems = []
        if any(b"rank outside the valid range of the communicator" in
               open(os.path.join(d, "run" + ext), "rb").read() for ext in (".out", ".err")):
            problems.append("context id reused (Open MPI aborted a rank)")
        if rc is None:
            problems.append("hang")
        elif rc not in want:
            problems.append("unexplained exit %d" % rc)
        elif rc == 0 and ck != ref:
            problems.append("wrong result (checksum %s, want %s)" % (ck or "none", ref))
        elif rc == 75:
            # the rerun resumes, at another size, from the suspend snapshot
            # (damage: from an older one, the newest being damaged)
            damaged_step = None
            if kind == "damage":
                msg, damaged_step = self.damage_newest(os.path.join(d, "snap"))
                log.append(msg)
            # a preemption before the first snapshot leaves nothing to resume:
            # the rerun then starts over (and must still be right)
            saved = any(f.endswith(".h5") for _, _, fs in os.walk(os.path.join(d, "snap"))
                        for f in fs)
            n2 = rng.choice([k for k in range(max(3, n // 2), n + 1) if k != n])
            res["resume_ranks"] = n2
            t1 = time.time()
            # elastic-mpirun resumes by itself (its run directory says a run
            # was suspended); elastic-exec's rerun says so, as a requeued
            # batch script does
            p2 = self.start(launcher, n2, rid, d, mark, "rerun",
                            env_extra={"ELASTIC_RESUME": "1"} if launcher == "exec" else None)
            rc2, secs2 = self.wait(p2, t1, mark)
            ck2 = self.checksum(d, "rerun")
            res.update({"rerun_exit": rc2, "rerun_seconds": round(secs2, 2)})
            out2 = open(os.path.join(d, "rerun.out"), "rb").read()
            if rc2 is None:
                problems.append("rerun hang")
            elif rc2 != 0:
                problems.append("rerun: unexplained exit %d" % rc2)
            elif ck2 != ref:
                problems.append("rerun: wrong result (checksum %s, want %s)" % (ck2 or "none", ref))
            elif b"resumed from step" not in out2 and saved:
                problems.append("rerun did not resume")
            elif b"resumed from step" not in out2:
                res["resumed_step"] = None  # nothing had been saved: started over
            else:
                resumed = int(re.findall(rb"resumed from step (\d+)", out2)[-1])
                res["resumed_step"] = resumed
                if damaged_step is not None:
                    # a damage in bytes no reader uses (free space) is harmless
                    # and cannot be seen: counted, not failed
                    res["damage_detected"] = resumed < damaged_step
        res["restarts"], res["lost_in_place"] = self.recoveries(d)
        left = self.leftovers(d, mark, shm_before)
        if left:
            problems.append("left behind: " + "; ".join(left))
        res["problems"] = problems
        res["ok"] = not problems
        print("%3d %-6s %-6s exit %-4s %5.1f s %s%s%s" % (
            i, launcher, kind, rc, secs, "ok" if not problems else "FAIL: " + "; ".join(problems),
            "" if res["restarts"] is None else " (in place %d, restarts %d)" % (
                res["lost_in_place"], res["restarts"]),
            "" if not log else "  [" + "; ".join(log) + "]"), flush=True)
        if not problems:
            shutil.rmtree(d, ignore_errors=True)
        return res

    @staticmethod
    def recoveries(d):
        """(group restarts, ranks lost in place) from elastic-exec's event
        log (elastic-mpirun's runs: (None, None))."""
        ev = os.path.join(d, "events")
        if not os.path.exists(ev):
            return None, None
        restarts = lost = 0
        for line in open(ev):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            restarts += e.get("event") == "restart"
            lost += e.get("event") == "rank_lost"
        return restarts, lost

    def damage_newest(self, snapdir):
        files = []
        for root, _, names in os.walk(snapdir):
            for f in names:
                if f.endswith(".h5"):
                    files.append(os.path.join(root, f))
        if not files:
            return "no snapshot file to damage", None
        newest = max(files, key=lambda f: int(re.sub(r"\D", "", os.path.basename(f)) or 0))
        size = os.path.getsize(newest)
        with open(newest, "r+b") as f:
            f.seek(size // 2)
            f.write(os.urandom(min(4096, max(1, size // 4))))
        step = int(re.sub(r"\D", "", os.path.basename(newest)) or 0)
        return "damaged %s (%d bytes)" % (os.path.basename(newest), size), step

    def run(self):
        print("campaign: seed %d, %d runs, launchers %s, kinds %s, results in %s" % (
            self.seed, self.a.runs, ",".join(self.a.launchers), ",".join(self.a.kinds), self.root),
            flush=True)
        plan = []
        for launcher in self.a.launchers:
            for kind in self.a.kinds:
                if kind == "stop" and launcher != "exec":
                    continue
                plan.append((launcher, kind))
        jl = open(os.path.join(self.root, "runs.jsonl"), "w")
        for i in range(self.a.runs):
            launcher, kind = plan[i % len(plan)]
            r = self.one(i, launcher, kind)
            self.runs.append(r)
            jl.write(json.dumps(r) + "\n")
            jl.flush()
        jl.close()
        return self.report()

    def report(self):
        rows = {}
        for r in self.runs:
            k = (r["launcher"], r["kind"])
            s = rows.setdefault(k, {"runs": 0, "ok": 0, "wrong": 0, "hang": 0, "exit": 0, "left": 0,
                                    "restarted": 0})
            s["runs"] += 1
            s["restarted"] += bool(r.get("restarts"))
            s["ok"] += r["ok"]
            for p in r["problems"]:
                s["wrong"] += "wrong result" in p
                s["hang"] += "hang" in p
                s["exit"] += "unexplained exit" in p
                s["left"] += p.startswith("left behind")
        lines = ["# Fault campaign", "",
                 "seed %d; heat2d %dx%d, %d steps, %d ranks, snapshot every %d, L3 every %d"
                 % (self.seed, self.a.nx, self.a.nx, self.a.steps, self.a.ranks,
                    self.a.snapshot_period, self.a.persist_period), "",
                 "| launcher | fault | runs | right | wrong result | hang | unexplained exit "
                 "| left behind | needed a group restart |",
                 "|---|---|---|---|---|---|---|---|---|"]
        tot = {"runs": 0, "ok": 0, "wrong": 0, "hang": 0, "exit": 0, "left": 0, "restarted": 0}
        for (l, k), s in sorted(rows.items()):
            lines.append("| %s | %s | %d | %d | %d | %d | %d | %d | %d |"
                         % (l, k, s["runs"], s["ok"], s["wrong"], s["hang"], s["exit"], s["left"],
                            s["restarted"]))
            for x in tot:
                tot[x] += s[x]
        lines.append("| all | all | %d | %d | %d | %d | %d | %d | %d |"
                     % (tot["runs"], tot["ok"], tot["wrong"], tot["hang"], tot["exit"], tot["left"],
                        tot["restarted"]))
        dmg = [r for r in self.runs if "damage_detected" in r]
        if dmg:
            lines += ["", "Damaged newest snapshot: %d of %d reruns resumed from an older one "
                      "(the others' damage hit bytes no reader uses, and they resumed "
                      "correctly from the damaged file)"
                      % (sum(r["damage_detected"] for r in dmg), len(dmg))]
        bad = [r for r in self.runs if not r["ok"]]
        if bad:
            lines += ["", "Runs that went wrong (their directories are kept):", ""]
            for r in bad:
                lines.append("- run %d (%s, %s): %s; schedule: %s; %s" % (
                    r["run"], r["launcher"], r["kind"], "; ".join(r["problems"]),
                    "; ".join(r["schedule"]) or "none", r["dir"]))
        text = "\n".join(lines) + "\n"
        open(os.path.join(self.root, "report.md"), "w").write(text)
        print(text, end="")
        return 0 if not bad else 1


def main():
    a = parse_args()
    sys.exit(Campaign(a).run())


if __name__ == "__main__":
    main()
