"""Probe (H200; a device call of its own: it writes 7 files, and the device tool returns at most
8): the verdict's kernel breakdown against its time on four KernelBench tasks, and what Nsight Compute can do here: where ncu is, its version, whether it profiles a CUDA process
as root, inside a network namespace of its own (ncu talks to its target over loopback TCP), with
which metrics, and at what cost.

    python3 benchmarks/probes/ncu.py --out DIR [--skip-breakdown]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kernelsmith.evaluate.counters import METRICS as COUNTER_METRICS  # noqa: E402
from kernelsmith.evaluate.counters import counters_text, ncu_path, parse_ncu_csv  # noqa: E402

KB = REPO / "benchmarks/kernelbench"


TARGET = r"""
import sys, torch
sys.path.insert(0, sys.argv[1])
from kernelsmith.task import load_module
from pathlib import Path
kb = Path(sys.argv[1]) / "benchmarks/kernelbench"
task = load_module((kb / "problems/level1/19_ReLU.py").read_text(), Path("/tmp/t19.py"), "t19")
cand = load_module((kb / "candidates/level1/19_ReLU.py").read_text(), Path("/tmp/c19.py"), "c19")
x = task.get_inputs()[0].cuda()
model = cand.ModelNew()
for _ in range(3):
    y = model(x)
torch.cuda.synchronize()
print("target done", y.shape, "bytes moved per call", 2 * x.numel() * x.element_size())
"""


def breakdown(log: list[str]) -> list[dict]:
    from kernelsmith.candidate import Candidate
    from kernelsmith.evaluate.pool import EvalPool
    from kernelsmith.task import Task

    cases = [("level1", n) for n in ("19_ReLU", "23_Softmax", "36_RMSNorm_")] + [("level2", "1_Conv2D_ReLU_BiasAdd")]
    rows = []
    with EvalPool(device="cuda") as pool:
        futs = [
            (
                n,
                pool.submit(
                    Task.from_file(KB / f"problems/{lv}/{n}.py"), Candidate.from_file(KB / f"candidates/{lv}/{n}.py")
                ),
            )
            for lv, n in cases
        ]
        for n, f in futs:
            r = f.result()
            row = {
                "task": n,
                "status": r.status.value,
                "success": r.success,
                "candidate_ms": r.candidate_ms,
                "kernel_ms": r.kernel_ms,
                "ratio": (r.kernel_ms / r.candidate_ms) if r.kernel_ms and r.candidate_ms else None,
                "reference_ms": r.reference_ms,
                "reference_kernel_ms": r.reference_kernel_ms,
                "floor_ms": r.floor_ms,
                "kernels": [k.model_dump() for k in r.kernels],
            }
            rows.append(row)
            line = (
                f"breakdown {n:24} {r.status.value:10} candidate {r.candidate_ms} ms, kernels {r.kernel_ms} ms, "
                f"ratio {row['ratio']}; "
                + "; ".join(f"{k.name[:40]} {k.ms:.4g} ms {k.share:.0%} own={k.own}" for k in r.kernels[:4])
            )
            print(line, flush=True)
            log.append(line)
    return rows


def bring_up_loopback() -> str:
    """In a fresh network namespace the loopback device is down; bring it up (SIOCSIFFLAGS)."""
    import fcntl
    import socket
    import struct

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifr = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
    flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 0x1, b"\0" * 14))  # SIOCSIFFLAGS, IFF_UP
    s.close()
    return "lo up"


def run_ncu(ncu: str, netns: bool, out: Path, log: list[str]) -> dict:
    target = out / "ncu_target.py"
    target.write_text(TARGET)
    cmd = [
        ncu,
        "--csv",
        "--print-units",
        "base",
        "--clock-control",
        "none",  # ncu's default locks the GPU's clocks to base while it profiles: never on a shared card
        "--kernel-name",
        "regex:relu",
        "--metrics",
        ",".join(COUNTER_METRICS),
        "--launch-skip",
        "1",
        "--launch-count",
        "1",
        sys.executable,
        str(target),
        str(REPO),
    ]
    if netns:
        # unshare(CLONE_NEWNET) in a child Python, loopback up, then exec ncu in it
        pre = (
            f"import ctypes, os, sys; sys.path.insert(0, {str(REPO)!r}); "
            "assert ctypes.CDLL(None, use_errno=True).unshare(0x40000000) == 0, 'unshare'; "
            "from benchmarks.probe_ncu import bring_up_loopback; bring_up_loopback(); "
            f"os.execv({cmd[0]!r}, {cmd!r})"
        )
        cmd = [sys.executable, "-c", pre]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - t0
    name = "ncu_netns" if netns else "ncu"
    (out / f"{name}.stdout").write_text(proc.stdout)
    (out / f"{name}.stderr").write_text(proc.stderr)
    line = f"{name}: rc {proc.returncode} in {seconds:.1f}s; stdout {len(proc.stdout)} chars; stderr tail: {proc.stderr[-300:]!r}"
    print(line, flush=True)
    log.append(line)
    kernels = parse_ncu_csv(proc.stdout)
    for k in kernels:
        moved = (k.dram_read_bytes or 0) + (k.dram_write_bytes or 0)
        line = (
            f"{name} counters {k.name[:40]}: {counters_text(k)}; {k.bottleneck()}; DRAM bytes {moved:.4g} "
            f"in {k.duration_ns} ns; task bytes (2 x 4096 x 393216 x 4) {2 * 4096 * 393216 * 4:.4g}, "
            f"ratio {moved / (2 * 4096 * 393216 * 4):.4f}"
        )
        print(line, flush=True)
        log.append(line)
    return {"rc": proc.returncode, "seconds": seconds, "kernels": [k.model_dump() for k in kernels]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--skip-breakdown", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    ncu = ncu_path()
    result["ncu"] = ncu
    if ncu:
        result["ncu_version"] = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip()
        print("ncu", ncu, result["ncu_version"], flush=True)
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", TARGET, str(REPO)], capture_output=True, timeout=300)
        result["plain_target_s"] = time.monotonic() - t0
        result["ncu_plain"] = run_ncu(ncu, False, args.out, log)
        result["ncu_netns"] = run_ncu(ncu, True, args.out, log)
    else:
        print("no ncu here", flush=True)
    if not args.skip_breakdown:
        result["breakdown"] = breakdown(log)
    (args.out / "probe_ncu.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
