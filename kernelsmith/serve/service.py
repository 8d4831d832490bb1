"""The service's core, without HTTP: admission (a bounded queue), a result cache, and sharing of
identical requests in flight. The FastAPI app in `app.py` is a thin layer over this.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field

from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evaluate.result import EvalResult
from kernelsmith.task import Task


class QueueFull(Exception):
    def __init__(self, retry_after: int):
        super().__init__(f"the evaluation queue is full; retry after {retry_after} s")
        self.retry_after = retry_after


def request_key(task_hash: str, candidate_hash: str, options: EvalOptions) -> str:
    """The cache key: the task, the candidate and every option that can change the verdict."""
    blob = json.dumps(options.model_dump(mode="json"), sort_keys=True)
    return f"{task_hash}:{candidate_hash}:{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


class ResultCache:
    """LRU of verdicts by request key. Thread-safe."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[str, dict] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> dict | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: str, record: dict) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = record
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class Counters:
    requests: int = 0
    evaluated: int = 0
    cache_hits: int = 0
    joined: int = 0  # identical to a request already in flight: shares its verdict
    rejected_full: int = 0
    eval_seconds: float = 0.0  # total wall time of finished evaluations
    started: float = field(default_factory=time.time)


class EvalService:
    """Admit, deduplicate, cache and evaluate. `evaluate` is a coroutine for the web app."""

    def __init__(
        self,
        backend: EvalBackend,
        device: str,
        workers: int,
        backend_kind: str = "local",
        max_queue: int = 64,
        cache_size: int = 4096,
        max_timeout: float = 900.0,
    ):
        self.backend, self.device, self.workers, self.backend_kind = backend, device, workers, backend_kind
        self.max_queue, self.max_timeout = max_queue, max_timeout
        self.cache = ResultCache(cache_size)
        self.counters = Counters()
        self._in_flight: dict[str, Future] = {}
        self._lock = threading.Lock()
        self._hardware: Future | None = None
        # The sandboxes' containment on this host (the plan; each verdict carries what its sandbox applied).
        from kernelsmith.evaluate.sandboxing import containment

        self.containment = containment.plan(device).summary()

    @property
    def pending(self) -> int:
        return len(self._in_flight)

    def retry_after(self) -> int:
        """Seconds until a slot is likely free, when every slot is taken: one mean evaluation
        time shared by the workers, at least 1."""
        c = self.counters
        mean = c.eval_seconds / c.evaluated if c.evaluated else 5.0
        return max(1, math.ceil(mean / max(self.workers, 1)))

    def _start(self, key: str, task: Task, source: str, options: EvalOptions) -> tuple[Future, str]:
        """The future of this request's verdict and how it was obtained: 'miss' (a new
        evaluation), 'joined' (an identical one in flight), or 'hit' (cached since the caller
        looked: an evaluation that finished in between)."""
        with self._lock:
            fut = self._in_flight.get(key)
            if fut is not None:
                self.counters.joined += 1
                return fut, "joined"
            cached = self.cache.get(key)  # _finished caches before it leaves the in-flight table
            if cached is not None:
                self.counters.cache_hits += 1
                done: Future = Future()
                done.set_result(EvalResult.model_validate(cached))
                return done, "hit"
            if len(self._in_flight) >= self.max_queue:
                self.counters.rejected_full += 1
                raise QueueFull(self.retry_after())
            began = time.monotonic()
            fut = self.backend.submit(task, source, options)
            self._in_flight[key] = fut
        fut.add_done_callback(lambda f: self._finished(key, f, began))
        return fut, "miss"

    def _finished(self, key: str, fut: Future, began: float) -> None:
        """The verdict enters the cache before the request leaves the in-flight table: an identical
        request arriving meanwhile joins or hits, never evaluates again."""
        ok = not fut.cancelled() and fut.exception() is None
        if ok and fut.result().about_the_candidate:
            self.cache.put(key, fut.result().model_dump(mode="json"))
        with self._lock:
            self._in_flight.pop(key, None)
            if ok:
                self.counters.evaluated += 1
                self.counters.eval_seconds += time.monotonic() - began

    async def evaluate(self, task: Task, candidate_source: str, options: EvalOptions) -> tuple[dict, str]:
        """(the verdict record, 'hit' | 'joined' | 'miss'). Raises QueueFull, or the backend's
        TaskError for a task that cannot be loaded."""
        self.counters.requests += 1
        from kernelsmith.candidate import Candidate

        key = request_key(task.hash, Candidate(candidate_source).hash, options)
        cached = self.cache.get(key)
        if cached is not None:
            self.counters.cache_hits += 1
            return cached, "hit"
        fut, how = self._start(key, task, candidate_source, options)
        # shield: a client that hangs up must not cancel an evaluation that others may share
        result: EvalResult = await asyncio.shield(asyncio.wrap_future(fut))
        return result.model_dump(mode="json"), how

    async def profile(self, task: Task, candidate_source: str, timeout: float) -> dict:
        """The counters stage for a candidate (CountersReport as a dict); reports that ran to the
        end are kept in the result cache, so asking again costs nothing."""
        from kernelsmith.candidate import Candidate

        key = f"profile:{task.hash}:{Candidate(candidate_source).hash}"
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        report = await asyncio.shield(asyncio.wrap_future(self.backend.profile(task, candidate_source, timeout)))
        record = report.model_dump(mode="json")
        if report.status in ("ok", "missing", "not_permitted", "unsupported"):
            self.cache.put(key, record)
        return record

    async def hardware(self) -> dict:
        with self._lock:
            if self._hardware is None or (self._hardware.done() and self._hardware.exception() is not None):
                self._hardware = self.backend.hardware()
            fut = self._hardware
        return await asyncio.shield(asyncio.wrap_future(fut))

    def health(self) -> dict:
        c = self.counters
        return {
            "status": "ok",
            "backend": self.backend_kind,
            "device": self.device,
            "workers": self.workers,
            "in_flight": self.pending,
            "max_queue": self.max_queue,
            "requests": c.requests,
            "evaluated": c.evaluated,
            "cache_hits": c.cache_hits,
            "joined": c.joined,
            "rejected_full": c.rejected_full,
            "cache_entries": len(self.cache),
            "mean_eval_seconds": round(c.eval_seconds / c.evaluated, 3) if c.evaluated else None,
            "uptime_s": round(time.time() - c.started, 1),
            "containment": self.containment,
        }
