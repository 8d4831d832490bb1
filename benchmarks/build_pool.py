"""CUDA C++ candidates at search speed (docs/benchmarks.md, "Build pool"): 8 distinct load_inline
candidates through one EvalPool(device="cuda") with a cold build cache, then again with a warm one,
then the slowest alone with a cold cache; and what Triton's JIT compile costs a candidate.

    python benchmarks/build_pool.py --out DIR [--skip-single] [--skip-triton]

Writes DIR/build_pool.json and prints one line per evaluation and the ratios the issue asks for:
total wall time of the 8 / wall time of the slowest single evaluation (<= 2.5), builds of the warm
run (< 1 s each), verdicts (all `correct`, as before).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KB = REPO / "benchmarks/kernelbench"
FEW_SHOT = ["add", "flash_attn", "fuse_gelu", "mnist2", "tiled_matmul"]
LEVEL1 = ["19_ReLU", "23_Softmax", "36_RMSNorm_"]


def cases() -> list[tuple[str, Path, Path]]:
    out = [(f"few-shot {n}", KB / f"few_shot/model_ex_{n}.py", KB / f"few_shot/model_new_ex_{n}.py") for n in FEW_SHOT]
    out += [(f"level1 {n}", KB / f"problems/level1/{n}.py", KB / f"candidates_cuda/level1/{n}.py") for n in LEVEL1]
    return out


def run_all(selected, label: str, log: list) -> dict:
    from kernelsmith.candidate import Candidate
    from kernelsmith.evaluate.pool import EvalPool
    from kernelsmith.task import Task

    t0 = time.monotonic()
    with EvalPool(device="cuda") as pool:
        t_pool = time.monotonic()
        futures = [(name, pool.submit(Task.from_file(t), Candidate.from_file(c))) for name, t, c in selected]
        rows = []
        for name, fut in futures:
            r = fut.result()
            rows.append(
                {
                    "case": name,
                    "status": r.status.value,
                    "success": r.success,
                    "speedup": r.speedup,
                    "error": (r.error or "")[:500],
                    "build_s": r.stages.build,
                    "total_s": r.stages.total,
                    "done_at_s": time.monotonic() - t_pool,
                    "builds": [b.model_dump() for b in r.builds],
                }
            )
            line = (
                f"{label:6} {name:24} {r.status.value:14} "
                f"{(r.speedup or 0):6.3f}x build {r.stages.build:7.2f}s total {r.stages.total:7.2f}s "
                f"done at {rows[-1]['done_at_s']:7.2f}s  {[b.source for b in r.builds]}"
            )
            print(line, flush=True)
            log.append(line)
        workers = pool._builds.workers if pool._builds else 0
    wall = time.monotonic() - t_pool
    return {
        "label": label,
        "wall_s": wall,
        "with_pool_start_s": time.monotonic() - t0,
        "build_workers": workers,
        "rows": rows,
    }


TRITON_PROBE = r"""
import json, sys, time, importlib.util, torch
sys.path.insert(0, sys.argv[3])
from kernelsmith.task import load_module
from kernelsmith.evaluate.runtime import build_model, make_inputs
task = load_module(open(sys.argv[1]).read(), __import__("pathlib").Path(sys.argv[4]) / "t.py", "t")
cand = load_module(open(sys.argv[2]).read(), __import__("pathlib").Path(sys.argv[4]) / "c.py", "c")
model = build_model(cand.ModelNew, task, 0, "cuda")
x = make_inputs(task, 0, "cuda")
times = []
for _ in range(3):
    torch.cuda.synchronize(); t = time.perf_counter()
    with torch.no_grad():
        model(*x)
    torch.cuda.synchronize(); times.append(time.perf_counter() - t)
print(json.dumps({"first_s": times[0], "steady_s": min(times[1:])}))
"""


def triton_compile_cost() -> list[dict]:
    """First forward (Triton JIT-compiles, cold cache) minus a later one, per level-1 Triton candidate."""
    out = []
    for name in LEVEL1:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "TRITON_CACHE_DIR": str(Path(tmp) / "triton")}
            task, cand = KB / f"problems/level1/{name}.py", KB / f"candidates/level1/{name}.py"
            proc = subprocess.run(
                [sys.executable, "-c", TRITON_PROBE, str(task), str(cand), str(REPO), tmp],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            row = {"case": name, **(json.loads(lines[-1]) if lines else {"error": proc.stderr[-500:]})}
            if "first_s" in row:
                row["compile_s"] = row["first_s"] - row["steady_s"]
            print(f"triton {name:14} {row}", flush=True)
            out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--skip-triton", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["KERNELSMITH_CACHE_DIR"] = tempfile.mkdtemp(prefix="ks-buildbench-")  # cold build cache
    log: list[str] = []
    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count()}
    selected = cases()
    result["cold"] = run_all(selected, "cold", log)
    result["warm"] = run_all(selected, "warm", log)
    if not args.skip_single:
        slowest = max(result["cold"]["rows"], key=lambda r: r["build_s"])
        os.environ["KERNELSMITH_CACHE_DIR"] = tempfile.mkdtemp(prefix="ks-buildbench-single-")
        one = [c for c in selected if c[0] == slowest["case"]]
        result["single"] = run_all(one, "single", log)
        result["ratio_8_over_single"] = result["cold"]["wall_s"] / result["single"]["wall_s"]
    if not args.skip_triton:
        result["triton"] = triton_compile_cost()
    statuses = {r["case"]: r["status"] for r in result["cold"]["rows"]}
    result["verdicts_unchanged"] = statuses == {r["case"]: r["status"] for r in result["warm"]["rows"]}
    result["all_correct"] = all(s == "correct" for s in statuses.values())
    result["warm_max_build_s"] = max(r["build_s"] for r in result["warm"]["rows"])
    (args.out / "build_pool.json").write_text(json.dumps(result, indent=1))
    summary = (
        f"cold 8: {result['cold']['wall_s']:.1f}s"
        + (
            f", slowest alone: {result['single']['wall_s']:.1f}s, ratio {result['ratio_8_over_single']:.2f}"
            if "single" in result
            else ""
        )
        + f"; warm 8: {result['warm']['wall_s']:.1f}s, slowest build stage {result['warm_max_build_s']:.3f}s"
        + f"; all correct: {result['all_correct']}; verdicts unchanged: {result['verdicts_unchanged']}"
    )
    print(summary)


if __name__ == "__main__":
    main()
