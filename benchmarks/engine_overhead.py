"""The search engine's own overhead (numbers in docs/benchmarks.md).

1. Iterations per minute with an instant scripted LLM (a ScriptedServer on 127.0.0.1 answering
   at once) on a trivial task (benchmarks/tasks/tiny_add.py), twice:
   - with the real evaluation pool on --device (what a user sees when the LLM is instant);
   - with an instant evaluation backend that returns a fixed verdict, so only the engine's
     own work remains: HTTP round trip through the openai client, prompt building, reply
     parsing, the SQLite commit, the archive.
2. Parent-selection time with 100k programs stored: building the archive from the store
   (what a resume does) and one iteration's choice of parent, inspirations and history plus
   the prompt built from them.

    python benchmarks/engine_overhead.py --device cuda --out DIR [--iterations 40] [--programs 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.pool import EvalPool
from kernelsmith.evaluate.result import EvalResult, Status
from kernelsmith.evolve.archive import Archive
from kernelsmith.evolve.config import load_config
from kernelsmith.evolve.engine import Engine
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.prompts import PromptBuilder, PromptParts
from kernelsmith.evolve.store import RunStore
from kernelsmith.llm import LLMClient, ScriptedServer
from kernelsmith.task import Task

HERE = Path(__file__).resolve().parent
TASK = HERE / "tasks" / "tiny_add.py"
SEED = HERE / "tasks" / "tiny_add_triton.py"


class InstantBackend:
    """Answers every evaluation at once with a fixed correct verdict: isolates the engine."""

    def __init__(self, device: str):
        self.device = device

    def submit(self, task, candidate, options=None) -> Future:
        fut: Future = Future()
        fut.set_result(
            EvalResult(
                status=Status.correct,
                correct=True,
                speedup=1.0,
                candidate_ms=0.01,
                reference_ms=0.01,
                kernel_launches=5,
                device=self.device,
            )
        )
        return fut

    def hardware(self) -> Future:
        fut: Future = Future()
        fut.set_result({"device": self.device, "name": "instant"})
        return fut

    def close(self) -> None:
        pass


def iterations_per_minute(backend, device: str, iterations: int, in_flight: int, run_dir: Path) -> dict:
    seed = SEED.read_text()
    reply = {"reply": "Same program.\n```python\n" + seed + "```\n"}
    with ScriptedServer([], default=reply) as server:
        cfg = load_config(
            None,
            {
                "iterations": iterations,
                "max_in_flight": in_flight,
                "llm": {"base_url": server.url, "models": [{"name": "instant"}]},
                "evaluation": {"device": device},
            },
        )
        engine = Engine(Task.from_file(TASK), cfg, run_dir, backend, LLMClient(cfg.llm), seed)
        t0 = time.monotonic()
        summary = asyncio.run(engine.run())
        wall = time.monotonic() - t0
        engine.store.close()
    return {
        "iterations": summary["iterations_done"],
        "wall_s": round(wall, 2),
        "iterations_per_minute": round(60 * summary["iterations_done"] / wall, 1),
        "status_counts": summary["status_counts"],
    }


def fill_store(store: RunStore, n: int, islands: int, rng: random.Random) -> None:
    code = SEED.read_text()
    statuses = ["correct"] * 5 + ["incorrect"] * 2 + ["compile_error", "runtime_error", "no_program"]
    messages = [{"role": "system", "content": "s" * 2000}, {"role": "user", "content": "u" * 12000}]
    store.db.execute("BEGIN")
    for i in range(n):
        status = rng.choice(statuses)
        speedup = rng.lognormvariate(0, 0.5) if status == "correct" else None
        p = Program(
            iteration=i,
            island=0 if i == 0 else (i - 1) % islands,
            operator="rewrite",
            code=None if status == "no_program" else code.replace("4096", str(1 + i)),
            status=status,
            parent_id=None if i == 0 else rng.randint(1, i),
            messages=messages,
            response="r" * 3000,
            speedup=speedup,
            correct=status == "correct",
            score=speedup if speedup else 0.01,
            descriptors={
                "launches": rng.choice([1, 2, 3, 5, 9]),
                "complexity": rng.randint(20, 400),
                "uses_dot": rng.random() < 0.3,
            },
        )
        store.add(p)
    store.db.execute("COMMIT")


def selection_at_scale(n: int, run_dir: Path, trials: int = 200) -> dict:
    cfg = load_config(None, {"archive": {"islands": 4}})
    store = RunStore(run_dir)
    rng = random.Random(0)
    t0 = time.monotonic()
    fill_store(store, n, cfg.archive.islands, rng)
    fill_s = time.monotonic() - t0

    t0 = time.monotonic()
    archive = Archive(cfg.archive)
    for pid, iteration, island, status, flags, score, desc, has_code, *_ in store.archive_rows():
        entry = archive.entry(pid, score, status == "correct" and not flags, desc) if has_code else None
        archive.admit(entry, iteration, island)
    rebuild_s = time.monotonic() - t0

    builder = PromptBuilder(cfg.prompts)
    task = Task.from_file(TASK)
    select_ms, prompt_ms = [], []
    for i in range(trials):
        r = random.Random(f"0:{i}")
        island = i % cfg.archive.islands
        t0 = time.perf_counter()
        sel = archive.select(island, r)
        parent = store.get(sel.parent_id)
        tops, diverse = store.get_many(sel.top_ids), store.get_many(sel.diverse_ids)
        history = store.recent(cfg.prompts.history, island)
        t1 = time.perf_counter()
        builder.messages(
            PromptParts(
                "rewrite",
                task.name,
                task.source,
                {"device": "cuda", "name": "GPU"},
                parent=parent,
                top=tops,
                inspirations=diverse,
                history=history,
            )
        )
        t2 = time.perf_counter()
        select_ms.append(1e3 * (t1 - t0))
        prompt_ms.append(1e3 * (t2 - t1))
    size_mb = store.path.stat().st_size / 2**20
    store.close()
    return {
        "programs": n,
        "store_mb": round(size_mb, 1),
        "fill_s": round(fill_s, 1),
        "archive_rebuild_s": round(rebuild_s, 2),
        "select_ms_median": round(statistics.median(select_ms), 3),
        "select_ms_max": round(max(select_ms), 3),
        "prompt_ms_median": round(statistics.median(prompt_ms), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--programs", type=int, default=100_000)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"date": time.strftime("%Y-%m-%d"), "host": platform.node(), "device": args.device}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        results["engine_only"] = iterations_per_minute(
            InstantBackend(args.device), args.device, args.iterations, args.in_flight, tmp / "instant"
        )
        print("engine only:", results["engine_only"], flush=True)
        pool = EvalPool(device=args.device, options=EvalOptions(device=args.device))
        try:
            results["with_evaluation"] = iterations_per_minute(
                pool, args.device, args.iterations, args.in_flight, tmp / "real"
            )
        finally:
            pool.close()
        print("with evaluation:", results["with_evaluation"], flush=True)
        results["selection"] = selection_at_scale(args.programs, tmp / "scale")
        print("selection:", results["selection"], flush=True)
    (args.out / f"engine_overhead_{args.device}.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
