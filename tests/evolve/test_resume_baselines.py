"""A resumed search times none of its task's baselines again: its new judge reads them from the per-card
cache that the first session's judge stored them in (the real CPU pool, Triton's interpreter, the
scripted LLM; each session its own pool, as each `kernelsmith evolve` is its own process)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

from conftest import MEMORY_LIMIT, POOL_TIMEOUT, TRIALS, case_path
from test_evolve import FAST, SEED, config, fenced

from kernelsmith.evaluate import EvalOptions, EvalPool
from kernelsmith.evolve.config import EvolveConfig
from kernelsmith.evolve.engine import Engine
from kernelsmith.evolve.store import RunStore
from kernelsmith.llm import LLMClient, ScriptedServer
from kernelsmith.task import Task


def session(pool, task: Task, run_dir: Path, iterations: int, blocks: list[int]) -> None:
    replies = [fenced(FAST.replace("BLOCK = 4096", f"BLOCK = {b}")) for b in blocks]  # distinct programs
    with ScriptedServer(replies) as server:
        cfg = cast(EvolveConfig, config(server.url, run_dir, iterations=iterations))
        engine = Engine(task, cfg, run_dir, pool, LLMClient(cfg.llm, seed=cfg.random_seed), SEED.read_text())
        asyncio.run(engine.run())
    engine.store.close()


def test_a_resumed_run_times_no_baseline_again(cpu_pool, tmp_path):
    path = tmp_path / "task.py"  # elementwise_task under a hash no other test has timed
    path.write_text(case_path("elementwise_task").read_text() + f"\nRUN = {str(tmp_path)!r}\n")
    task, run_dir = Task.from_file(path), tmp_path / "run"
    session(cpu_pool, task, run_dir, 1, [1024])
    opts = EvalOptions.model_validate(
        {"device": "cpu", "timeout": POOL_TIMEOUT, "memory_limit": MEMORY_LIMIT, "trials": TRIALS}
    )
    with EvalPool(device="cpu", workers=1, options=opts) as resumed:  # a new judge: nothing in its memory
        session(resumed, task, run_dir, 3, [2048, 512])
    store = RunStore(run_dir, create=False)
    evals = [p.eval or {} for p in store.all()]
    store.close()
    assert [e.get("status") for e in evals] == ["correct"] * 4
    sources = [e.get("baseline_source") for e in evals]
    assert sources[:2] == ["measured", "this run"]
    first = evals[0]
    if first.get("baseline_unsteady") is None:  # stored by the first session's judge
        assert sources[2:] == ["cache", "cache"]
        assert all(e["reference_timing"] == first["reference_timing"] for e in evals)
    else:  # too spread to be stored: the new judge times it once, for both its candidates
        assert sources[2:] == ["measured", "this run"]
