"""How long a sandbox takes to start, and what a fresh interpreter's first activity window costs.

1. `--windows N`: N fresh interpreters, each timing `import torch, triton`, then its first
   ActivityRecorder window (the sandbox's warm-up opens one before any candidate code), and saying
   whether that window imported torch._inductor.
2. `--sandboxes N`: N sandboxes started one after another the way the judge starts them
   (SandboxHandle, default containment plan), each one's seconds from spawn to its ready message.

    python benchmarks/probes/sandbox_start.py [--device cpu|cuda] [--windows 3] [--sandboxes 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# Run in a fresh interpreter: one JSON line with the seconds of each step.
FIRST_WINDOW = """
import json, sys, time
t0 = time.perf_counter()
import torch, triton
t1 = time.perf_counter()
from kernelsmith.evaluate.measuring.activity import ActivityRecorder
t2 = time.perf_counter()
inductor_before = "torch._inductor" in sys.modules
with ActivityRecorder(sys.argv[1]) as rec:
    torch.ones(2, device=sys.argv[1]).add_(1)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "activity_import_s": t2 - t1, "first_window_s": t3 - t2,
    "inductor_before": inductor_before, "inductor_after": "torch._inductor" in sys.modules,
    "ops": sum(rec.activity.ops.values()), "kernels": sum(rec.activity.kernels.values()),
    "tampered": rec.activity.tampered}))
"""


def first_windows(device: str, n: int) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    windows = []
    for i in range(n):
        out = subprocess.run(
            [sys.executable, "-c", FIRST_WINDOW, device], env=env, cwd=REPO, capture_output=True, text=True, check=True
        ).stdout
        row = json.loads(out.strip().splitlines()[-1])
        windows.append(row["first_window_s"])
        print(
            f"interpreter {i + 1}: import torch, triton {row['import_s']:.2f} s; first window "
            f"{row['first_window_s']:.2f} s; torch._inductor imported by it: "
            f"{row['inductor_after'] and not row['inductor_before']}; {row['ops']} aten ops, "
            f"{row['kernels']} kernels, tampered {row['tampered']}",
            flush=True,
        )
    print(f"first window: median {statistics.median(windows):.2f} s of {n}", flush=True)


def sandbox_starts(device: str, n: int) -> None:
    from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle

    logdir = Path(tempfile.mkdtemp(prefix="ks-probe-start-"))
    starts = []
    for i in range(n):
        t0 = time.monotonic()
        sb = SandboxHandle(device, logdir)
        try:
            sb.wait_ready(t0 + 300)
            starts.append(time.monotonic() - t0)
            layers = ",".join(sb.containment().on) or "none"
            print(f"sandbox {i + 1}: ready in {starts[-1]:.2f} s (containment: {layers})", flush=True)
        finally:
            sb.close()
    print(
        f"sandbox start: median {statistics.median(starts):.2f} s of {n}, range {min(starts):.2f}-{max(starts):.2f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--windows", type=int, default=3, help="fresh interpreters timing their first window")
    ap.add_argument("--sandboxes", type=int, default=5, help="sandboxes started one after another")
    args = ap.parse_args()
    import torch

    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, torch {torch.__version__}, {os.cpu_count()} CPUs", flush=True)
    if args.windows:
        first_windows(args.device, args.windows)
    if args.sandboxes:
        sandbox_starts(args.device, args.sandboxes)


if __name__ == "__main__":
    main()
