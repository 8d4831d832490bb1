"""What a run directory shows besides its store: best.py, summary.json, and export rows."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kernelsmith.evolve.config import EvolveConfig
from kernelsmith.evolve.pace import pace_of
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import NOISE_FLOOR, RunStore
from kernelsmith.task import Task

EXPORT_FIELDS = (
    "id",
    "parent_id",
    "inspiration_ids",
    "iteration",
    "island",
    "operator",
    "model",
    "status",
    "correct",
    "speedup",
    "speedup_vs_compile",
    "candidate_ms",
    "score",
    "flags",
    "error",
    "code",
    "messages",
    "response",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "latency_s",
    "descriptors",
    "config",
    "created_at",
)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_best(run_dir: Path, best: Program, task: Task) -> Path:
    """The best program as a standalone candidate file, with a comment saying where it came from."""
    desc = f"program {best.id} (iteration {best.iteration}, {best.operator})"
    if best.speedup is not None:
        desc += f", {best.speedup:.3g}x vs the reference"
    if best.speedup_vs_compile is not None:
        desc += f", {best.speedup_vs_compile:.3g}x vs torch.compile"
    path = run_dir / "best.py"
    _atomic_write(path, f"# kernelsmith: best program of a search on {task.name}: {desc}\n{best.code or ''}")
    return path


def best_record(p: Program | None) -> dict | None:
    if p is None:
        return None
    return {
        "program_id": p.id,
        "iteration": p.iteration,
        "status": p.status,
        "flags": list(p.flags),
        "success": p.ok,  # the one rule: a flagged start reads as not a success, not as "correct"
        "speedup": p.speedup,
        "speedup_vs_compile": p.speedup_vs_compile,
        "candidate_ms": p.candidate_ms,
        "operator": p.operator,
        "model": p.model,
    }


def previous_elapsed(store: RunStore) -> float:
    """Seconds the run's earlier sessions took: as stored, or as a summary.json written before the
    store kept it says (that session's time alone)."""
    stored = store.get_meta("elapsed_s")
    if stored is not None:
        return float(stored)
    try:
        return float(json.loads((store.run_dir / "summary.json").read_text())["elapsed_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def write_summary(
    run_dir: Path,
    store: RunStore,
    task: Task,
    cfg: EvolveConfig,
    hardware: dict,
    stop_reason: str,
    elapsed_s: float,
    profiling: dict | None = None,
    tuner: dict | None = None,
) -> dict:
    iterations = store.iterations()
    best = store.best()
    start = store.at_iteration(0)
    totals = store.totals()
    summary = {
        "task": task.name,
        "task_hash": task.hash,
        "iterations_asked": cfg.iterations,
        "iterations_done": len([i for i in iterations if i > 0]),
        "programs": store.count(),
        "status_counts": store.status_counts(),
        "best": best_record(best),
        "start": best_record(start),
        "prompt_tokens": totals["prompt_tokens"],
        "completion_tokens": totals["completion_tokens"],
        "cost": round(totals["cost"], 6),
        "stop_reason": stop_reason,
        "elapsed_s": round(elapsed_s, 2),
        "device": cfg.evaluation.device,
        "hardware": hardware,
        "profiling": profiling,  # the counters stage for new island bests (evolve/profiling.py)
        "tuner": tuner,  # launch configurations measured, per program family (evolve/tuning.py)
        # a CPU run's measured floor of the spread between evaluations (evolve/noise_floor.py); None:
        # the method floors of kernelsmith.evaluate.measuring.noise hold
        "noise_floor": store.get_meta(NOISE_FLOOR),
    }
    # evaluations judged, a minute of search time, and their time per phase (evolve/pace.py)
    summary["evaluations"] = pace_of(store.eval_records(), summary["elapsed_s"]).model_dump()
    store.set_meta("elapsed_s", summary["elapsed_s"])
    _atomic_write(run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    if best is not None:
        write_best(run_dir, best, task)
    return summary


def export_rows(store: RunStore):
    """One plain dict per program, oldest first (what `kernelsmith export --format jsonl` prints)."""
    for p in store.all():
        d = p.as_dict()
        yield {k: d[k] for k in EXPORT_FIELDS} | {"eval": d["eval"]}
