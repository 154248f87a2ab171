#!/usr/bin/env python3
"""ddp_train.py - a deterministic DistributedDataParallel training (gloo, CPU)
with torchelastic's checkpoint pattern, for elastic-exec's multi-node tests.

Usage: ddp_train.py --steps N --ckpt DIR [--save-every K] [--step-delay S]
                    [--progress FILE]

Environment (set by elastic-exec or torchrun): RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, TORCHELASTIC_RESTART_COUNT.

The result does not depend on the world size: every step trains on one
global batch of 24 samples drawn from the step's own seed, each rank takes
an equal share (24 / WORLD_SIZE, which must divide 24) and DDP averages the
gradients, which is then the gradient of the whole batch's mean loss.  So a
run that lost a node and went on at a smaller size ends with the same
parameters (to float rounding) as one that never failed.

Rank 0 saves {step, model, optimizer} to DIR/ckpt.pt every K steps (written
to a temporary file, then renamed); every rank loads it at start.  Rank 0
prints "start world=W step=S restart=R" at each start and, at the end,
"final steps=N world=W checksum=C" (C: the sum of the parameters, %.6f);
with --progress it appends "begin world W t=UNIXTIME" (the process's start,
before torch is imported) and "init world W t=UNIXTIME" (init_process_group
done) at each start, and "step S world W t=UNIXTIME" after each step.
"""
import time

T_BEGIN = time.time()  # before torch is imported

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH = 24


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 8, generator=g)
    y = x.sum(dim=1, keepdim=True).sin()
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--save-every", type=int, default=5)
    ap.add_argument("--step-delay", type=float, default=0.0)
    ap.add_argument("--progress")
    a = ap.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
    if GLOBAL_BATCH % world:
        print(f"ddp_train: world size {world} does not divide {GLOBAL_BATCH}",
              file=sys.stderr)
        return 2
    import datetime
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    if rank == 0 and a.progress:
        with open(a.progress, "a") as f:
            f.write(f"begin world {world} t={T_BEGIN:.6f}\n")
            f.write(f"init world {world} t={time.time():.6f}\n")

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    path = os.path.join(a.ckpt, "ckpt.pt")
    step = 0
    if os.path.exists(path):
        st = torch.load(path)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step = st["step"]
    ddp = DDP(model)
    if rank == 0:
        print(f"start world={world} step={step} restart={restart}", flush=True)
    share = GLOBAL_BATCH // world
    while step < a.steps:
        x, y = batch(step)
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        step += 1
        if rank == 0 and step % a.save_every == 0:
            tmp = path + ".tmp"
            torch.save({"step": step, "model": model.state_dict(),
                        "opt": opt.state_dict()}, tmp)
            os.replace(tmp, path)
        if rank == 0 and a.progress:
            with open(a.progress, "a") as f:
                f.write(f"step {step} world {world} t={time.time():.6f}\n")
        if a.step_delay:
            time.sleep(a.step_delay)
    dist.barrier()
    if rank == 0:
        c = sum(p.detach().double().sum().item() for p in model.parameters())
        print(f"final steps={step} world={world} checksum={c:.6f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
