"""Baselines once per task and card, through the warm CPU pool (Triton interpreter): every candidate of
a task after the first is compared against the figures its judge measured for the first, with the
cache file on or off, steady or not; two tasks are measured once each.

Reuse is read two ways: the verdict's `baseline_source`, and the reference's timing statistics
themselves, which two measurements never repeat to the last digit.
"""

from __future__ import annotations

from pathlib import Path

from conftest import case_path

from kernelsmith.evaluate import EvalOptions, EvalResult
from kernelsmith.task import Task

RESULT_WAIT = 300.0
KERNEL = case_path("elementwise_triton").read_text()


def candidate(block: int) -> str:
    """The elementwise kernel with BLOCK elements a program: a distinct candidate per block."""
    return KERNEL.replace("BLOCK = 4096", f"BLOCK = {block}")


def new_task(tmp_path: Path, name: str) -> Task:
    """elementwise_task under a hash no other test has timed."""
    source = case_path("elementwise_task").read_text() + f"\nRUN = {str(tmp_path / name)!r}\n"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return Task.from_file(path)


def evaluate(pool, task: Task, block: int, opts: EvalOptions | None = None) -> EvalResult:
    r = pool.submit(task, candidate(block), opts).result(timeout=RESULT_WAIT)
    assert r.success, f"status={r.status.value} error={r.error!r}"
    return r


def reference_figures(r: EvalResult) -> tuple:
    assert r.reference_timing and r.reference_eager_timing
    return r.reference_timing.model_dump(), r.reference_eager_timing.model_dump(), r.baseline_unsteady


def test_two_tasks_are_timed_once_each_for_all_their_candidates(cpu_pool, tmp_path):
    tasks = [new_task(tmp_path, "a"), new_task(tmp_path, "b")]
    results = {t.hash: [] for t in tasks}
    for block in (256, 1024, 2048):  # the two tasks' candidates interleaved, as two searches on one pool
        for t in tasks:
            results[t.hash].append(evaluate(cpu_pool, t, block))
    for rs in results.values():
        assert [r.baseline_source for r in rs] == ["measured", "this run", "this run"]
        assert [r.baseline_cached for r in rs] == [False, True, True]
        assert len({repr(reference_figures(r)) for r in rs}) == 1  # the first's figures, kept
    a, b = results.values()
    assert reference_figures(a[0]) != reference_figures(b[0])  # each task its own measurement


def test_without_the_cache_a_task_is_timed_once_too(cpu_pool, tmp_path, cache_dir):
    """`use_baseline_cache=False` neither reads nor writes the file, but the judge keeps its figures;
    `reuse_baselines=False` times them anew."""
    task = new_task(tmp_path, "no_cache")
    before = {p.name: p.read_bytes() for p in sorted(cache_dir.glob("baselines.sqlite*"))}
    opts = cpu_pool.options.model_copy(update={"use_baseline_cache": False})
    rs = [evaluate(cpu_pool, task, block, opts) for block in (256, 1024, 2048)]
    assert [r.baseline_source for r in rs] == ["measured", "this run", "this run"]
    assert len({repr(reference_figures(r)) for r in rs}) == 1
    fresh = evaluate(cpu_pool, task, 256, opts.model_copy(update={"reuse_baselines": False}))
    assert fresh.baseline_source == "measured" and not fresh.baseline_cached
    assert reference_figures(fresh) != reference_figures(rs[0])
    assert {p.name: p.read_bytes() for p in sorted(cache_dir.glob("baselines.sqlite*"))} == before
