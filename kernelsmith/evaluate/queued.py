"""The frame both evaluation pools share (`EvalPool` here, `RayPool` on Ray): futures queued in
order, one dispatch thread per worker slot, and a `close()` that lets submitted work run for a
while, then abandons what is left. A subclass says how to phrase a call and how a slot runs it.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future

from kernelsmith.candidate import Candidate
from kernelsmith.evaluate.counters import DEFAULT_TIMEOUT, CountersReport
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import EvalResult, Status
from kernelsmith.task import Task


def worker_lost(device: str, times: int, last_error: str) -> EvalResult:
    """The verdict of a candidate whose evaluation worker was lost `times` times in a row: about the
    machine, not the candidate (`infra_error`), with the last loss's reason."""
    return EvalResult(
        status=Status.runtime_error,
        correct=False,
        device=device,
        infra_error=True,
        error=f"the evaluation worker was lost {times} times on this candidate: {last_error}",
    )


class QueuedPool:
    CLOSE_WAIT = 30.0  # seconds close() lets submitted evaluations run before abandoning them

    device: str
    options: EvalOptions

    def _start(self, slots: int, name: str) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._put_lock = threading.Lock()  # nothing enters the queue behind close()'s sentinels
        self._closed = False
        self._abandoned = False  # close() gave up waiting: what is left fails instead of running
        self._threads = [
            threading.Thread(target=self._serve_slot, args=(i,), daemon=True, name=f"{name}-{i}") for i in range(slots)
        ]
        for t in self._threads:
            t.start()

    # -- what a subclass provides --------------------------------------------------------------
    def _evaluate_call(self, task: Task, source: str, opts: EvalOptions):
        raise NotImplementedError

    def _hardware_call(self):
        raise NotImplementedError

    def _profile_call(self, task: Task, source: str, timeout: float):
        raise NotImplementedError

    def _serve_slot(self, slot: int) -> None:
        """Run calls from `self._next()` until it returns None."""
        raise NotImplementedError

    def _abandon_running(self) -> None:
        """close() gave up waiting: stop what still runs (its futures then get an error)."""

    def _after_close(self) -> None:
        """Last step of close()."""

    # -- EvalBackend ---------------------------------------------------------------------------
    @property
    def workers(self) -> int:
        return len(self._threads)

    def submit(self, task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> Future:
        if self._closed:
            raise RuntimeError("the pool is closed")
        source = candidate.source if isinstance(candidate, Candidate) else candidate
        opts = (options or self.options).model_copy(update={"device": self.device})
        return self._put(self._evaluate_call(task, source, opts), opts)

    def hardware(self) -> Future:
        """Future[dict]: the machine as a worker sees it (GPU name, SM count, measured ceilings)."""
        return self._put(self._hardware_call(), self.options)

    def profile(self, task: Task, candidate: Candidate | str, timeout: float = DEFAULT_TIMEOUT) -> Future:
        """Future[CountersReport]: Nsight Compute's counters of the candidate's heaviest kernels,
        run by a judge between evaluations (ncu_stage.py). Meant for a candidate with a verdict."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        source = candidate.source if isinstance(candidate, Candidate) else candidate
        opts = self.options.model_copy(update={"timeout": timeout})
        inner = self._put(self._profile_call(task, source, timeout), opts)
        outer: Future = Future()

        def settle(done: Future) -> None:
            exc = done.exception()
            got = done.result() if exc is None else None
            if isinstance(got, CountersReport):
                outer.set_result(got)
            else:  # the worker was lost (an infrastructure verdict) or failed: no counters, and why
                why = str(exc) if exc is not None else getattr(got, "error", None) or "no reply"
                outer.set_result(CountersReport(status="failed", message=why.splitlines()[0][:300] if why else None))

        inner.add_done_callback(settle)
        return outer

    def evaluate(self, task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> EvalResult:
        return self.submit(task, candidate, options).result()

    def _put(self, call, opts: EvalOptions, fut: Future | None = None) -> Future:
        """Queue `call`; its result goes to `fut` (a new future unless given)."""
        fut = fut if fut is not None else Future()
        with self._put_lock:
            if self._closed:
                raise RuntimeError("the evaluation pool was closed before this evaluation started")
            self._queue.put((fut, call, opts))
        return fut

    def _next(self) -> tuple | None:
        """The next (future, call, options) this slot should run; None once the pool closes."""
        while True:
            item = self._queue.get()
            if item is None:
                return None
            fut = item[0]
            if not fut.set_running_or_notify_cancel():
                continue
            if self._abandoned:
                fut.set_exception(RuntimeError("the evaluation pool was closed before this evaluation started"))
                continue
            return item

    def close(self, wait: float | None = None) -> None:
        """Stop the workers. Evaluations submitted before still run for up to `wait` seconds
        (CLOSE_WAIT by default); then the rest are abandoned: running ones are stopped, and
        every abandoned future gets an error."""
        with self._put_lock:
            if self._closed:
                return
            self._closed = True
            for _ in self._threads:
                self._queue.put(None)
        end = time.monotonic() + (self.CLOSE_WAIT if wait is None else wait)
        for t in self._threads:
            t.join(timeout=max(0.0, end - time.monotonic()))
        self._abandoned = True
        self._abandon_running()
        for t in self._threads:
            t.join(timeout=10)
        self._after_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
