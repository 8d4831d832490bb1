"""The regions' searches on one pool (kernelsmith/optimize/search.py), with a pool of two workers that answers
every candidate "correct" after a while: two searches at once, the third when one has ended, in the order
given; each its own run store, its own time limit and iteration cap; one that cannot start says why and the
others go on."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path

from conftest import case_path

from kernelsmith.evaluate.result import EvalResult, Status
from kernelsmith.evolve.run import evolve_config
from kernelsmith.optimize.search import Hooks, Search, Searched, run_searches, slots
from kernelsmith.task import Task

ANSWER_S = 0.15


class SlowPool:
    """Two workers' worth of a pool: each candidate is "correct" at 1.0x after ANSWER_S (one without a ModelNew
    does not compile)."""

    workers = 2

    def __init__(self) -> None:
        self.lock, self.submitted = threading.Lock(), 0

    def submit(self, task, candidate, options=None) -> Future:
        with self.lock:
            self.submitted += 1
        fut: Future = Future()
        verdict = EvalResult(status=Status.correct, correct=True, speedup=1.0, candidate_ms=1.0, device="cpu")
        if "ModelNew" not in str(candidate):  # a seed that is no candidate
            verdict = EvalResult(status=Status.compile_error, correct=False, error="no ModelNew", device="cpu")
        threading.Timer(ANSWER_S, fut.set_result, args=(verdict,)).start()
        return fut

    def hardware(self) -> Future:
        fut: Future = Future()
        fut.set_result({"device": "cpu"})
        return fut


def test_searches_run_as_many_at_once_as_the_pool_has_workers_heaviest_first(tmp_path: Path):
    task, seed = Task.from_file(case_path("elementwise_task")), case_path("elementwise_small_blocks").read_text()
    cfg = evolve_config(None, {"evaluation": {"device": "cpu"}, "max_in_flight": 1}, "tune")
    searches = [
        Search(name, task, tmp_path / name, seed if name != "broken" else "x = 1\n", cfg.model_copy(update=limits))
        for name, limits in (
            ("first", {"iterations": 2, "time_limit": 60.0}),
            ("second", {"iterations": 50, "time_limit": 0.5}),
            ("broken", {"iterations": 2, "time_limit": 60.0}),
            ("last", {"iterations": 1, "time_limit": 60.0}),
        )
    ]
    pool, ended, spans = SlowPool(), [], {}
    hooks = Hooks()

    def end(done: Searched) -> None:
        ended.append(done)
        spans[done.name] = time.monotonic()

    hooks.ended = end
    done = run_searches(searches, pool, hooks)
    assert slots(pool) == 2
    by_name = {d.name: d for d in done}
    assert [d.name for d in done] == ["first", "second", "broken", "last"]
    assert by_name["first"].summary and by_name["first"].summary["iterations_done"] == 2
    assert by_name["second"].summary and by_name["second"].summary["stop_reason"].startswith("time limit")
    assert by_name["last"].summary and by_name["last"].summary["iterations_done"] == 1
    broken = by_name["broken"]
    assert broken.summary is None and broken.failed and "\n" not in broken.failed
    assert not (tmp_path / "broken").exists()  # a search that never started leaves no run directory
    start = hooks.started_at
    # Two at once: the second began before the first ended; the third waited for one of them to end.
    assert start["second"] < spans["first"] and start["broken"] >= min(spans["first"], spans["second"])
    assert start["first"] <= start["second"] <= start["broken"] <= start["last"]
    assert all(isinstance(d, Searched) for d in ended) and len(ended) == 4


WORKER_FAILED = (
    "evaluation worker failed:\nTraceback (most recent call last):\n  File \"judge.py\", line 311, in check\n"
    "RuntimeError: Expected all tensors to be on the same device, but got other is on cuda:0"
)


class FailingPool(SlowPool):
    """SlowPool, except that every evaluation of the task named "crashes" fails as a judge's bug does
    (the pool's future raises RuntimeError, as GPT-2's did on an H100, issue 54)."""

    def submit(self, task, candidate, options=None) -> Future:
        if task.name != "crashes":
            return super().submit(task, candidate, options)
        fut: Future = Future()
        threading.Timer(ANSWER_S, fut.set_exception, args=(RuntimeError(WORKER_FAILED),)).start()
        return fut


def test_a_search_whose_evaluation_fails_by_no_doing_of_the_users_ends_in_one_line_and_the_others_go_on(
    tmp_path: Path,
):
    seed = case_path("elementwise_small_blocks").read_text()
    cfg = evolve_config(None, {"evaluation": {"device": "cpu"}, "max_in_flight": 1}, "tune")
    cfg = cfg.model_copy(update={"iterations": 2, "time_limit": 60.0})
    searches = [
        Search(name, Task.from_file(case_path("elementwise_task"), name=name), tmp_path / name, seed, cfg, trace)
        for name, trace in (("before", None), ("crashes", tmp_path / "failures/crashes.txt"), ("after", None))
    ]
    done = {d.name: d for d in run_searches(searches, FailingPool())}
    assert done["before"].summary and done["before"].summary["iterations_done"] == 2 and not done["before"].crashed
    assert done["after"].summary and done["after"].summary["iterations_done"] == 2
    crashed = done["crashes"]
    assert crashed.summary is None and crashed.crashed and crashed.failed is not None and "\n" not in crashed.failed
    assert crashed.failed.startswith("its search failed: RuntimeError: evaluation worker failed: ... RuntimeError: ")
    assert "Expected all tensors to be on the same device" in crashed.failed
    assert str(tmp_path / "failures/crashes.txt") in crashed.failed
    kept = (tmp_path / "failures/crashes.txt").read_text()
    assert "Traceback" in kept and "Expected all tensors" in kept
