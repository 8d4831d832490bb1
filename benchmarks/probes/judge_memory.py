"""Probe (CUDA): where the device memory goes during one evaluation of a multi-GB task.

Runs one candidate with KERNELSMITH_MEMORY_LOG=1 and prints the judge's memory lines (its allocated
and reserved memory and the GPU's free memory at each stage, with the time and the judge's pid), then
the verdict. Meanwhile a thread polls `nvidia-smi` every 0.2 s for each process's device memory and
prints a line whenever it changes by more than 1 GiB, with each process's command line: which
process holds what, and when, beside the judge's own counters. Written for KernelBench's
36_RMSNorm_ (7.5 GB a tensor), which ran out of memory on an 80 GB H100 (2026-12-05 and -06).

    python benchmarks/probes/judge_memory.py [--task T --candidate C]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
KB = ROOT / "benchmarks/kernelbench"


def _who(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    return cmd[:120]


def _poll(stop: threading.Event) -> None:
    """Each process's device memory (MiB) by nvidia-smi, printed when any moves by more than 1 GiB."""
    last: dict[int, int] = {}
    while not stop.is_set():
        try:
            text = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return
        now: dict[int, int] = {}
        for line in text.splitlines():
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                now[int(parts[0])] = int(parts[1])
        moved = set(now) ^ set(last) or any(abs(now[p] - last.get(p, 0)) > 1024 for p in now)
        if moved:
            procs = ", ".join(f"{p}={mib / 1024:.2f}GiB [{_who(p)}]" for p, mib in sorted(now.items()))
            print(f"poll t={time.time():.3f}: {procs}", flush=True)
            last = now
        stop.wait(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", type=Path, default=KB / "problems/level1/36_RMSNorm_.py")
    ap.add_argument("--candidate", type=Path, default=KB / "candidates/level1/36_RMSNorm_.py")
    args = ap.parse_args()
    os.environ["KERNELSMITH_MEMORY_LOG"] = "1"
    os.environ["KERNELSMITH_CACHE_DIR"] = cache = tempfile.mkdtemp(prefix="ks-mem-")
    from kernelsmith.evaluate import EvalOptions, EvalPool
    from kernelsmith.task import Task

    print(f"probe pid {os.getpid()}", flush=True)
    stop = threading.Event()
    poller = threading.Thread(target=_poll, args=(stop,), daemon=True)
    poller.start()
    opts = EvalOptions(device="cuda", timeout=300, trials=2, compile_baseline=False)
    try:
        with EvalPool(device="cuda", workers=1, options=opts) as pool:
            r = pool.evaluate(Task.from_file(args.task), args.candidate.read_text(), opts)
            for log in sorted(Path(cache, "logs").glob("judge-*.log")):  # removed when the pool closes
                for line in log.read_text(errors="replace").splitlines():
                    if line.startswith("memory at"):
                        print(line)
    finally:
        stop.set()
        poller.join(timeout=15)
    print(f"verdict: {r.status.value} infra_error={r.infra_error} speedup={r.speedup}")
    print(f"timing_fallback: {r.timing_fallback}")
    print((r.error or "")[:1500])


if __name__ == "__main__":
    main()
