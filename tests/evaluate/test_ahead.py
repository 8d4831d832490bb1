"""Candidates loaded ahead of their turn (kernelsmith/evaluate/judging/ahead.py, issue 56): while a judge
judges one candidate, the queue's next one of the same task loads and runs its first forward in a spare
sandbox, which is stopped before anything is timed and resumed in its turn. The verdicts are the ones
of a candidate loaded in its turn; one that never answers is killed before the timed stage; one that
does not come next is killed unused. The cheat cases through this path: tests/redteam/test_redteam_cpu.py."""

from __future__ import annotations

import os
import time

import pytest

from kernelsmith.evaluate import EvalOptions, EvalPool
from kernelsmith.evaluate.judging import ahead
from kernelsmith.evaluate.result import Status
from kernelsmith.evaluate.sandboxing.process import descendants
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle
from kernelsmith.task import Task
from tests.conftest import case_path

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux's /proc")

WAIT = 300.0


def _source(name: str, variant: int = 0) -> str:
    return case_path(name).read_text() + f"\n_VARIANT = {variant}\n"  # another program each (comments do not count)


def _sandboxes(pool: EvalPool) -> list[str]:
    """The processes below the pool's judge (its template, spares and sandboxes: forks share a command line)."""
    return [_state(p) for p in descendants(pool._judges[0].proc.pid)]


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0]
    except OSError:
        return "gone"


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def test_queued_candidates_are_loaded_ahead_and_judged_as_in_their_turn(cpu_pool):
    task = Task.from_file(case_path("rowsum_task"))
    cpu_pool.evaluate(task, _source("rowsum_triton", -1))  # the task's baselines, measured before the queue
    names = [
        "rowsum_triton",
        "rowsum_triton",
        "rowsum_off_by_one",
        "rowsum_triton",
        "fault_syntax_error",
        "fault_raises",
    ]
    futures = [cpu_pool.submit(task, _source(n, i)) for i, n in enumerate(names)]
    results = [f.result(timeout=WAIT) for f in futures]
    statuses = [r.status for r in results]
    assert statuses == [Status.correct] * 2 + [
        Status.incorrect,
        Status.correct,
        Status.compile_error,
        Status.runtime_error,
    ]
    assert results[3].success and not results[3].flags, results[3]
    # Loaded while the one before it was judged (the second may have come after the first was sent); a syntax
    # error never reaches a sandbox, so the one after it is loaded in its turn.
    ahead_of = [r.loaded_ahead_s is not None for r in results]
    assert ahead_of[2:] == [True, True, False, False], [r.loaded_ahead_s for r in results]
    assert results[3].stages.load < 0.5


def test_a_candidate_that_does_not_come_next_is_killed_unused(cache_dir):
    task = Task.from_file(case_path("rowsum_task"))
    opts = EvalOptions(device="cpu", timeout=60, memory_limit="1G", trials=1)
    with EvalPool(device="cpu", workers=1, options=opts) as pool:
        pool.evaluate(task, _source("rowsum_triton", 0))
        idle = len(_sandboxes(pool))  # its template and its spare
        first = pool.submit(task, _source("fault_hang", 1), opts.model_copy(update={"timeout": 5.0}))
        skipped = pool.submit(task, _source("rowsum_triton", 2))
        last = pool.submit(task, _source("rowsum_triton", 3))
        time.sleep(0.5)  # the hang is being judged, the second loaded ahead beside it
        assert skipped.cancel()
        assert first.result(timeout=WAIT).status == Status.timeout
        r = last.result(timeout=WAIT)
        assert r.success and r.loaded_ahead_s is None, r
        # What is left: the judge's spare and its template, no sandbox of the cancelled candidate.
        assert len(_sandboxes(pool)) == idle, _sandboxes(pool)


def test_a_load_that_never_answers_is_killed_before_anything_is_timed(tmp_path, monkeypatch):
    monkeypatch.setattr(ahead, "SETTLE_S", 3.0)
    sb = SandboxHandle("cpu", tmp_path)
    req = {
        "task_hash": "t",
        "candidate_hash": "c",
        "task_source": case_path("rowsum_task").read_text(),
        "candidate_source": case_path("fault_hang").read_text(),  # its first forward never returns
    }
    early = ahead.Ahead(sb, req, seed_init=1, memory_limit=2**31, warm_seed=2)
    t0 = time.monotonic()
    assert early.settle() is False
    assert time.monotonic() - t0 < 10
    assert sb.proc.poll() is not None  # killed, not left running beside the timed calls


def test_a_loaded_candidate_is_stopped_until_its_turn(tmp_path):
    sb = SandboxHandle("cpu", tmp_path)
    req = {
        "task_hash": "t",
        "candidate_hash": "c",
        "task_source": case_path("rowsum_task").read_text(),
        "candidate_source": case_path("rowsum_triton").read_text(),
    }
    early = ahead.Ahead(sb, req, seed_init=1, memory_limit=2**31, warm_seed=2)
    try:
        assert early.settle() is True
        with open(f"/proc/{sb.proc.pid}/stat") as fh:
            assert fh.read().split(") ")[1][0] == "T"  # stopped
        assert early.matches("t", "c") and not early.matches("t", "d")
        assert early.take() is sb
        with open(f"/proc/{sb.proc.pid}/stat") as fh:
            assert fh.read().split(") ")[1][0] != "T"
        assert sb.wait(time.monotonic() + 30, 2**31, "load")["op"] == "loaded"  # its answer, read in its turn
    finally:
        early.close()
