"""Seconds to start a CPU sandbox (spawn, imports, warm-up, containment) per containment layer set.

python benchmarks/containment_start.py
"""

import os
import statistics
import tempfile
import time
from pathlib import Path

from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle

res = {}
for layers in ["none", "bwrap", "pidns,landlock,seccomp", "bwrap,landlock,seccomp"]:
    if layers == "none":
        os.environ["KERNELSMITH_SANDBOX"] = "none"
        os.environ.pop("KERNELSMITH_SANDBOX_LAYERS", None)
    else:
        os.environ["KERNELSMITH_SANDBOX"] = "auto"
        os.environ["KERNELSMITH_SANDBOX_LAYERS"] = layers
    ts = []
    for _ in range(4):
        t = time.monotonic()
        sb = SandboxHandle("cpu", Path(tempfile.mkdtemp()))
        sb.wait_ready(time.monotonic() + 120)
        ts.append(time.monotonic() - t)
        sb.close()
    res[layers] = [round(x, 2) for x in ts]
    print(layers, res[layers], "median", round(statistics.median(ts), 2), flush=True)
