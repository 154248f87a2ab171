#!/usr/bin/python3
"""torch_worker.py - an unmodified torchrun-contract program for elastic-exec's tests.

    torch_worker.py DIR CRASH_RANK

Joins the gloo process group through env:// (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), all-reduces a tensor, and on the first attempt
(TORCHELASTIC_RESTART_COUNT=0) rank CRASH_RANK dies once every rank is
ready.  Writes epoch timestamps to DIR: start.<attempt>.<rank> (process
start, before importing torch), ready.<attempt>.<rank> (after
init_process_group and a barrier), crash.<attempt>.<rank>, and
done.<attempt>.<rank> with the all-reduced sum.
"""
import os
import sys
import time

T_START = time.time()


def stamp(directory, what, attempt, rank, value=None):
    path = os.path.join(directory, "%s.%d.%d" % (what, attempt, rank))
    with open(path + ".tmp", "w") as f:
        f.write("%.6f\n" % (T_START if value is None else value))
    os.rename(path + ".tmp", path)


def main():
    directory, crash_rank = sys.argv[1], int(sys.argv[2])
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    stamp(directory, "start", attempt, rank)

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    dist.barrier()
    stamp(directory, "ready", attempt, rank, time.time())
    if attempt == 0 and rank == crash_rank:
        dist.barrier()  # wait: everyone is ready
        stamp(directory, "crash", attempt, rank, time.time())
        os._exit(13)
    if attempt == 0:
        dist.barrier()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    stamp(directory, "done", attempt, rank, t.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
