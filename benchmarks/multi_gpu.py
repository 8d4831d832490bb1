"""Evaluation on several GPUs of one host: throughput scaling, GPU stickiness and interference,
with the local pool and with the Ray backend; then a tuner search of the bundled suite with one
worker per GPU, on each backend.

    python benchmarks/multi_gpu.py --out DIR [--device cuda] [--per-worker 6] [--suite-iterations 8]

1. Scaling: for k = 1, 2, 4, 8 workers (up to the GPUs present), a pool of k workers evaluates
   k x PER_WORKER distinct copies of the bundled softmax seed; evaluations per minute, and the
   physical GPUs (`gpu_uuid` of each verdict) the work landed on: k workers must use k distinct GPUs.
2. Interference: the same kernel's median time on GPU 0 alone, then while every GPU is busy
   evaluating the same kernel (verdicts from GPU 0 picked by uuid).
3. Suite: `kernelsmith evolve-suite examples/suite --mutator tune` with one worker per GPU, local
   then Ray; evaluations per minute over the whole search.

With --device cpu (a dry run on a machine without GPUs), "GPUs" are CPU workers, tasks run at
their CPU sizes, and uuids are absent. Writes DIR/multi_gpu.json; prints each step as it ends.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernelsmith.evaluate.options import EvalOptions  # noqa: E402
from kernelsmith.evaluate.pool import EvalPool, visible_gpus  # noqa: E402
from kernelsmith.task import Task  # noqa: E402

TASK = REPO / "examples/suite/softmax.py"
SEED = REPO / "examples/suite_seeds/softmax.py"


def copies(tag: str, n: int) -> list[str]:
    code = SEED.read_text()
    return [code + f"\n# multi-gpu copy {tag}-{i}\n" for i in range(n)]


def open_pool(backend: str, device: str, workers: int, options: EvalOptions):
    if backend == "local":
        return EvalPool(
            device=device, workers=workers, options=options, gpus=visible_gpus()[:workers] if device == "cuda" else None
        )
    from kernelsmith.evaluate.backends.ray import RayPool

    return RayPool(device=device, workers=workers, options=options)


def batch(pool, task: Task, sources: list[str]) -> tuple[list, float]:
    t0 = time.monotonic()
    futures = [pool.submit(task, s) for s in sources]
    results = [f.result() for f in futures]
    return results, time.monotonic() - t0


def scaling(backend: str, device: str, counts: list[int], per_worker: int, task: Task, options: EvalOptions) -> list:
    rows = []
    for k in counts:
        pool = open_pool(backend, device, k, options)
        try:
            batch(pool, task, copies(f"{backend}-warm-{k}", k))  # start every worker; baselines cached once
            results, wall = batch(pool, task, copies(f"{backend}-{k}", k * per_worker))
        finally:
            pool.close()
        uuids = Counter(r.gpu_uuid for r in results)
        row = {
            "backend": backend,
            "workers": k,
            "evaluations": len(results),
            "wall_s": round(wall, 2),
            "per_minute": round(60 * len(results) / wall, 2),
            "statuses": dict(Counter(r.status.value for r in results)),
            "distinct_gpus": len([u for u in uuids if u]),
            "per_gpu": dict(uuids),
            "candidate_ms_median": statistics.median(r.candidate_ms for r in results if r.candidate_ms),
        }
        print("scaling:", json.dumps(row), flush=True)
        rows.append(row)
    base = rows[0]["per_minute"]
    for row in rows:
        row["speedup_over_1"] = round(row["per_minute"] / base, 2)
    return rows


def interference(device: str, n: int, task: Task, options: EvalOptions, reps: int) -> dict:
    alone_pool = EvalPool(
        device=device, workers=1, options=options, gpus=visible_gpus()[:1] if device == "cuda" else None
    )
    try:
        batch(alone_pool, task, copies("alone-warm", 1))
        alone, _ = batch(alone_pool, task, copies("alone", reps))
    finally:
        alone_pool.close()
    busy_pool = EvalPool(device=device, workers=n, options=options)
    try:
        batch(busy_pool, task, copies("busy-warm", n))
        busy, _ = batch(busy_pool, task, copies("busy", n * reps))
    finally:
        busy_pool.close()
    gpu0 = alone[0].gpu_uuid
    on_gpu0 = (
        [r.candidate_ms for r in busy if r.gpu_uuid == gpu0 and r.candidate_ms]
        if gpu0
        else [r.candidate_ms for r in busy if r.candidate_ms]
    )
    a = statistics.median(r.candidate_ms for r in alone)
    b = statistics.median(on_gpu0)
    out = {
        "gpu0": gpu0,
        "alone_ms": round(a, 5),
        "all_busy_ms": round(b, 5),
        "alone_n": len(alone),
        "busy_n_on_gpu0": len(on_gpu0),
        "change_percent": round(100 * (b - a) / a, 3),
    }
    print("interference:", json.dumps(out), flush=True)
    return out


def suite(backend: str, device: str, n: int, iterations: int, runs: Path) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "kernelsmith.cli",
        "evolve-suite",
        str(REPO / "examples/suite"),
        "--seeds",
        str(REPO / "examples/suite_seeds"),
        "--mutator",
        "tune",
        "--iterations",
        str(iterations),
        "--device",
        device,
        "--workers",
        str(n),
        "--runs-dir",
        str(runs / backend),
        "--json",
        *(["--eval-backend", "ray"] if backend == "ray" else []),
        *(["--small"] if device == "cpu" else []),
    ]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        return {"backend": backend, "error": p.stderr[-1500:]}
    report = json.loads(p.stdout.strip().splitlines()[-1])
    evaluations = sum(
        json.loads((d / "summary.json").read_text())["programs"]
        for d in (runs / backend).iterdir()
        if (d / "summary.json").is_file()
    )
    out = {
        "backend": backend,
        "workers": n,
        "iterations_per_task": iterations,
        "wall_s": round(wall, 1),
        "evaluations": evaluations,
        "per_minute": round(60 * evaluations / wall, 2),
        "geomean_vs_compile": report.get("geomean_speedup_vs_compile"),
        "geomean_vs_eager": report.get("geomean_speedup"),
        "correct_rate": report.get("correct_rate"),
    }
    print("suite:", json.dumps(out), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--per-worker", type=int, default=6)
    ap.add_argument("--suite-iterations", type=int, default=8)
    ap.add_argument("--cpu-workers", type=int, default=2, help="with --device cpu: the 'GPUs'")
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: scaling,ray,interference,suite")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    n = len(visible_gpus()) if args.device == "cuda" else args.cpu_workers
    counts = [k for k in (1, 2, 4, 8) if k <= n]
    options = EvalOptions(device=args.device)
    source = TASK.read_text()
    if args.device == "cpu":
        from kernelsmith.task_sizes import shrink

        source = shrink(source)
    task = Task.from_source(source, name=TASK.stem)
    report: dict = {"date": time.strftime("%Y-%m-%d"), "device": args.device, "gpus": n, "task": TASK.name}

    def save() -> None:
        (args.out / "multi_gpu.json").write_text(json.dumps(report, indent=2))

    if "scaling" not in skip:
        report["scaling_local"] = scaling("local", args.device, counts, args.per_worker, task, options)
        save()
        if "ray" not in skip:
            report["scaling_ray"] = scaling("ray", args.device, counts, args.per_worker, task, options)
            save()
    if "interference" not in skip and n > 1:
        report["interference"] = interference(args.device, n, task, options, args.per_worker)
        save()
    if "suite" not in skip:
        report["suite"] = [
            suite(b, args.device, n, args.suite_iterations, args.out / "runs")
            for b in (["local"] if "ray" in skip else ["local", "ray"])
        ]
        save()


if __name__ == "__main__":
    main()
