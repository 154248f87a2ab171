#!/usr/bin/python3
"""campaign.py - a fault campaign: random schedules against the real launchers

    bench/campaign/campaign.py --build DIR [--runs N] [--launchers exec,mpirun,srun]
        [--kinds kill,rank0,hook,stop,term,damage,node,cut] [--ranks 8] [--steps N]
        [--persist-period N] [--seed S] [--out DIR] [--timeout SEC]
        [--recovery-timeout SEC]
        [--nodes 3] [--nproc-per-node 2] [--spares 0] [--sleep MS]

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
          rerun, which must fall back to an older one; where it was the
          run's only one, the rerun must refuse (exit non-zero, "no valid
          L3 snapshot" naming it) and not start over: its restarts get
          ELASTIC_RESUME_FRESH_OK=2, fresh only when nothing was saved.

Every job runs with ELASTIC_RECOVERY_TIMEOUT=--recovery-timeout (60 s,
below the run's --timeout): a recovery that Open MPI leaves blocked (its
agreement or shrink) ends in exit 76 and a restart or relaunch from L3,
which the run must complete like any other.

The launcher srun is elastic-exec's mesh mode (doc/mesh.md) on an emulated
Slurm cluster (scripts/slurm-cluster.sh, network namespaces; root, Slurm
and munge needed) that the campaign brings up once: `srun --no-kill
-N<nodes> --ntasks-per-node=1 elastic-exec --nproc-per-node <n> heat2d`
(ELASTIC_SPARE_RANKS=<spares>).  Its kinds, each at a random time of the
computation (after the first progress line: a failure before every rank
passed MPI_Init fails a mesh job, doc/mesh.md "not yet"):

  kill    1-2 SIGKILLs of random ranks at random steps, two of them at
          once one time in two (0, or 76 when a rank and its buddy are
          both lost, then a rerun with ELASTIC_RESUME=1 on a random other
          number of nodes that must resume from L3 with the failure-free
          checksum);
  node    kill-node of a random node (n1 included: rank 0, the mesh's
          root): every process of it SIGKILLed; the others go on in place;
          afterwards its slurmd is started again and resumed in Slurm;
  cut     the veth of a random node down (a silent node): the others go on,
          its member must fence itself (self_fence, its ranks killed);
          the link comes up again after the run;
  term    scancel -s USR1 (75 from every member), then a rerun on a random
          other number of nodes with ELASTIC_RESUME=1 that must resume.

--buddy-pairs P makes two kills at once a rank and its buddy (the rank
that holds its copy: libelastic's round-robin map over the nodes) with
probability P, for the 76-and-resume path that random pairs rarely hit.

The job's result is the one its members agreed on (--status-file; srun's
own exit status, Slurm's after a node loss, is recorded beside it); the
leftover check covers every node: no process of the run (its mark, and no
heat2d or elastic-exec in any node's namespace), nothing in its TMPDIR
(the node directories and PMIx session directories go there), none of its
/dev/shm segments, no new /tmp/elastic-* directory of its job.

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
import atexit
import glob
import json
import os
import random
import re
import resource
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
    p.add_argument("--recovery-timeout", type=float, default=60.0,
                   help="ELASTIC_RECOVERY_TIMEOUT of every job (default 60; 0: none)")
    p.add_argument("--nodes", type=int, default=3, help="srun: nodes of the emulated cluster")
    p.add_argument("--nproc-per-node", type=int, default=2, help="srun: ranks per node")
    p.add_argument("--spares", type=int, default=0, help="srun: ELASTIC_SPARE_RANKS")
    p.add_argument("--sleep", type=int, default=0, help="heat2d --sleep MS per step")
    p.add_argument("--buddy-pairs", type=float, default=0.0,
                   help="srun kill: the chance that two kills at once are a rank and its "
                        "buddy (libelastic's round-robin map; without spares), default 0")
    p.add_argument("--cluster-sh", default=None,
                   help="srun: the cluster fixture (default: the source tree's scripts/slurm-cluster.sh)")
    a = p.parse_args()
    for name in ("runs", "ranks", "steps", "persist_period", "snapshot_period"):
        if getattr(a, name) < 1:
            p.error("--%s: '%s' is invalid (expected an integer >= 1)"
                    % (name.replace("_", "-"), getattr(a, name)))
    if a.recovery_timeout < 0:
        p.error("--recovery-timeout: '%g' is invalid (expected seconds >= 0)" % a.recovery_timeout)
    if a.max_faults < 1:
        p.error("--max-faults: '%d' is invalid (expected an integer >= 1)" % a.max_faults)
    if a.max_restarts < 0:
        p.error("--max-restarts: '%d' is invalid (expected an integer >= 0)" % a.max_restarts)
    if a.ranks < 3:
        p.error("--ranks: '%d' is invalid (expected >= 3: a shrink needs survivors)" % a.ranks)
    if a.nodes < 2 or a.nodes > 16:
        p.error("--nodes: '%d' is invalid (expected 2..16)" % a.nodes)
    if a.nproc_per_node < 1:
        p.error("--nproc-per-node: '%d' is invalid (expected an integer >= 1)" % a.nproc_per_node)
    if a.spares < 0 or a.spares >= a.nodes * a.nproc_per_node - 1:
        p.error("--spares: '%d' is invalid (expected 0..%d)"
                % (a.spares, a.nodes * a.nproc_per_node - 2))
    if not 0.0 <= a.buddy_pairs <= 1.0:
        p.error("--buddy-pairs: '%s' is invalid (expected a probability 0..1)" % a.buddy_pairs)
    if a.sleep < 0:
        p.error("--sleep: '%d' is invalid (expected milliseconds >= 0)" % a.sleep)
    a.launchers = a.launchers.split(",")
    for l in a.launchers:
        if l not in ("exec", "mpirun", "srun"):
            p.error("--launchers: '%s' is invalid (expected exec, mpirun, srun)" % l)
    a.kinds = a.kinds.split(",")
    for k in a.kinds:
        if k not in ("kill", "rank0", "hook", "stop", "term", "damage", "node", "cut"):
            p.error("--kinds: '%s' is invalid (expected kill, rank0, hook, stop, term, damage, "
                    "node, cut)" % k)
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
        self.tcomp = {}
        self.cdir = None
        if "srun" in a.launchers:
            self.cluster_up()

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

    def command(self, launcher, n, rid, d, extra_exec=(), hooks=False, tag="run"):
        app = [self.heat2d, "--nx", str(self.a.nx), "--ny", str(self.a.nx), "--progress", "100",
               "--steps", str(self.a.steps), "--persist-period", str(self.a.persist_period),
               "--snapshot-dir", os.path.join(d, "snap")]
        if self.a.sleep:
            app += ["--sleep", str(self.a.sleep)]
        if launcher == "srun":
            # n is the number of nodes; the run id comes from ELASTIC_RUN_ID
            # (the resume finds the snapshots by it); --max-restarts is
            # ignored in mesh mode
            # each node its own TMPDIR (a node-local /tmp: its node
            # directory and PMIx session directory) and event log
            node = ('h=$(hostname); export TMPDIR="$CAMPAIGN_DIR/tmp/$h"; mkdir -p "$TMPDIR"; '
                    'exec "$0" --event-log "$CAMPAIGN_DIR/events.$CAMPAIGN_TAG.$h" "$@"')
            return [self.csh, "ctl", self.cdir, "srun", "--no-kill", "-N%d" % n,
                    "--ntasks-per-node=1", "/bin/sh", "-c", node, self.exec, "--oversubscribe",
                    "--mpi-btl", "tcp", "--node-timeout", "1", "--nproc-per-node",
                    str(self.a.nproc_per_node),
                    "--status-file", os.path.join(d, tag + ".status"), "--"] + app
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
                    "ELASTIC_RECOVERY_TIMEOUT": "%g" % self.a.recovery_timeout,
                    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_opal_cuda_support": "0"})
        if launcher == "srun":
            # as tests/lib/slurm.sh's slurm_mpi_env and t6020: TCP between
            # the nodes (elastic-exec's --mpi-btl), a per-campaign mesh secret
            env.pop("OMPI_MCA_btl", None)
            env.update({"OMPI_MCA_pml": "ob1", "PRTE_MCA_prte_silence_shared_fs": "1",
                        "ELASTIC_MESH_SECRET": self.secret, "CAMPAIGN_DIR": d,
                        "CAMPAIGN_TAG": tag})
            if self.a.spares:
                env["ELASTIC_SPARE_RANKS"] = str(self.a.spares)
        env.update(env_extra or {})
        os.makedirs(env["TMPDIR"], exist_ok=True)
        out = open(os.path.join(d, tag + ".out"), "wb")
        err = open(os.path.join(d, tag + ".err"), "wb")
        # its own session: a signal "to the process group" reaches exactly the job;
        # run in its directory with core dumps on, so that a crash leaves its
        # core there (backtraces)
        p = subprocess.Popen(self.command(launcher, n, rid, d, extra_exec,
                                          "CAMPAIGN_TEST_KILL" in env, tag), env=env,
                             stdout=out, stderr=err, start_new_session=True, cwd=d,
                             preexec_fn=self.core_limit)
        out.close()
        err.close()
        return p

    @staticmethod
    def core_limit():
        """In the child: core dumps as large as the hard limit allows."""
        try:
            hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
            resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
        except (ValueError, OSError):
            pass

    @staticmethod
    def backtraces(d, show=True):
        """Every core file a run left in its directory: each one's
        program and the stacks of all its threads (gdb, where installed),
        written to backtrace.txt; returns one line per core, or []."""
        cores = sorted(glob.glob(os.path.join(d, "core*")))
        if not cores:
            return []
        lines, text = [], []
        for c in cores:
            exe = None
            try:
                info = subprocess.run(["gdb", "-batch", "-c", c], capture_output=True,
                                      text=True, timeout=60).stdout
                m = re.search(r"Core was generated by `([^ `]+)", info)
                exe = (shutil.which(m.group(1)) or m.group(1)) if m else None
                bt = subprocess.run(["gdb", "-batch", "-ex", "thread apply all bt 40"] +
                                    ([exe] if exe else []) + [c], capture_output=True,
                                    text=True, timeout=120).stdout
            except (OSError, subprocess.TimeoutExpired) as e:
                bt = "(no backtrace: %s)" % e
            text += ["== %s (%s)" % (c, exe or "program unknown"), bt]
            lines.append("core dumped by %s (%s)" % (exe or "?", os.path.basename(c)))
        with open(os.path.join(d, "backtrace.txt"), "w") as f:
            f.write("\n".join(text))
        # the stacks in the campaign's own output too (a test's temporary
        # directory does not outlive it)
        if show:
            print("\n".join("    | " + l for l in "\n".join(text).splitlines()[:80]), flush=True)
        return lines

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

    def leftovers(self, d, mark, shm_before, check_tmp=True):
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
        if check_tmp and os.path.isdir(tmp) and os.listdir(tmp):
            left.append("TMPDIR entries %s" % sorted(os.listdir(tmp)))
        new = self.own_shm(d, set(os.listdir("/dev/shm")) - shm_before) if check_tmp else []
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
        (sm_segment.*, vader_segment.*) or elastic-mpirun's directory of an
        attempt's segments (elastic-mpirun.*) nobody maps or holds open any
        more, 2 s after the end."""
        evs = sorted(glob.glob(os.path.join(d, "events*")))
        prefixes = []
        if evs:
            for line in (l for ev in evs for l in open(ev, errors="replace")):
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
        mpi = ("sm_segment.", "vader_segment.", "elastic-mpirun.")
        return sorted(f for f in new if f.startswith(mpi) and os.path.exists("/dev/shm/" + f) and
                      f not in used)

    # ---- the emulated cluster (launcher srun) ----------------------------

    def cluster_up(self):
        a = self.a
        self.csh = os.path.abspath(a.cluster_sh or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "slurm-cluster.sh"))
        if os.geteuid() != 0:
            sys.exit("campaign: --launchers srun needs root (the emulated cluster's namespaces)")
        for c in ("slurmctld", "slurmd", "srun", "scontrol", "munged", "ip", "nsenter"):
            if not shutil.which(c):
                sys.exit("campaign: --launchers srun: %s not found (Debian: apt-get install "
                         "slurmctld slurmd slurm-client munge iproute2)" % c)
        if not os.access(self.csh, os.X_OK):
            sys.exit("campaign: %s not found (--cluster-sh)" % self.csh)
        self.secret = "campaign.%d.%d" % (os.getpid(), self.rng.randrange(1 << 30))
        self.cdir = tempfile.mkdtemp(prefix="esl-camp.", dir="/tmp")
        t0 = time.time()
        r = subprocess.run([self.csh, "up", self.cdir, "--nodes", str(a.nodes), "--cpus", "4",
                            "--mode", "netns"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=600)
        if r.returncode != 0:
            sys.exit("campaign: the emulated cluster did not come up (%s up %s):\n%s"
                     % (self.csh, self.cdir, r.stdout.decode(errors="replace")))
        atexit.register(self.cluster_down)
        env = dict(l.split("=", 1) for l in open(os.path.join(self.cdir, "cluster.env")).read()
                   .splitlines() if "=" in l)
        self.prefix = env["PREFIX"]
        print("cluster: %d nodes up in %.1f s (%s, namespaces %s-*)"
              % (a.nodes, time.time() - t0, self.cdir, self.prefix), flush=True)

    def cluster_down(self):
        if self.cdir:
            subprocess.run([self.csh, "down", self.cdir], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
            shutil.rmtree(self.cdir, ignore_errors=True)
            self.cdir = None

    def ctl(self, *cmd, timeout=60):
        try:
            r = subprocess.run([self.csh, "ctl", self.cdir] + list(cmd), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=timeout)
            return r.returncode, r.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired:
            return 124, ""

    def node_states(self):
        """{node: base state, upper case, without flags}"""
        rc, out = self.ctl("sinfo", "-h", "-N", "-o", "%N %T")
        st = {}
        for line in out.splitlines():
            f = line.split()
            if len(f) == 2:
                st[f[0]] = re.sub(r"[*~#!%$@^-]+$", "", f[1]).split("+")[0].upper()
        return st

    def wait_idle(self, nodes, timeout):
        deadline = time.time() + timeout
        while True:
            st = self.node_states()
            if all(st.get(n) in ("IDLE",) for n in nodes):
                return True, st
            if time.time() > deadline:
                return False, st
            time.sleep(0.5)

    def ns_pids(self, node):
        r = subprocess.run(["ip", "netns", "pids", "%s-%s" % (self.prefix, node)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return [int(x) for x in r.stdout.split()]

    def slurmd_alive(self, node):
        try:
            pid = int(open(os.path.join(self.cdir, "run", node + ".pid")).read().split()[0])
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, ValueError, IndexError):
            return False

    def link(self, k, state):
        return subprocess.run(["ip", "-n", self.prefix + "-ctl", "link", "set", "veth%d" % k,
                               state], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                              ).returncode

    def back(self, node):
        """A killed or cut node's slurmd running again, the node resumed in
        Slurm (t6021's back); True when it is idle again within 120 s."""
        if not self.slurmd_alive(node):
            subprocess.run([self.csh, "kill-node", self.cdir, node], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
            subprocess.run([self.csh, "start-node", self.cdir, node], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        deadline = time.time() + 120
        while time.time() < deadline:
            st = self.node_states().get(node)
            if st == "IDLE":
                return True
            if st in ("DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL"):
                self.ctl("scontrol", "update", "nodename=" + node, "state=resume")
            time.sleep(0.5)
        return False

    def ensure_idle(self):
        """Every node idle before a run (the previous step's node loss, a
        job still completing); repaired where needed.  The time is not the
        run's.  Returns a note when the cluster had to be repaired."""
        nodes = ["n%d" % k for k in range(1, self.a.nodes + 1)]
        ok, st = self.wait_idle(nodes, 60)
        if ok:
            return None
        rc, jobs = self.ctl("squeue", "-h", "-o", "%i")
        for j in jobs.split():
            self.ctl("scancel", j)
        for k, n in enumerate(nodes, 1):
            if st.get(n) != "IDLE":
                self.link(k, "up")
                self.back(n)
        ok, st2 = self.wait_idle(nodes, 120)
        note = "cluster repaired before the run (states %s -> %s)" % (st, st2)
        print("    " + note, flush=True)
        if not ok:
            sys.exit("campaign: the emulated cluster is not healthy: %s (kept in %s)"
                     % (st2, self.cdir))
        return note

    @staticmethod
    def wait_computing(p, d, tag, limit):
        """The time of the job's first progress line ("step N"), or None if
        the job ended (or limit passed) first."""
        f = os.path.join(d, tag + ".out")
        while time.time() < limit:
            try:
                if re.search(rb"^step \d+$", open(f, "rb").read(), re.M):
                    return time.time()
            except OSError:
                pass
            if p.poll() is not None:
                return None
            time.sleep(0.05)
        return None

    @staticmethod
    def wait_step(p, d, tag, step, limit):
        """Until the job's progress reaches step (a "step N" line with N >=
        step), it ends or the time limit passes (the line's printer may be
        gone); True when the job still runs."""
        f = os.path.join(d, tag + ".out")
        while time.time() < limit and p.poll() is None:
            try:
                got = re.findall(rb"^step (\d+)$", open(f, "rb").read(), re.M)
                if got and int(got[-1]) >= step:
                    break
            except OSError:
                pass
            time.sleep(0.02)
        return p.poll() is None

    @staticmethod
    def agreed(d, tag):
        """(the exit status the members agreed on, their summary line): from
        --status-file, or, where the file holds a fenced member's own
        result (it wrote last), the survivors' summary lines in srun's
        output.  (None, text) when there is none."""
        line = ""
        try:
            line = open(os.path.join(d, tag + ".status"), errors="replace").read().strip()
        except OSError:
            pass
        if line and "this node's result only" not in line:
            m = re.match(r"(\d+) (.*)", line)
            if m:
                return int(m.group(1)), m.group(2)
        sums = set()
        for ext in (".err", ".out"):
            try:
                text = open(os.path.join(d, tag + ext), "rb").read().decode(errors="replace")
            except OSError:
                continue
            for l in re.findall(r"^elastic-exec: (job slurm\.\S+: .*)$", text, re.M):
                if "this node's result only" not in l:
                    sums.add(l.strip())
        if len(sums) == 1:
            s = sums.pop()
            m = re.search(r"\(exit (\d+)\)$", s)
            if m:
                return int(m.group(1)), s
        return None, line or "; ".join(sorted(sums)) or "no summary"

    @staticmethod
    def jobs_of(d):
        ids = set()
        for f in glob.glob(os.path.join(d, "*.err")) + glob.glob(os.path.join(d, "*.status")):
            ids.update(re.findall(r"job slurm\.(\d+)\.", open(f, errors="replace").read()))
        return ids

    def leftovers_srun(self, d, mark, shm_before, tmp_before, lost=None):
        """(left behind, left on the killed node only): the killed node's
        TMPDIR and its ranks' segments have nobody alive on that node to
        remove them (on a real cluster, its reboot would)."""
        left = self.leftovers(d, mark, shm_before, check_tmp=False)
        on_lost = []
        for k in range(1, self.a.nodes + 1):
            t = os.path.join(d, "tmp", "n%d" % k)
            if os.path.isdir(t) and os.listdir(t):
                e = "n%d's TMPDIR %s" % (k, sorted(os.listdir(t)))
                (on_lost if lost == k else left).append(e)
        # Open MPI's segments of the run's nodes (sm_segment.<host>.<uid>.<job>.<rank>)
        # nobody maps or holds open any more, 2 s after the end, and still
        # there 10 s later (another emulated cluster on the machine has
        # nodes of the same names: its running job's segments go with it)
        new = set(os.listdir("/dev/shm")) - shm_before
        cand = [f for f in sorted(new) if re.match(r"(?:sm|vader)_segment\.n\d+\.", f)]
        if cand:
            time.sleep(2)
            used = self.in_use()
            cand = [f for f in cand if f not in used]
            if cand:
                time.sleep(10)
            for f in cand:
                m = re.match(r"(?:sm|vader)_segment\.(n\d+)\.", f)
                if m and os.path.exists("/dev/shm/" + f) and f not in self.in_use():
                    (on_lost if lost is not None and m.group(1) == "n%d" % lost
                     else left).append("/dev/shm " + f)
        for k in range(1, self.a.nodes + 1):
            procs = []
            for pid in self.ns_pids("n%d" % k):
                try:
                    comm = open("/proc/%d/comm" % pid).read().strip()
                except OSError:
                    continue
                if comm in ("heat2d", "elastic-exec"):
                    procs.append("%s %d" % (comm, pid))
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            if procs:
                left.append("n%d: %s" % (k, ", ".join(procs)))
        jobs = self.jobs_of(d)
        # (a node directory is elastic-<run id>-*, a PMIx session
        # directory elastic-pmix.*: both belong in the node's TMPDIR)
        new = sorted(f for f in set(glob.glob("/tmp/elastic-*")) - tmp_before
                     if any(".slurm.%s." % j in f for j in jobs) or
                     os.path.basename(f).startswith("elastic-%s-" % mark))
        if new:
            left.append("/tmp %s" % new)
        return left, on_lost

    def one_srun(self, i, kind):
        a, rng = self.a, self.rng
        nn = a.nodes
        ref, tref = self.reference("srun", nn)
        tcomp = self.tcomp[("srun", nn)]
        rid = "c%d-%d" % (os.getpid(), i)
        d = os.path.join(self.root, "%03d-srun-%s" % (i, kind))
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        mark = rid
        log = []
        note = self.ensure_idle()
        if note:
            log.append(note)
        shm_before = set(os.listdir("/dev/shm"))
        tmp_before = set(glob.glob("/tmp/elastic-*"))
        want = {"kill": {0, 76}, "node": {0}, "cut": {0}, "term": {75}}[kind]
        victim = None
        self.killed = set()
        t0 = time.time()
        p = self.start("srun", nn, rid, d, mark, "run")
        tc = self.wait_computing(p, d, "run", t0 + a.timeout)
        if tc is None:
            log.append("the job never computed (no progress line)")
        elif kind == "kill":
            # at random steps (the machine's load changes a run's speed
            # several times over: steps, not seconds); a kill whose step's
            # line does not come (its printer was the first victim) falls
            # due by the reference's time
            # Two kills come at two random steps or (one time in two) at
            # once: a rank and its buddy lost together end the job with 76
            # (nothing in memory holds their block), and the rerun must
            # resume from L3
            steps = sorted(rng.randrange(5, 90) * a.steps // 100 for _ in range(rng.randint(1, 2)))
            if len(steps) == 2 and rng.random() < 0.5:
                steps[1] = steps[0]
            if (len(steps) == 2 and steps[0] == steps[1] and not a.spares and
                    rng.random() < a.buddy_pairs):
                # a rank and the rank holding its copy (layout.c's buddies:
                # round-robin over the nodes), at once: nothing holds its block
                ppn = a.nproc_per_node
                order = [k * ppn + j for j in range(ppn) for k in range(nn)]
                r0 = rng.randrange(nn * ppn)
                pair = [r0, order[(order.index(r0) + 1) % len(order)]]
                if not self.wait_step(p, d, "run", steps[0], tc + 2 * tcomp * steps[0] / a.steps + 5):
                    log.append("job ended before step %d" % steps[0])
                else:
                    live = self.ranks(mark)
                    for r in pair:
                        if r in live:
                            try:
                                os.kill(live[r], signal.SIGKILL)
                                log.append("step %d, %.2f s: SIGKILL rank %d (pid %d)%s" % (
                                    steps[0], time.time() - tc, r, live[r],
                                    " (rank %d's buddy)" % pair[0] if r == pair[1] else ""))
                            except OSError:
                                pass
                steps = []
            for s in steps:
                if not self.wait_step(p, d, "run", s, tc + 2 * tcomp * s / a.steps + 5):
                    log.append("job ended before step %d" % s)
                    break
                n0 = len(log)
                self.inject_kills(p, mark, time.time(), [0], log, avoid=self.killed)
                if len(log) > n0:
                    log[-1] = "step %d, %s" % (s, log[-1])
        else:
            s = rng.randrange(5, 86) * a.steps // 100
            k = rng.randrange(1, nn + 1)
            if not self.wait_step(p, d, "run", s, tc + 2 * tcomp * s / a.steps + 5):
                log.append("job ended before step %d" % s)
                if kind == "term":
                    want = {0}
            elif kind == "node":
                victim = k
                r = subprocess.run([self.csh, "kill-node", self.cdir, "n%d" % k],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
                log.append("step %d, %.2f s: kill-node n%d (rc %d)" % (s, time.time() - tc, k,
                                                                       r.returncode))
            elif kind == "cut":
                victim = k
                rc = self.link(k, "down")
                log.append("step %d, %.2f s: veth%d down (n%d cut, rc %d)" % (s, time.time() - tc,
                                                                             k, k, rc))
            elif kind == "term":
                rc, jobs = self.ctl("squeue", "-h", "-o", "%i")
                job = (jobs.split() or ["none"])[0]
                rc, _ = self.ctl("scancel", "-s", "USR1", job)
                log.append("step %d, %.2f s: scancel -s USR1 %s (rc %d)" % (s, time.time() - tc,
                                                                           job, rc))
        rc, secs = self.wait(p, t0, mark)
        got, summary = self.agreed(d, "run")
        ck = self.checksum(d, "run")
        res = {"run": i, "launcher": "srun", "kind": kind, "schedule": log, "exit": got,
               "srun_exit": rc, "summary": summary, "seconds": round(secs, 2), "dir": d,
               "nodes": nn, "spares": a.spares}
        problems = []
        if any(b"rank outside the valid range of the communicator" in
               open(os.path.join(d, "run" + ext), "rb").read() for ext in (".out", ".err")):
            problems.append("context id reused (Open MPI aborted a rank)")
        if rc is None:
            problems.append("hang")
        elif got is None:
            problems.append("no agreed result (srun exit %d; %s)" % (rc, summary))
        elif got not in want:
            problems.append("unexplained exit %d (srun exit %d)" % (got, rc))
        elif got == 0 and ck != ref:
            problems.append("wrong result (checksum %s, want %s)" % (ck or "none", ref))
        elif kind in ("kill", "term") and rc != got:
            # no node lost: srun's status is the job's
            problems.append("unexplained exit: srun %d, the members agreed on %d" % (rc, got))
        if kind == "cut" and victim and rc is not None and "(n%d)" % victim in summary:
            fenced = False
            for ev in glob.glob(os.path.join(d, "events.run.*")):
                fenced |= any('"event":"self_fence"' in l and '"host":"n%d"' % victim in l
                              for l in open(ev, errors="replace"))
            res["self_fenced"] = fenced
            if not fenced:
                problems.append("the cut node n%d's member did not fence itself" % victim)
        if victim:
            # after the run: the node back in the cluster (t6021's back)
            if kind == "cut":
                self.link(victim, "up")
            if not self.back("n%d" % victim):
                log.append("n%d did not come back idle within 120 s" % victim)
        if rc is not None and got in (75, 76) and not problems:
            saved = any(f.endswith(".h5") for _, _, fs in os.walk(os.path.join(d, "snap"))
                        for f in fs)
            n2 = rng.choice([k for k in range(2, nn + 1) if k != nn] or [nn])
            res["resume_nodes"] = n2
            note = self.ensure_idle()
            if note:
                log.append(note)
            t1 = time.time()
            p2 = self.start("srun", n2, rid, d, mark, "rerun", env_extra={"ELASTIC_RESUME": "1"})
            rc2, secs2 = self.wait(p2, t1, mark)
            got2, sum2 = self.agreed(d, "rerun")
            ck2 = self.checksum(d, "rerun")
            res.update({"rerun_exit": got2, "rerun_srun_exit": rc2,
                        "rerun_seconds": round(secs2, 2)})
            out2 = open(os.path.join(d, "rerun.out"), "rb").read()
            if rc2 is None:
                problems.append("rerun hang")
            elif got2 != 0 or rc2 != 0:
                problems.append("rerun: unexplained exit %s (srun exit %d)" % (got2, rc2))
            elif ck2 != ref:
                problems.append("rerun: wrong result (checksum %s, want %s)" % (ck2 or "none", ref))
            elif b"resumed from step" not in out2 and saved:
                problems.append("rerun did not resume")
            elif b"resumed from step" not in out2:
                res["resumed_step"] = None
            else:
                res["resumed_step"] = int(re.findall(rb"resumed from step (\d+)", out2)[-1])
        res["reshards"] = [m.decode() for m in re.findall(
            rb"^resharded at step \d+: world (\d+ -> \d+)$",
            open(os.path.join(d, "run.out"), "rb").read(), re.M)]
        res["restarts"], res["lost_in_place"] = None, None
        left, on_lost = self.leftovers_srun(d, mark, shm_before, tmp_before,
                                            victim if kind == "node" else None)
        if left:
            problems.append("left behind: " + "; ".join(left))
        if on_lost:
            res["left_on_killed_node"] = on_lost
            log.append("left on the killed node n%d: %s" % (victim, "; ".join(on_lost)))
        res["problems"] = problems
        res["ok"] = not problems
        lost = re.search(r"nodes?; (.*?);", summary)
        print("%3d %-6s %-6s exit %-4s %5.1f s %s (srun %s; %s; %s)%s" % (
            i, "srun", kind, got, secs, "ok" if not problems else "FAIL: " + "; ".join(problems),
            rc, lost.group(1) if lost else summary, ", ".join(res["reshards"]) or "no reshard",
            "" if not log else "  [" + "; ".join(log) + "]"), flush=True)
        if not problems:
            shutil.rmtree(d, ignore_errors=True)
        return res

    # ---- faults ----------------------------------------------------------

    def reference(self, launcher, n):
        key = (launcher, n)
        if key not in self.ref:
            d = os.path.join(self.root, "ref-%s-%d" % key)
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            mark = "ref-%d-%s-%d" % (os.getpid(), launcher, n)
            if launcher == "srun":
                self.ensure_idle()
            t0 = time.time()
            p = self.start(launcher, n, "ref", d, mark, "run")
            tc = self.wait_computing(p, d, "run", t0 + self.a.timeout)
            rc, secs = self.wait(p, t0, mark)
            if launcher == "srun":
                got, summary = self.agreed(d, "run")
                if got != 0:
                    rc = got if rc == 0 else rc
            # the computation's time (from the first progress line): the
            # srun kinds' faults fall in it
            self.tcomp[key] = (t0 + secs - tc) if tc else secs
            ck = self.checksum(d, "run")
            if rc != 0 or not ck:
                sys.exit("campaign: the failure-free %s run at %d ranks failed (exit %s); see %s"
                         % (launcher, n, rc, d))
            self.ref[key] = (ck, secs)
            print("reference %s n=%d: checksum %s in %.1f s (computing %.1f s)"
                  % (launcher, n, ck, secs, self.tcomp[key]), flush=True)
            shutil.rmtree(d, ignore_errors=True)
        return self.ref[key]

    def inject_kills(self, p, mark, t0, times, log, first=None, avoid=None):
        """SIGKILL a random live rank at each of the times (seconds after t0);
        rank first (if not None) at the first time; not a pid in avoid (a
        set: killed ones are added; one killed a moment ago may still be
        listed)."""
        for k, t in enumerate(times):
            while time.time() - t0 < t and p.poll() is None:
                time.sleep(0.01)
            if p.poll() is not None:
                log.append("job ended before %.2f s" % t)
                return
            live = {r: pid for r, pid in self.ranks(mark).items()
                    if avoid is None or pid not in avoid}
            if not live:
                log.append("%.2f s: no rank alive to kill" % (time.time() - t0))
                continue
            r = first if k == 0 and first in live else self.rng.choice(sorted(live))
            try:
                os.kill(live[r], signal.SIGKILL)
                if avoid is not None:
                    avoid.add(live[r])
                log.append("%.2f s: SIGKILL rank %d (pid %d)" % (time.time() - t0, r, live[r]))
            except OSError:
                pass

    def one(self, i, launcher, kind):
        if launcher == "srun":
            return self.one_srun(i, kind)
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
            only_damaged = False
            if kind == "damage":
                msg, damaged_step = self.damage_newest(os.path.join(d, "snap"))
                log.append(msg)
                # the damaged file the run's only one: nothing valid to
                # resume from, and a restart must not silently start over
                only_damaged = damaged_step is not None and sum(
                    f.endswith(".h5") for _, _, fs in os.walk(os.path.join(d, "snap"))
                    for f in fs) == 1
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
            err2 = open(os.path.join(d, "rerun.err"), "rb").read()
            if rc2 is None:
                problems.append("rerun hang")
            elif only_damaged and rc2 != 0 and b"no valid L3 snapshot" in err2 and \
                    b"starting fresh" not in err2:
                # refused, naming the damaged file (unless the damage hit
                # bytes no reader uses: then it resumed, below)
                res["damage_detected"] = True
                res["damage_refused"] = True
                res["resumed_step"] = None
                log.append("rerun refused: the only snapshot is damaged (exit %d)" % rc2)
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
        # a crash's stacks: printed when the run went wrong; a core left by a
        # run judged right (a contained crash, e.g. prterun's abort after the
        # ranks suspended: doc/reliability.md) is named in its schedule
        cores = self.backtraces(d, show=bool(problems or left))
        if problems or left:
            problems += cores
        else:
            log += cores
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
        evs = sorted(glob.glob(os.path.join(d, "events*")))
        if not evs:
            return None, None
        restarts = lost = 0
        for line in (l for ev in evs for l in open(ev, errors="replace")):
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
                if (launcher == "srun") != (kind in ("node", "cut")) and \
                        not (launcher == "srun" and kind in ("kill", "term")):
                    continue  # node, cut: srun only; srun: kill, node, cut, term
                plan.append((launcher, kind))
        if not plan:
            sys.exit("campaign: no kind of --kinds %s applies to --launchers %s (srun: kill, "
                     "node, cut, term; exec, mpirun: kill, rank0, hook, stop (exec), term, "
                     "damage)" % (",".join(self.a.kinds), ",".join(self.a.launchers)))
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
                                    "other": 0, "restarted": 0})
            s["runs"] += 1
            s["restarted"] += bool(r.get("restarts"))
            s["ok"] += r["ok"]
            for p in r["problems"]:
                s["wrong"] += "wrong result" in p
                s["hang"] += "hang" in p
                s["exit"] += "unexplained exit" in p
                s["left"] += p.startswith("left behind")
                # (a cut node that did not fence itself, no agreed result,
                # a reused context id, a rerun that did not resume)
                s["other"] += not any(x in p for x in ("wrong result", "hang", "unexplained exit",
                                                       "left behind"))
        ranks = "%d ranks" % self.a.ranks
        if "srun" in self.a.launchers:
            ranks = ("%d ranks (elastic-exec, elastic-mpirun), " % self.a.ranks
                     if len(self.a.launchers) > 1 else "") + "%d nodes x %d ranks (srun)" % (
                         self.a.nodes, self.a.nproc_per_node)
        lines = ["# Fault campaign", "",
                 "seed %d; heat2d %dx%d, %d steps%s, %s, snapshot every %d, L3 every %d"
                 % (self.seed, self.a.nx, self.a.nx, self.a.steps,
                    ", --sleep %d" % self.a.sleep if self.a.sleep else "", ranks,
                    self.a.snapshot_period, self.a.persist_period), "",
                 "| launcher | fault | runs | right | wrong result | hang | unexplained exit "
                 "| left behind | other | needed a group restart |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        tot = {"runs": 0, "ok": 0, "wrong": 0, "hang": 0, "exit": 0, "left": 0, "other": 0,
               "restarted": 0}
        for (l, k), s in sorted(rows.items()):
            lines.append("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d |"
                         % (l, k, s["runs"], s["ok"], s["wrong"], s["hang"], s["exit"], s["left"],
                            s["other"], s["restarted"]))
            for x in tot:
                tot[x] += s[x]
        lines.append("| all | all | %d | %d | %d | %d | %d | %d | %d | %d |"
                     % (tot["runs"], tot["ok"], tot["wrong"], tot["hang"], tot["exit"], tot["left"],
                        tot["other"], tot["restarted"]))
        sr = [r for r in self.runs if r["launcher"] == "srun"]
        if sr:
            lines += ["", "srun (mesh mode, %d nodes x %d ranks%s, emulated cluster): "
                      "%d runs ended 76 (a rank and its buddy lost) and %d of them resumed "
                      "right; %d preempted (75) and %d of them resumed right on another "
                      "number of nodes; srun's own exit status differed from the members' "
                      "agreed one in %d of %d node/cut runs (Slurm's after a node loss); "
                      "%d cut nodes' members fenced themselves; %d node runs left files "
                      "on the killed node only (its TMPDIR, its ranks' segments: nothing "
                      "alive there to remove them)"
                      % (self.a.nodes, self.a.nproc_per_node,
                         ", %d spares" % self.a.spares if self.a.spares else "",
                         sum(r["exit"] == 76 for r in sr),
                         sum(r["exit"] == 76 and r["ok"] for r in sr),
                         sum(r["exit"] == 75 for r in sr),
                         sum(r["exit"] == 75 and r["ok"] for r in sr),
                         sum(r["kind"] in ("node", "cut") and r["srun_exit"] is not None and
                             r["srun_exit"] != r["exit"] for r in sr),
                         sum(r["kind"] in ("node", "cut") for r in sr),
                         sum(bool(r.get("self_fenced")) for r in sr),
                         sum(bool(r.get("left_on_killed_node")) for r in sr))]
        dmg = [r for r in self.runs if "damage_detected" in r]
        if dmg:
            ref = sum(bool(r.get("damage_refused")) for r in dmg)
            lines += ["", "Damaged newest snapshot: %d of %d reruns resumed from an older one, "
                      "%d refused to start (the damaged file was the run's only one; "
                      "the others' damage hit bytes no reader uses, and they resumed "
                      "correctly from the damaged file)"
                      % (sum(r["damage_detected"] for r in dmg) - ref, len(dmg), ref)]
        bad = [r for r in self.runs if not r["ok"]]
        if bad:
            lines += ["", "Runs that went wrong (their directories are kept):", ""]
            for r in bad:
                lines.append("- run %d (%s, %s): %s; schedule: %s; %s" % (
                    r["run"], r["launcher"], r["kind"], "; ".join(r["problems"]),
                    "; ".join(r["schedule"]) or "none", r["dir"]))
                # the launcher's last words: a test's temporary directory does
                # not outlive it, and CI keeps only this output
                for tag in ("run", "rerun"):
                    try:
                        with open(os.path.join(r["dir"], tag + ".err"), "rb") as f:
                            tail = f.read().decode("utf-8", "replace").splitlines()[-12:]
                    except OSError:
                        continue
                    lines += ["    %s.err: %s" % (tag, l) for l in tail]
        text = "\n".join(lines) + "\n"
        open(os.path.join(self.root, "report.md"), "w").write(text)
        print(text, end="")
        return 0 if not bad else 1


def main():
    # a SIGTERM or SIGHUP ends the campaign through sys.exit: the emulated
    # cluster's teardown (atexit) runs
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    a = parse_args()
    sys.exit(Campaign(a).run())


if __name__ == "__main__":
    main()
