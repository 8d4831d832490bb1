"""Counters for a search's new island bests: each one's Nsight Compute profile (the backend's
counters stage) runs beside the search, goes into its stored verdict (`eval.counters`), and so
into the prompts of its children. Profiling starts only while it has used at most
`profile.max_share` of the search's wall time, so it costs a bounded share of the run.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from kernelsmith.evolve.config import ProfileConfig
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import RunStore
from kernelsmith.task import Task

META_KEY = "profiling"


class IslandBestProfiler:
    def __init__(self, cfg: ProfileConfig, device: str, backend, task: Task, store: RunStore, started: float):
        self.cfg, self.backend, self.task, self.store, self.started = cfg, backend, task, store, started
        self.off_because: str | None = None
        if cfg.when == "off":
            self.off_because = "profile.when = off"
        elif device != "cuda":
            self.off_because = "counters need CUDA"
        elif not callable(getattr(backend, "profile", None)):
            self.off_because = "the evaluation backend has no counters stage"
        self.best: dict[int, float] = {}  # island -> best score seen
        self.running: set[asyncio.Task] = set()
        prior = store.get_meta(META_KEY) or {}
        self.seconds = float(prior.get("seconds", 0.0))  # earlier invocations of this run included
        self.statuses: Counter[str] = Counter(prior.get("statuses") or {})
        self.skipped = int(prior.get("skipped_for_budget", 0))
        self.elapsed_before = float(prior.get("search_seconds", 0.0))

    def seen(self, island: int, score: float | None, ok: bool) -> bool:
        """Record a stored program; True when it is a new best of its island."""
        if not ok or score is None or score <= self.best.get(island, float("-inf")):
            return False
        self.best[island] = score
        return True

    def consider(self, p: Program) -> None:
        """Profile `p` (in the background) if it is a new best of its island and the budget allows."""
        if not self.seen(p.island, p.score, p.ok) or self.off_because or p.code is None or p.id is None:
            return
        elapsed = self.elapsed_before + time.monotonic() - self.started
        if self.seconds > self.cfg.max_share * elapsed:
            self.skipped += 1
            self._save()
            return
        self.running.add(asyncio.create_task(self._profile(p.id, p.code)))

    async def _profile(self, pid: int, code: str) -> None:
        t0 = time.monotonic()
        report = await asyncio.wrap_future(self.backend.profile(self.task, code, self.cfg.timeout))
        self.seconds += time.monotonic() - t0
        self.statuses[report.status] += 1
        self.store.set_counters(pid, report.model_dump(mode="json"))
        self._save()

    def _save(self) -> None:
        self.store.set_meta(META_KEY, self.stats())

    def stats(self) -> dict:
        return {
            "when": self.cfg.when,
            "off_because": self.off_because,
            "profiled": sum(self.statuses.values()),
            "statuses": dict(self.statuses),
            "skipped_for_budget": self.skipped,
            "seconds": round(self.seconds, 2),
            "search_seconds": round(self.elapsed_before + time.monotonic() - self.started, 2),
        }

    async def drain(self) -> None:
        """Wait for the profiles still running (the run's summary reports them)."""
        running, self.running = self.running, set()
        for t in running:
            try:
                await t
            except Exception as exc:  # a lost worker or a closed pool: no counters, the search stands
                self.statuses[f"failed: {type(exc).__name__}"] += 1
        self._save()
