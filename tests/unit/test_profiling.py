"""Counters for a search's new island bests (kernelsmith/evolve/profiling.py): which programs get
profiled, that the report lands in the stored verdict, and that profiling keeps to its share of
the run's wall time. The backend is a stand-in whose counters stage takes a set time."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future

from conftest import recorded_counters

from kernelsmith.evaluate.counters import CountersReport
from kernelsmith.evolve.config import ProfileConfig
from kernelsmith.evolve.profiling import META_KEY, IslandBestProfiler
from kernelsmith.evolve.program import Program, score_of
from kernelsmith.evolve.store import RunStore
from kernelsmith.task import Task

TASK = Task(source="import torch\nclass Model(torch.nn.Module):\n    pass\n", name="t")


class Backend:
    def __init__(self, seconds: float = 0.0):
        self.seconds, self.asked = seconds, []

    def profile(self, task, code, timeout):
        self.asked.append(code)
        fut: Future = Future()

        def later():
            time.sleep(self.seconds)
            fut.set_result(CountersReport.model_validate(recorded_counters()))

        threading.Thread(target=later, daemon=True).start()
        return fut


def stored(store: RunStore, iteration: int, island: int, speedup: float, status: str = "correct") -> Program:
    p = Program(iteration=iteration, island=island, operator="tune", code=f"x = {iteration}\n", status=status)
    p.speedup = speedup
    p.score = score_of(status, [], speedup)
    p.eval = {"status": status}
    return store.add(p)


def test_new_island_bests_are_profiled_into_their_stored_verdicts(tmp_path):
    store, backend = RunStore(tmp_path / "run"), Backend()

    async def go():
        prof = IslandBestProfiler(ProfileConfig(max_share=1.0), "cuda", backend, TASK, store, time.monotonic())
        for it, island, speed, status in [
            (0, 0, 1.0, "correct"),
            (1, 0, 0.9, "correct"),
            (2, 1, 0.5, "correct"),
            (3, 0, 2.0, "incorrect"),
            (4, 0, 1.5, "correct"),
        ]:
            prof.consider(stored(store, it, island, speed, status))
        await prof.drain()
        return prof.stats()

    stats = asyncio.run(go())
    assert backend.asked == ["x = 0\n", "x = 2\n", "x = 4\n"]  # island bests only, never a wrong one
    assert stats["profiled"] == 3 and stats["statuses"] == {"ok": 3}
    assert store.at_iteration(4).eval["counters"]["status"] == "ok"
    assert "counters" not in store.at_iteration(1).eval
    assert store.get_meta(META_KEY)["profiled"] == 3


def test_profiling_keeps_to_its_share_of_the_run(tmp_path):
    store, backend = RunStore(tmp_path / "run"), Backend(seconds=0.3)

    async def go():
        prof = IslandBestProfiler(ProfileConfig(max_share=0.10), "cuda", backend, TASK, store, time.monotonic())
        for it in range(6):  # every program a new best, arriving faster than profiles finish
            prof.consider(stored(store, it, 0, 1.0 + it))
            await asyncio.sleep(0.35)
        await prof.drain()
        return prof.stats()

    stats = asyncio.run(go())
    assert 1 <= stats["profiled"] < 6 and stats["skipped_for_budget"] == 6 - stats["profiled"]
    assert stats["seconds"] <= 0.10 * stats["search_seconds"] + 0.4  # within the share, plus one profile


def test_off_on_the_cpu_and_when_asked(tmp_path):
    store = RunStore(tmp_path / "run")
    cpu = IslandBestProfiler(ProfileConfig(), "cpu", Backend(), TASK, store, time.monotonic())
    off = IslandBestProfiler(ProfileConfig(when="off"), "cuda", Backend(), TASK, store, time.monotonic())
    none = IslandBestProfiler(ProfileConfig(), "cuda", object(), TASK, store, time.monotonic())
    assert cpu.off_because == "counters need CUDA" and off.off_because == "profile.when = off"
    assert none.off_because == "the evaluation backend has no counters stage"
