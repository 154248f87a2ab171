#!/usr/bin/python3
"""torch_timer.py - torchelastic's own FileTimerClient against elastic-exec.

    torch_timer.py SECONDS

Arms a watchdog with torch.distributed.elastic.timer.expires(after=SECONDS)
through the FIFO named by TORCHELASTIC_TIMER_FILE; on the first attempt it
then hangs (the agent must kill it), on later attempts it finishes in time.
"""
import os
import sys
import time

from torch.distributed.elastic.timer import FileTimerClient, configure, expires

configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
with expires(after=float(sys.argv[1]), scope="train_step"):
    if attempt == 0:
        time.sleep(600)
print("attempt %d finished in time" % attempt, flush=True)
