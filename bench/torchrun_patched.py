#!/usr/bin/python3
"""torchrun_patched.py - Debian's torchrun (PyTorch 1.13) with one fix.

Under Python 3.11, torch 1.13's Std.from_str cannot map "0".."3" to Std
(IntFlag iteration skips NONE and ALL), so torchrun fails on its own
--redirects default.  This replaces that one function at start-up and then
runs torch.distributed.run.main() unchanged, with the same arguments.
"""
import re
import sys

import torch.distributed.elastic.multiprocessing.api as api


def from_str(vm):
    if re.fullmatch(r"[0-3]", vm):
        return api.Std(int(vm))
    if re.fullmatch(r"(\d+:[0-3],)*\d+:[0-3]", vm):
        return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError("%s does not match a value or a mapping" % vm)


api.Std.from_str = staticmethod(from_str)

from torch.distributed.run import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    sys.exit(main())
