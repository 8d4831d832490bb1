"""Probe (CUDA): where the device memory goes during one evaluation of a multi-GB task.

Runs one candidate with KERNELSMITH_MEMORY_LOG=1 and prints the judge's memory lines (its allocated
and reserved memory and the GPU's free memory at each stage), then the verdict. Written for
KernelBench's 36_RMSNorm_ (7.5 GB a tensor), which ran out of memory on an 80 GB H100 (2026-12-05).

    python benchmarks/probe_judge_memory.py [--task T --candidate C]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
KB = ROOT / "benchmarks/kernelbench"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", type=Path, default=KB / "problems/level1/36_RMSNorm_.py")
    ap.add_argument("--candidate", type=Path, default=KB / "candidates/level1/36_RMSNorm_.py")
    args = ap.parse_args()
    os.environ["KERNELSMITH_MEMORY_LOG"] = "1"
    os.environ["KERNELSMITH_CACHE_DIR"] = cache = tempfile.mkdtemp(prefix="ks-mem-")
    from kernelsmith.evaluate import EvalOptions, EvalPool
    from kernelsmith.task import Task

    opts = EvalOptions(device="cuda", timeout=300, trials=2, compile_baseline=False)
    with EvalPool(device="cuda", workers=1, options=opts) as pool:
        r = pool.evaluate(Task.from_file(args.task), args.candidate.read_text(), opts)
        for log in sorted(Path(cache, "logs").glob("judge-*.log")):  # removed when the pool closes
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith("memory at"):
                    print(line)
    print(f"verdict: {r.status.value} infra_error={r.infra_error} speedup={r.speedup}")
    print((r.error or "")[:1500])


if __name__ == "__main__":
    main()
