#!/usr/bin/python3
"""check_events.py FILE - validate libelastic's JSON event lines.

Prints one summary line per event:
    KIND STEP OLD->NEW failed=A,B spares=C attempts=N   (reshard_down, reshard_up, fatal,
                                                          grow_failed)
      ... new=D,E                                         (a growth into new processes:
                                                           its new ranks; then t_spawn_ms
                                                           and t_merge_ms are required)
    persist STEP size=N                                   (an L3 snapshot written)
    persist_failed STEP size=N                            (an L3 write failed)
    persist_skipped STEP size=N                           (one was in flight)
    suspend STEP size=N reason=R file=yes|no              (suspended, with its L3 file)
    resume STEP OLD->NEW                                  (resumed from L3)
    completed STEP size=N                                 (the job's end, agreed)
or "BAD: line N: why" for a line that is not a valid event.
"""
import json
import sys

REQUIRED = {
    "event": str, "step": int, "old_size": int, "new_size": int, "failed": list,
    "spares_used": list, "attempts": int, "handler_tries": int, "t_detect_ms": (int, float),
    "t_revoke_agree_ms": (int, float), "t_shrink_ms": (int, float), "t_restore_ms": (int, float),
    "t_handler_ms": (int, float), "t_protect_ms": (int, float), "t_total_ms": (int, float),
    "rank": int, "time": str,
}

NUM = (int, float)
L3_REQUIRED = {
    "persist": {"step": int, "world_size": int, "bytes": int, "t_write_ms": NUM, "file": str},
    "persist_failed": {"step": int, "world_size": int, "error": str},
    "persist_skipped": {"step": int, "world_size": int, "reason": str},
    "suspend": {"step": int, "world_size": int, "reason": str, "file": (str, type(None))},
    "resume": {"step": int, "old_size": int, "new_size": int, "t_restore_ms": NUM, "file": str},
    "completed": {"step": int, "world_size": int},
}


def l3_event(n, e):
    req = dict(L3_REQUIRED[e["event"]], rank=int, time=str)
    bad = [k for k, t in req.items() if not isinstance(e.get(k), t) or (k in e and isinstance(e[k], bool))]
    if bad:
        return "BAD: line %d: missing or mistyped %s" % (n, ",".join(bad))
    k = e["event"]
    if k == "resume":
        return "resume %d %d->%d" % (e["step"], e["old_size"], e["new_size"])
    if k == "suspend":
        return "suspend %d size=%d reason=%s file=%s" % (
            e["step"], e["world_size"], e["reason"], "yes" if e["file"] else "no")
    return "%s %d size=%d" % (k, e["step"], e["world_size"])


def main(path):
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                e = json.loads(line)
            except ValueError as x:
                print("BAD: line %d: not JSON (%s)" % (n, x))
                continue
            if e.get("event") in L3_REQUIRED:
                print(l3_event(n, e))
                continue
            bad = [k for k, t in REQUIRED.items() if not isinstance(e.get(k), t)]
            if bad:
                print("BAD: line %d: missing or mistyped %s" % (n, ",".join(bad)))
                continue
            if e["event"] not in ("reshard_down", "reshard_up", "fatal", "grow_failed"):
                print("BAD: line %d: unknown event %s" % (n, e["event"]))
                continue
            if e["event"] in ("fatal", "grow_failed") and not isinstance(e.get("error"), str):
                print("BAD: line %d: %s without error" % (n, e["event"]))
                continue
            new = ""
            if "new_ranks" in e:
                if not isinstance(e["new_ranks"], list) or not all(
                        isinstance(e.get(k), NUM) and e[k] >= 0 for k in ("t_spawn_ms", "t_merge_ms")):
                    print("BAD: line %d: new_ranks without t_spawn_ms and t_merge_ms" % n)
                    continue
                new = " new=" + ",".join(str(r) for r in e["new_ranks"])
            if min(e[k] for k in REQUIRED if k.startswith("t_")) < 0:
                print("BAD: line %d: negative duration" % n)
                continue
            if not e["time"].endswith("Z") or "T" not in e["time"]:
                print("BAD: line %d: time %s is not ISO 8601 UTC" % (n, e["time"]))
                continue
            print("%s %d %d->%d failed=%s spares=%s attempts=%d%s" % (
                e["event"], e["step"], e["old_size"], e["new_size"],
                ",".join(str(r) for r in e["failed"]),
                ",".join(str(r) for r in e["spares_used"]), e["attempts"], new))

if __name__ == "__main__":
    main(sys.argv[1])
