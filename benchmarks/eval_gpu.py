"""GPU benchmark of the evaluation service (issue: evaluation service; numbers in docs/benchmarks.md).

1. Seconds per full `kernelsmith eval` and the share of each stage, for ReLU, softmax and
   RMSNorm at KernelBench level-1 sizes: once cold (no cached baselines: the eager reference
   and torch.compile are timed, torch.compile compiles) and once warm (baselines cached).
2. The spread of one honest kernel's speedup over N independent `kernelsmith eval` runs,
   (max - min) / median, with the baseline cached as in a search.

    python benchmarks/eval_gpu.py --out DIR [--runs 10] [--tasks relu,softmax,rmsnorm]

Each run is a separate CLI process, so start-up is counted. Writes DIR/eval_gpu.json and
prints a table.
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

HERE = Path(__file__).resolve().parent
TASKS = HERE / "tasks"


def run_eval(task: str, cache: Path, extra: list[str] | None = None) -> dict:
    env = dict(os.environ, KERNELSMITH_CACHE_DIR=str(cache))
    cmd = [
        sys.executable,
        "-m",
        "kernelsmith.cli",
        "eval",
        str(TASKS / f"{task}.py"),
        str(TASKS / f"{task}_triton.py"),
        "--device",
        "cuda",
        "--json",
        *(extra or []),
    ]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=HERE.parent)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"eval failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    record["wall_s"] = wall
    return record


def summary(rec: dict) -> dict:
    s = rec["stages"]
    keep = ("status", "speedup", "speedup_vs_compile", "candidate_ms", "reference_ms", "compile_ms", "error", "wall_s")
    return {**{k: rec.get(k) for k in keep}, "stages": s, "gpu": rec.get("gpu_name")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--tasks", default="relu,softmax,rmsnorm")
    ap.add_argument("--spread-task", default="relu")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    out_file = args.out / "eval_gpu.json"
    report: dict = {"date": time.strftime("%Y-%m-%d"), "per_task": {}, "spread": None}
    cache = Path(tempfile.mkdtemp(prefix="ks-bench-cache-"))

    def save() -> None:
        out_file.write_text(json.dumps(report, indent=2))

    for task in args.tasks.split(","):
        cold = summary(run_eval(task, cache))
        warm = summary(run_eval(task, cache))
        report["per_task"][task] = {"cold": cold, "warm": warm}
        save()
        for label, r in (("cold", cold), ("warm", warm)):
            s = r["stages"]
            print(
                f"{task:8s} {label}: {r['status']} speedup {r['speedup']} vs compile {r['speedup_vs_compile']} "
                f"cand {r['candidate_ms']} ms ref {r['reference_ms']} ms | wall {r['wall_s']:.1f}s "
                f"(eval {s['total']:.1f}s: wait {s['worker_wait']:.1f} load {s['load']:.1f} "
                f"corr {s['correctness']:.1f} "
                f"base {s['baseline']:.1f} timing {s['timing']:.1f})",
                flush=True,
            )

    # In a warm pool, as a search uses it: no process start-up on the evaluation's path.
    sys.path.insert(0, str(HERE.parent))
    os.environ["KERNELSMITH_CACHE_DIR"] = str(cache)
    from kernelsmith.evaluate import EvalOptions, EvalPool
    from kernelsmith.task import Task

    report["pool"] = {}
    with EvalPool(device="cuda", options=EvalOptions(device="cuda")) as pool:
        for task in args.tasks.split(","):
            t = Task.from_file(TASKS / f"{task}.py")
            src = (TASKS / f"{task}_triton.py").read_text()
            runs = []
            for _ in range(3):
                t0 = time.monotonic()
                r = pool.evaluate(t, src)
                runs.append(
                    {
                        "wall_s": time.monotonic() - t0,
                        "status": r.status.value,
                        "stages": r.stages.model_dump(),
                        "speedup": r.speedup,
                    }
                )
            report["pool"][task] = runs
            save()
            print(
                f"{task:8s} warm pool: "
                + ", ".join(f"{x['wall_s']:.2f}s" for x in runs)
                + " | last stages "
                + " ".join(f"{k} {v:.2f}" for k, v in runs[-1]["stages"].items() if isinstance(v, float)),
                flush=True,
            )

    speedups, cand = [], []
    for i in range(args.runs):
        r = run_eval(args.spread_task, cache)
        speedups.append(r["speedup"])
        cand.append(r["candidate_ms"])
        print(f"spread run {i + 1}: speedup {r['speedup']:.4f} cand {r['candidate_ms']:.4f} ms", flush=True)
        report["spread"] = {"task": args.spread_task, "speedups": speedups, "candidate_ms": cand}
        save()
    med = statistics.median(speedups)
    report["spread"]["relative_spread"] = (max(speedups) - min(speedups)) / med
    save()
    print(
        f"speedup spread over {len(speedups)} runs: "
        f"(max-min)/median = {100 * report['spread']['relative_spread']:.3f}% "
        f"(median {med:.4f}x)"
    )


if __name__ == "__main__":
    main()
