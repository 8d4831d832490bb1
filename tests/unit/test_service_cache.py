"""kernelsmith.serve.service: the result cache, request keys, and the service's admission, joining
and caching, over a fake backend whose futures the tests resolve themselves (no HTTP, no sandbox)."""

from __future__ import annotations

import asyncio
import math
import threading
import types
from concurrent.futures import Future

import pytest

from kernelsmith.candidate import Candidate
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.queued import worker_lost
from kernelsmith.evaluate.result import EvalResult, Status
from kernelsmith.evaluate.sandboxing import containment
from kernelsmith.serve.service import EvalService, QueueFull, ResultCache, request_key

OPTS = EvalOptions(device="cpu")
TASK = types.SimpleNamespace(hash="task0123456789ab")
# Programs that differ in code (a candidate's identity may ignore comments and formatting).
SRC_A = "class ModelNew:\n    version = 'a'\n"
SRC_B = "class ModelNew:\n    version = 'b'\n"
SRC_C = "class ModelNew:\n    version = 'c'\n"

CORRECT = EvalResult(status=Status.correct, correct=True, speedup=2.0)
INCORRECT = EvalResult(status=Status.incorrect, correct=False, error="max abs err 1.0")
TIMEOUT = EvalResult(status=Status.timeout, correct=False, error="no verdict within 180 s")
INFRA = worker_lost("cpu", 2, "JudgeDied: the judge exited with code -9")  # both pools' verdict for a lost worker


class FakeBackend:
    """What EvalService calls: submit() and hardware(), each returning a Future the test resolves."""

    def __init__(self):
        self.submitted: list[tuple[object, str, EvalOptions, Future]] = []
        self.hardware_calls: list[Future] = []

    def submit(self, task, candidate, options=None) -> Future:
        fut: Future = Future()
        self.submitted.append((task, candidate, options, fut))
        return fut

    def hardware(self) -> Future:
        fut: Future = Future()
        self.hardware_calls.append(fut)
        return fut

    def close(self) -> None:
        pass

    def resolve(self, i: int, result: EvalResult) -> None:
        self.submitted[i][3].set_result(result)


@pytest.fixture
def backend(monkeypatch) -> FakeBackend:
    # The service reads the host's containment plan at start; probing it runs bubblewrap (a subprocess).
    plan = types.SimpleNamespace(summary=lambda: {"mode": "fake"})
    monkeypatch.setattr(containment, "plan", lambda device: plan)
    return FakeBackend()


def service(backend: FakeBackend, **kw) -> EvalService:
    return EvalService(backend, device="cpu", workers=kw.pop("workers", 1), **kw)


def drive(coro):
    """Run a scenario; one that waits on a verdict never resolved fails instead of hanging."""
    return asyncio.run(asyncio.wait_for(coro, timeout=5))


async def settle() -> None:
    """Let every started task run up to its next wait."""
    for _ in range(3):
        await asyncio.sleep(0)


# --- request_key ---------------------------------------------------------------------------------


def test_request_key_is_task_candidate_and_an_options_digest():
    task_hash, cand_hash, digest = request_key("t", "c", OPTS).split(":")
    assert (task_hash, cand_hash) == ("t", "c")
    assert len(digest) == 16 and int(digest, 16) >= 0


def test_request_key_is_stable_for_equal_options():
    assert request_key("t", "c", EvalOptions(device="cpu")) == request_key(
        "t", "c", EvalOptions(device="cpu", trials=5)
    )


@pytest.mark.parametrize(
    "change",
    [{"trials": 6}, {"atol": 1e-3}, {"rtol": 1e-3}, {"torch_ops": "none"}, {"device": "cuda"}, {"max_reps": 999}],
)
def test_request_key_changes_with_any_option(change):
    assert request_key("t", "c", OPTS) != request_key("t", "c", OPTS.model_copy(update=change))


def test_request_key_changes_with_task_and_candidate():
    keys = {request_key("t1", "c1", OPTS), request_key("t2", "c1", OPTS), request_key("t1", "c2", OPTS)}
    assert len(keys) == 3


# --- ResultCache ---------------------------------------------------------------------------------


def test_cache_miss_is_none():
    assert ResultCache(4).get("nothing") is None


def test_cache_returns_what_was_put():
    cache = ResultCache(4)
    cache.put("k", {"status": "correct"})
    assert cache.get("k") == {"status": "correct"}
    assert len(cache) == 1


def test_cache_evicts_the_least_recently_put():
    cache = ResultCache(2)
    for k in ("a", "b", "c"):
        cache.put(k, {"k": k})
    assert cache.get("a") is None
    assert cache.get("b") == {"k": "b"} and cache.get("c") == {"k": "c"}
    assert len(cache) == 2


def test_cache_get_makes_an_entry_recent():
    cache = ResultCache(2)
    cache.put("a", {"k": "a"})
    cache.put("b", {"k": "b"})
    cache.get("a")
    cache.put("c", {"k": "c"})
    assert cache.get("b") is None
    assert cache.get("a") == {"k": "a"}


def test_cache_put_of_an_existing_key_replaces_it_and_makes_it_recent():
    cache = ResultCache(2)
    cache.put("a", {"v": 1})
    cache.put("b", {"v": 2})
    cache.put("a", {"v": 3})
    cache.put("c", {"v": 4})
    assert cache.get("a") == {"v": 3}
    assert cache.get("b") is None
    assert len(cache) == 2


@pytest.mark.parametrize("size", [0, -1])
def test_cache_of_size_zero_or_less_is_off(size):
    cache = ResultCache(size)
    cache.put("a", {"v": 1})
    assert cache.get("a") is None
    assert len(cache) == 0


def test_cache_under_concurrent_puts_and_gets_keeps_its_bound():
    cache = ResultCache(50)
    errors = []
    start = threading.Barrier(8)

    def work(w: int) -> None:
        try:
            start.wait()
            for i in range(300):
                cache.put(f"{w}-{i}", {"w": w, "i": i})
                got = cache.get(f"{w}-{i // 2}")
                assert got is None or got == {"w": w, "i": i // 2}
        except Exception as exc:  # reported below, from the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache) == 50
    found = {(w, i): cache.get(f"{w}-{i}") for w in range(8) for i in range(300)}
    kept = {k: v for k, v in found.items() if v is not None}
    assert len(kept) == 50
    assert all(v == {"w": w, "i": i} for (w, i), v in kept.items())


# --- the service: misses, hits, joining ------------------------------------------------------------


def test_a_new_request_is_evaluated_once_and_returns_the_verdict_record(backend):
    svc = service(backend)

    async def run():
        task = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        assert len(backend.submitted) == 1 and svc.pending == 1
        backend.resolve(0, CORRECT)
        return await task

    record, how = drive(run())
    assert how == "miss"
    assert record == CORRECT.model_dump(mode="json")
    submitted_task, source, options, _ = backend.submitted[0]
    assert (submitted_task, source, options) == (TASK, SRC_A, OPTS)
    assert svc.pending == 0
    assert (svc.counters.requests, svc.counters.evaluated) == (1, 1)


def test_a_repeated_request_is_a_cache_hit(backend):
    svc = service(backend)

    async def run():
        first = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        backend.resolve(0, CORRECT)
        await first
        return await svc.evaluate(TASK, SRC_A, OPTS)

    record, how = drive(run())
    assert how == "hit"
    assert record == CORRECT.model_dump(mode="json")
    assert len(backend.submitted) == 1
    assert svc.counters.cache_hits == 1 and svc.counters.requests == 2


def test_the_cache_key_is_the_request_key(backend):
    svc = service(backend)

    async def run():
        task = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        backend.resolve(0, CORRECT)
        await task

    drive(run())
    assert svc.cache.get(request_key(TASK.hash, Candidate(SRC_A).hash, OPTS)) == CORRECT.model_dump(mode="json")


def test_identical_concurrent_requests_share_one_evaluation(backend):
    svc = service(backend)

    async def run():
        tasks = [asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS)) for _ in range(3)]
        await settle()
        assert len(backend.submitted) == 1
        backend.resolve(0, INCORRECT)
        return await asyncio.gather(*tasks)

    results = drive(run())
    assert sorted(how for _, how in results) == ["joined", "joined", "miss"]
    assert all(record == INCORRECT.model_dump(mode="json") for record, _ in results)
    assert svc.counters.joined == 2 and svc.counters.evaluated == 1


def test_requests_that_differ_are_not_joined(backend):
    svc = service(backend)

    async def run():
        tasks = [
            asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS)),
            asyncio.create_task(svc.evaluate(TASK, SRC_B, OPTS)),
            asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS.model_copy(update={"trials": 2}))),
            asyncio.create_task(svc.evaluate(types.SimpleNamespace(hash="other-task"), SRC_A, OPTS)),
        ]
        await settle()
        assert len(backend.submitted) == 4
        for i in range(4):
            backend.resolve(i, CORRECT)
        return await asyncio.gather(*tasks)

    assert [how for _, how in drive(run())] == ["miss"] * 4
    assert svc.counters.joined == 0


def test_a_verdict_resolved_from_a_worker_thread_reaches_the_caller_and_the_cache(backend):
    svc = service(backend)

    async def run():
        task = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        t = threading.Thread(target=backend.resolve, args=(0, CORRECT))
        t.start()
        t.join()
        return await task

    assert drive(run())[1] == "miss"
    assert len(svc.cache) == 1 and svc.pending == 0


# --- what is cached --------------------------------------------------------------------------------


@pytest.mark.parametrize("result", [CORRECT, INCORRECT], ids=["correct", "incorrect"])
def test_a_verdict_about_the_candidate_is_cached(backend, result):
    svc = service(backend)

    async def run():
        task = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        backend.resolve(0, result)
        await task
        return await svc.evaluate(TASK, SRC_A, OPTS)

    assert drive(run())[1] == "hit"
    assert len(backend.submitted) == 1


@pytest.mark.parametrize("result", [TIMEOUT, INFRA], ids=["timeout", "infra_error"])
def test_a_verdict_not_about_the_candidate_is_returned_but_not_cached(backend, result):
    assert not result.about_the_candidate
    svc = service(backend)

    async def run():
        first = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        backend.resolve(0, result)
        record, how = await first
        assert (record, how) == (result.model_dump(mode="json"), "miss")
        again = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        assert len(backend.submitted) == 2  # evaluated again, not served from the cache
        backend.resolve(1, CORRECT)
        return await again

    record, how = drive(run())
    assert how == "miss" and record == CORRECT.model_dump(mode="json")
    assert len(svc.cache) == 1
    assert svc.counters.evaluated == 2


def test_a_failed_evaluation_is_raised_to_every_waiter_and_not_cached(backend):
    svc = service(backend)

    async def run():
        tasks = [asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS)) for _ in range(2)]
        await settle()
        backend.submitted[0][3].set_exception(RuntimeError("the task cannot be loaded"))
        return await asyncio.gather(*tasks, return_exceptions=True)

    outcomes = drive(run())
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    assert len(svc.cache) == 0 and svc.pending == 0
    assert svc.counters.evaluated == 0


def test_a_client_that_hangs_up_does_not_cancel_the_shared_evaluation(backend):
    svc = service(backend)

    async def run():
        leaver = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        stayer = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        leaver.cancel()
        await settle()
        assert not backend.submitted[0][3].cancelled()
        backend.resolve(0, CORRECT)
        return await stayer

    assert drive(run()) == (CORRECT.model_dump(mode="json"), "joined")
    assert len(svc.cache) == 1


# --- admission -------------------------------------------------------------------------------------


def test_a_full_queue_rejects_a_new_request_with_a_retry_time(backend):
    svc = service(backend, max_queue=2, workers=2)

    async def run():
        tasks = [asyncio.create_task(svc.evaluate(TASK, src, OPTS)) for src in (SRC_A, SRC_B)]
        await settle()
        with pytest.raises(QueueFull) as info:
            await svc.evaluate(TASK, SRC_C, OPTS)
        for i in range(2):
            backend.resolve(i, CORRECT)
        await asyncio.gather(*tasks)
        return info.value

    exc = drive(run())
    assert exc.retry_after == math.ceil(5.0 / 2)  # no evaluation finished yet: 5 s shared by 2 workers
    assert "retry after 3 s" in str(exc)
    assert len(backend.submitted) == 2
    assert svc.counters.rejected_full == 1


def test_an_identical_request_joins_even_when_the_queue_is_full(backend):
    svc = service(backend, max_queue=1)

    async def run():
        tasks = [asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS)) for _ in range(2)]
        await settle()
        backend.resolve(0, CORRECT)
        return await asyncio.gather(*tasks)

    assert sorted(how for _, how in drive(run())) == ["joined", "miss"]
    assert svc.counters.rejected_full == 0


def test_a_cache_hit_is_served_even_when_the_queue_is_full(backend):
    svc = service(backend, max_queue=1)

    async def run():
        first = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        backend.resolve(0, CORRECT)
        await first
        busy = asyncio.create_task(svc.evaluate(TASK, SRC_B, OPTS))
        await settle()
        hit = await svc.evaluate(TASK, SRC_A, OPTS)
        backend.resolve(1, CORRECT)
        await busy
        return hit

    assert drive(run())[1] == "hit"


def test_a_slot_frees_when_its_evaluation_finishes(backend):
    svc = service(backend, max_queue=1)

    async def run():
        first = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        with pytest.raises(QueueFull):
            await svc.evaluate(TASK, SRC_B, OPTS)
        backend.resolve(0, CORRECT)
        await first
        second = asyncio.create_task(svc.evaluate(TASK, SRC_B, OPTS))
        await settle()
        backend.resolve(1, CORRECT)
        return await second

    assert drive(run())[1] == "miss"


def test_a_zero_queue_rejects_everything_not_cached(backend):
    svc = service(backend, max_queue=0)
    with pytest.raises(QueueFull):
        drive(svc.evaluate(TASK, SRC_A, OPTS))
    assert backend.submitted == []


def test_a_submission_that_raises_reaches_the_caller_and_holds_no_slot(backend):
    svc = service(backend, max_queue=1)

    def refuse(task, candidate, options=None):
        raise ValueError("the task cannot be loaded")

    submit, backend.submit = backend.submit, refuse
    with pytest.raises(ValueError, match="cannot be loaded"):
        drive(svc.evaluate(TASK, SRC_A, OPTS))
    assert svc.pending == 0
    backend.submit = submit

    async def run():
        task = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        backend.resolve(0, CORRECT)
        return await task

    assert drive(run())[1] == "miss"


def test_retry_after_is_the_mean_evaluation_time_shared_by_the_workers(backend):
    svc = service(backend, workers=4)
    svc.counters.evaluated, svc.counters.eval_seconds = 2, 20.0  # 10 s each
    assert svc.retry_after() == 3  # ceil(10 / 4)
    svc.counters.eval_seconds = 0.1
    assert svc.retry_after() == 1  # at least one second


# --- hardware and health ---------------------------------------------------------------------------


def test_hardware_is_asked_once_and_again_after_a_failure(backend):
    svc = service(backend)

    async def ask(outcome):
        task = asyncio.create_task(svc.hardware())
        await settle()
        fut = backend.hardware_calls[-1]
        if not fut.done():
            if isinstance(outcome, Exception):
                fut.set_exception(outcome)
            else:
                fut.set_result(outcome)
        return await task

    with pytest.raises(RuntimeError, match="probe failed"):
        drive(ask(RuntimeError("probe failed")))
    assert drive(ask({"device": "cpu"})) == {"device": "cpu"}  # a failed probe is asked again
    assert drive(ask({"device": "other"})) == {"device": "cpu"}  # a good answer is kept
    assert len(backend.hardware_calls) == 2


def test_health_reports_the_counters(backend):
    svc = service(backend, max_queue=5, cache_size=0)

    async def run():
        task = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        mid = svc.health()
        backend.resolve(0, CORRECT)
        await task
        return mid

    mid = drive(run())
    assert (mid["in_flight"], mid["max_queue"], mid["requests"]) == (1, 5, 1)
    end = svc.health()
    assert end["in_flight"] == 0 and end["evaluated"] == 1 and end["cache_entries"] == 0  # cache off
    assert end["containment"] == {"mode": "fake"} and end["device"] == "cpu"


def test_a_verdict_is_cached_before_its_request_leaves_the_in_flight_table(backend, monkeypatch):
    """No window in which an identical request finds neither the cache nor the evaluation in flight."""
    svc = service(backend)
    seen_in_flight: list[int] = []
    put = svc.cache.put

    def spying_put(key, record):
        seen_in_flight.append(svc.pending)
        put(key, record)

    monkeypatch.setattr(svc.cache, "put", spying_put)

    async def run():
        task = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        backend.resolve(0, CORRECT)
        return await task

    drive(run())
    assert seen_in_flight == [1] and svc.pending == 0


def test_a_request_that_missed_the_cache_just_before_it_was_filled_is_a_hit(backend):
    """The caller looked at the cache, then an identical evaluation finished: _start finds it."""
    svc = service(backend)

    async def run():
        first = asyncio.create_task(svc.evaluate(TASK, SRC_A, OPTS))
        await settle()
        backend.resolve(0, CORRECT)
        await first
        key = request_key(TASK.hash, Candidate(SRC_A).hash, OPTS)
        fut, how = svc._start(key, TASK, SRC_A, OPTS)  # as if the caller's own cache look had missed
        return fut.result(), how

    result, how = drive(run())
    assert how == "hit" and result == CORRECT and len(backend.submitted) == 1
