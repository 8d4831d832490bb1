"""Where an evaluation's time goes, phase by phase (issue 56: a search that searches).

    python benchmarks/eval_phases.py --out DIR [--device cpu|cuda] [--warm 5] [--tasks a,b] [--starts 3]

Three measurements, in this order, on one warm pool (`EvalPool`, one worker) as a search uses it:

(a) judge start: from the pool's creation to the start of its first evaluation, that is the wall time
    of the first `pool.submit(...).result()` (submitted at once) less that result's `stages.total`.
(b) per task (benchmarks/tasks/NAME.py with NAME_triton.py): its first candidate ("cold": the cache
    folder, KERNELSMITH_CACHE_DIR, is a fresh temporary one, so its baselines are measured; they are
    stored when steady, as in a search) and --warm more evaluations of the same candidate ("warm": the
    baselines come from the cache, `baseline_cached`, unless they were too unsteady to be stored; on CUDA
    the first cold one also measures the card's ceilings for the roofline, outside every stage). Each
    keeps its `EvalResult.stages` (StageSeconds: static, build, worker_wait, load, correctness,
    baseline, settle, timing, total; the timing stage split in `timing_parts`) and the wall time of
    `pool.submit(...).result()`. The first task's cold wall is counted from the end of (a).
(c) one sandbox's start, with no pool running: `SandboxHandle` spawned, to its "imported" message
    (python, torch and triton imported, containment applied) and to "ready" (warm-up: the CUDA
    context, the first activity window, the spin clock); beside it a bare `python -c "import torch,
    triton"` (the imports alone, and the process from spawn to exit).

Fixed cost of an evaluation := its wall time less the candidate's own timed work, which is the
sandbox's timed samples (`timing` and `eager_timing`: reps x calls x mean each) plus the judge-timed
batches (`judge_timing.walls_ms`). Everything else (start-up waits, loading, correctness trials,
baselines, warm-ups, the judge's checks, messages) is what a faster evaluator could remove.

On the CPU the pool itself runs the sandboxes in Triton's interpreter (TRITON_INTERPRET=1). Writes
DIR/eval_phases.json and prints a table: the cold row, and the median (min-max) of the warm ones.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TASKS = REPO / "benchmarks" / "tasks"
DEFAULT_TASKS = {"cpu": "tiny_add,tiny_softmax", "cuda": "tiny_add,relu,softmax,rmsnorm"}
STAGES = ("static", "build", "worker_wait", "load", "correctness", "baseline", "settle", "timing", "total")
COLUMNS = ("wall", "fixed", "kernel", *STAGES)
# `import torch, triton` in a fresh interpreter: the seconds of the imports alone (its wall, spawn to exit, beside)
BARE = "import time; t = time.perf_counter(); import torch, triton; print(time.perf_counter() - t)"


def kernel_seconds(result) -> float:
    """The candidate's own timed work in seconds (see the module's docstring)."""
    work_ms = sum(t.reps * t.calls * t.mean_ms for t in (result.timing, result.eager_timing) if t is not None)
    clock = result.judge_timing
    if clock is not None:
        work_ms += sum(clock.walls_ms) if clock.walls_ms else clock.wall_ms * clock.batches
    return work_ms / 1e3


def row(result, wall_s: float) -> dict:
    kernel = kernel_seconds(result)
    return {
        "status": result.status.value,
        "loaded_ahead_s": result.loaded_ahead_s,
        "error": (result.error or "")[:300] or None,
        "baseline_cached": result.baseline_cached,
        "baseline_unsteady": result.baseline_unsteady,
        "speedup": result.speedup,
        "wall": wall_s,
        "kernel": kernel,
        "fixed": wall_s - kernel,
        **result.stages.model_dump(),
    }


def spread(values: list[float]) -> dict:
    if not values:
        return {}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def task_phases(pool, name: str, warm: int, started: float | None, queued: bool = False) -> tuple[dict, float | None]:
    """Cold and warm evaluations of one task's candidate; with `started` (the pool's creation, nothing
    evaluated yet), also the judge's start in seconds. `queued`: the warm ones submitted at once, as a
    search queues its proposals (each then loaded ahead while the one before it is judged); a warm one's
    wall is the time from the result before it to its own."""
    from kernelsmith.task import Task

    task = Task.from_file(TASKS / f"{name}.py")
    source = (TASKS / f"{name}_triton.py").read_text()
    runs, judge_start, queue, last = [], None, [], time.monotonic()
    for i in range(1 + warm):
        t0 = time.monotonic() if started is None or i else started
        if queued and i == 1:  # every warm one at once, each another program (judging/ahead.py matches by hash)
            queue = [pool.submit(task, source + f"\n_VARIANT = {k}\n") for k in range(warm)]
        result = queue[i - 1].result() if queue else pool.submit(task, source).result()
        if queue and i > 1:
            t0 = last
        last = time.monotonic()
        wall = last - t0
        if started is not None and i == 0:
            judge_start = wall - result.stages.total
            wall -= judge_start
        runs.append(row(result, wall))
        print(f"  {name} {'cold' if i == 0 else f'warm {i}'}: {_brief(runs[-1])}", flush=True)
    warm_runs = runs[1:]
    summary = {k: spread([r[k] for r in warm_runs]) for k in COLUMNS}
    cached = sum(bool(r["baseline_cached"]) for r in warm_runs)
    per_minute = 60 * len(warm_runs) / sum(r["wall"] for r in warm_runs) if warm_runs else None
    done = {"cold": runs[0], "warm": warm_runs, "warm_spread": summary, "warm_per_minute": per_minute}
    return done | {"warm_baselines_cached": cached}, judge_start


def _brief(r: dict) -> str:
    stages = " ".join(f"{k} {r[k]:.2f}" for k in STAGES if r[k] >= 0.005)
    cached = "cached" if r["baseline_cached"] else "measured"
    early = f", loaded ahead {r['loaded_ahead_s']:.2f} s" if r.get("loaded_ahead_s") is not None else ""
    return f"{r['status']}, wall {r['wall']:.2f} s, fixed {r['fixed']:.2f} s, baselines {cached}{early} | {stages}"


def sandbox_starts(device: str, n: int) -> dict:
    """Spawn -> "imported" -> "ready" of `n` sandboxes one after another, and `n` bare imports."""
    from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle

    logdir = Path(tempfile.mkdtemp(prefix="ks-phases-"))
    imported, ready, layers = [], [], ""
    for _ in range(n):
        t0 = time.monotonic()
        sb = SandboxHandle(device, logdir, hold_warm_up=True)
        try:
            msg = sb.wait(t0 + 300, 2**62, "start-up")
            if msg.get("op") != "imported":
                raise SystemExit(f"sandbox start-up: {msg.get('op')!r} before 'imported'")
            imported.append(time.monotonic() - t0)
            sb.wait_ready(t0 + 300)
            ready.append(time.monotonic() - t0)
            layers = ",".join(sb.containment().on) or "none"
        finally:
            sb.close()
    env = {**os.environ, **({"TRITON_INTERPRET": "1"} if device == "cpu" else {})}
    bare_wall, bare_import = [], []
    for _ in range(n):
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-c", BARE], env=env, check=True, capture_output=True, text=True)
        bare_wall.append(time.monotonic() - t0)
        bare_import.append(float(out.stdout.split()[-1]))
    return {
        "imported": spread(imported),
        "ready": spread(ready),
        "bare_import": spread(bare_import),
        "bare_wall": spread(bare_wall),
        "containment": layers,
    }


def timing_split(runs: list[dict]) -> dict[str, float]:
    """The median seconds of each part of the timing stage (StageSeconds.timing_parts) over `runs`."""
    names = dict.fromkeys(k for r in runs for k in r.get("timing_parts") or {})
    return {k: statistics.median((r.get("timing_parts") or {}).get(k, 0.0) for r in runs) for k in names}


def _cell(s: dict) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})" if s else "-"


def print_table(report: dict) -> None:
    how = "queued at once" if report.get("queued") else "one after another"
    print(f"\n# {report['date']}, device {report['device']} ({report['host']}), {report['warm']} warm a task, {how}")
    print(f"judge start (pool created -> first evaluation starts): {report['judge_start_s']:.2f} s")
    print("| task | run | " + " | ".join(COLUMNS) + " |")
    print("|" + " --- |" * (len(COLUMNS) + 2))
    for name, t in report["tasks"].items():
        cold = t["cold"]
        print(f"| {name} | cold | " + " | ".join(f"{cold[k]:.2f}" for k in COLUMNS) + " |")
        warm = t["warm_spread"]
        print(f"| {name} | warm | " + " | ".join(_cell(warm[k]) for k in COLUMNS) + " |")
        pace = f"{t['warm_per_minute']:.1f} a minute" if t["warm_per_minute"] else "-"
        print(f"  ({name}: warm: {pace}; baselines from the cache in {t['warm_baselines_cached']} of {len(t['warm'])})")
        parts = timing_split(t["warm"])
        if parts:
            print(
                f"  ({name}: the warm timing stage, median s: "
                + ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
                + ")"
            )
    s = report["sandbox"]
    print(
        f"sandbox start ({s['containment']}): imported {_cell(s['imported'])} s, ready {_cell(s['ready'])} s; "
        f"bare `import torch, triton` {_cell(s['bare_import'])} s "
        f"(the process, spawn to exit: {_cell(s['bare_wall'])} s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description="Where an evaluation's time goes, phase by phase (issue 56).")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--warm", type=int, default=5, help="evaluations of each task after its first")
    ap.add_argument("--tasks", default=None, help="benchmarks/tasks names (default: by device)")
    ap.add_argument("--starts", type=int, default=3, help="sandbox starts and bare imports timed")
    ap.add_argument("--queued", action="store_true", help="submit each task's warm evaluations at once")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["KERNELSMITH_CACHE_DIR"] = tempfile.mkdtemp(prefix="ks-phases-cache-")  # read by the judge
    from kernelsmith.evaluate import EvalOptions, EvalPool

    names = (args.tasks or DEFAULT_TASKS[args.device]).split(",")
    report: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "device": args.device,
        "host": f"{os.cpu_count()} CPU cores",
        "warm": args.warm,
        "queued": args.queued,
        "tasks": {},
    }
    started = time.monotonic()
    with EvalPool(device=args.device, workers=1, options=EvalOptions(device=args.device)) as pool:
        for name in names:
            print(f"{name}:", flush=True)
            first = started if not report["tasks"] else None
            report["tasks"][name], judge = task_phases(pool, name, args.warm, first, args.queued)
            if judge is not None:
                report["judge_start_s"] = judge
    report["sandbox"] = sandbox_starts(args.device, args.starts)
    (args.out / "eval_phases.json").write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)


if __name__ == "__main__":
    main()
