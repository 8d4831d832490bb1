"""Probe (H200): the counters stage (ncu_stage.profile) on KernelBench 19_ReLU and the bundled
softmax, with the profiled process's containment layers all on, then one at a time off, to see
which of them Nsight Compute's injection tolerates. Prints one line per run.

    python3 benchmarks/probes/ncu_stage.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kernelsmith.evaluate.profiling import ncu_stage  # noqa: E402

KB = REPO / "benchmarks/kernelbench"
CASES = {
    "19_ReLU": (KB / "problems/level1/19_ReLU.py", KB / "candidates/level1/19_ReLU.py"),
    "softmax": (REPO / "examples/softmax/task.py", REPO / "examples/softmax/triton_softmax.py"),
}
VARIANTS = ["procmask,landlock,seccomp", "procmask,landlock", "procmask,seccomp", "landlock,seccomp", ""]


def main() -> None:
    for variant in VARIANTS:
        os.environ["KERNELSMITH_SANDBOX_LAYERS"] = variant
        for name, (task, cand) in CASES.items():
            if variant not in (VARIANTS[0], VARIANTS[1]) and name != "softmax":
                continue
            t0 = time.monotonic()
            rep = ncu_stage.profile(task.read_text(), cand.read_text(), timeout=150)
            k = rep.heaviest
            extra = ""
            if k is not None:
                moved = (k.dram_read_bytes or 0) + (k.dram_write_bytes or 0)
                extra = f" | {k.name[:30]} x{k.launches} {k.duration_ns} ns, DRAM {moved:.4g} B, {k.dram_gbps} GB/s"
            print(
                f"layers [{variant}] {name}: {rep.status} in {time.monotonic() - t0:.1f}s "
                f"({rep.message}) contained={rep.contained}{extra} | {rep.summary()}",
                flush=True,
            )


if __name__ == "__main__":
    main()
