"""The cost of the counters stage (issue: profiler feedback), one device call on the H200:

1. the verdict's kernel breakdown (clean window) against its time on KernelBench level1 19_ReLU,
   23_Softmax, 36_RMSNorm_ and level2 1_Conv2D_ReLU_BiasAdd;
2. the counters stage on each (wall seconds per profiled candidate; ReLU's DRAM bytes against
   the 2 x 4096 x 393216 x 4 it must move);
3. a 40-iteration tuner search of one bundled suite task with `profile.when = "off"`, then with
   "best" (new island bests profiled), from the same seed, on a warm baseline cache.

    python3 benchmarks/profile_cost.py --out DIR [--task batched_matmul] [--iterations 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.probe_ncu import breakdown  # noqa: E402

KB = REPO / "benchmarks/kernelbench"
CASES = [
    ("level1", "19_ReLU"),
    ("level1", "23_Softmax"),
    ("level1", "36_RMSNorm_"),
    ("level2", "1_Conv2D_ReLU_BiasAdd"),
]
RELU_BYTES = 2 * 4096 * 393216 * 4


def counters(log: list[str]) -> list[dict]:
    from kernelsmith.evaluate.pool import EvalPool
    from kernelsmith.task import Task

    rows = []
    with EvalPool(device="cuda") as pool:
        for lv, n in CASES:
            task = Task.from_file(KB / f"problems/{lv}/{n}.py")
            cand = (KB / f"candidates/{lv}/{n}.py").read_text()
            pool.evaluate(task, cand)  # the verdict first, as a search would have it
            t0 = time.monotonic()
            rep = pool.profile(task, cand, 180).result()
            wall = time.monotonic() - t0
            row = {"task": n, "wall_s": wall, "report": rep.model_dump(mode="json")}
            k = rep.heaviest
            line = f"counters {n:24} {rep.status} in {wall:.1f} s (stage {rep.seconds:.1f} s): {rep.summary()}"
            if k is not None:
                moved = (k.dram_read_bytes or 0) + (k.dram_write_bytes or 0)
                line += f"; DRAM {moved:.4g} B in {k.duration_ns} ns = {k.dram_gbps} GB/s"
                if n == "19_ReLU":
                    row["bytes_ratio"] = moved / RELU_BYTES
                    line += f"; ratio to the task's bytes {moved / RELU_BYTES:.4f}"
            print(line, flush=True)
            log.append(line)
            rows.append(row)
    return rows


def search(task: str, iterations: int, when: str, out: Path, log: list[str]) -> dict:
    run = Path("/tmp/ks-profile-cost") / f"{task}-{when}"
    cfg = Path("/tmp") / f"ks-profile-{when}.toml"
    cfg.write_text(f'[profile]\nwhen = "{when}"\n')
    cmd = [sys.executable, "-m", "kernelsmith.cli", "evolve", str(REPO / f"examples/suite/{task}.py")]
    cmd += [
        "--seed",
        str(REPO / f"examples/suite_seeds/{task}.py"),
        "--mutator",
        "tune",
        "--iterations",
        str(iterations),
    ]
    cmd += ["--device", "cuda", "--run-dir", str(run), "--config", str(cfg), "--quiet", "--json"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t0
    try:
        summary = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        summary: dict = {"error": (p.stderr or p.stdout)[-2000:]}
    best: dict = summary.get("best") or {}
    line = (
        f"search {task} profile.when={when}: rc {p.returncode}, {wall:.1f} s wall, "
        f"{summary.get('iterations_done')} iterations, stop: {summary.get('stop_reason')}, "
        f"best {best.get('speedup')}x; profiling {json.dumps(summary.get('profiling'))}"
    )
    print(line, flush=True)
    log.append(line)
    return {"when": when, "wall_s": wall, "rc": p.returncode, "summary": summary}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--task", default="batched_matmul")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--skip", default="", help="comma list of: breakdown, counters, search")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    skip = set(args.skip.split(","))
    log = Log(args.out / "profile_cost.log")
    results: dict = {}
    if "breakdown" not in skip:
        results["breakdown"] = breakdown(log)
    if "counters" not in skip:
        results["counters"] = counters(log)
    if "search" not in skip:
        warm = [sys.executable, "-m", "kernelsmith.cli", "eval", str(REPO / f"examples/suite/{args.task}.py")]
        warm += [str(REPO / f"examples/suite_seeds/{args.task}.py"), "--device", "cuda", "--json"]
        subprocess.run(warm, capture_output=True, text=True, timeout=600)  # the baseline cache, for both runs
        results["search"] = [search(args.task, args.iterations, w, args.out, log) for w in ("off", "best")]
        off, best = results["search"]
        line = f"search overhead of profiling new bests: {best['wall_s'] / off['wall_s'] - 1:+.1%} wall time"
        print(line, flush=True)
        log.append(line)
    (args.out / "profile_cost.json").write_text(json.dumps(results, indent=1))


class Log(list):
    """Lines kept in order and appended to a file as they come (a call cut short keeps them)."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def append(self, line) -> None:
        super().append(line)
        with self.path.open("a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
