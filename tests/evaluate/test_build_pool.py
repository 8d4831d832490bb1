"""The build pool and cache on the CPU (kernelsmith/evaluate/build/): C++ extensions built with the
host compiler ahead of their evaluation, once per content, in a contained builder; the candidate's
time limit starts after its build. Each build here takes ~30 s on two cores."""

from __future__ import annotations

from concurrent.futures import wait
from pathlib import Path

import pytest

from kernelsmith.candidate import Candidate
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.pool import EvalPool
from kernelsmith.evaluate.result import Status
from kernelsmith.task import Task

CASES = Path(__file__).resolve().parents[1] / "cases" / "cpp"
TASK = Task.from_file(CASES / "task_relu.py")
# Well under one build (~30 s here): a verdict of `correct` shows the build was not on this clock.
TIMEOUT = 15.0


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELSMITH_CACHE_DIR", str(tmp_path_factory.mktemp("kscache")))
        yield


def _pool(**opts) -> EvalPool:
    return EvalPool(device="cpu", workers=1, options=EvalOptions(device="cpu", timeout=TIMEOUT, **opts))


def test_an_extension_is_built_ahead_once_and_then_comes_from_the_cache():
    candidate = Candidate.from_file(CASES / "relu_ext.py")
    with _pool() as pool:
        first = [pool.submit(TASK, candidate), pool.submit(TASK, candidate)]  # the same build, asked twice
        wait(first)
        assert pool._builds is not None and pool._builds.started == 1
        for fut in first:
            r = fut.result()
            assert r.status is Status.correct and r.success, (r.error, r.flag_details)
            assert [(b.name, b.source, b.ok) for b in r.builds] == [("ks_test_relu_ext", "pool", True)]
            assert r.stages.build > 5  # the pool's build, waited for outside the candidate's clock
    with _pool() as pool:  # a new pool (another run): the cache is on disk
        again = pool.evaluate(TASK, candidate)
        assert pool._builds is not None and pool._builds.started == 0
    assert again.status is Status.correct, again.error
    assert [(b.source, b.ok) for b in again.builds] == [("cache", True)]
    assert again.stages.build < 1.0


def test_a_compile_error_is_the_compilers_first_lines_and_is_cached():
    candidate = Candidate.from_file(CASES / "compile_error_ext.py")
    with _pool() as pool:
        first = pool.evaluate(TASK, candidate)
        second = pool.evaluate(TASK, candidate)
        assert pool._builds is not None and pool._builds.started == 1
    for r in (first, second):
        assert r.status is Status.compile_error
        assert "building extension 'ks_test_broken_ext' failed" in (r.error or "")
        assert "undeclared_zero" in (r.error or "") and "was not declared in this scope" in (r.error or "")
        assert "FAILED:" not in (r.error or "") and "hook.py" not in (r.error or "")
    assert [b.source for b in first.builds] == ["pool"] and [b.source for b in second.builds] == ["cache"]


def test_a_build_known_only_at_run_time_runs_in_the_sandbox_under_its_own_limit():
    candidate = Candidate.from_file(CASES / "relu_ext_runtime.py")
    with _pool(build_timeout=3) as pool:
        late = pool.evaluate(TASK, candidate)
    assert late.status is Status.timeout
    assert "took longer than the build time limit (3 s" in (late.error or "")
    with _pool() as pool:
        r = pool.evaluate(TASK, candidate)
        assert pool._builds is None  # nothing could be built ahead
    assert r.status is Status.correct, r.error
    assert [(b.source, b.ok) for b in r.builds] == [("sandbox", True)]
    assert r.stages.build > 5 and r.stages.load < TIMEOUT
