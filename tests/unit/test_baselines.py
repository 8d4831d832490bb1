"""kernelsmith.evaluate.measuring.baselines: a judge times a task's baselines once, whatever the cache.

The timer runs here in the test's process on the CPU, as the judge runs it. What is counted is the
timing itself (`BaselineTimer.figures`, every figure's measurement) and torch.compile's calls, not the
label the timer gives its answer.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import case_path

from kernelsmith.evaluate.measuring import baselines
from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache
from kernelsmith.evaluate.measuring.baselines import BaselineTimer
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.runtime import build_model, make_inputs
from kernelsmith.identity import program_hash
from kernelsmith.task import load_module

OPTS = EvalOptions(device="cpu", compile_baseline=False)
NO_CACHE = OPTS.model_copy(update={"use_baseline_cache": False})


def forward(model, inputs):
    with torch.no_grad():
        return model(*inputs)


def run_reference(task, model, seed: int):
    inputs = make_inputs(task, seed, "cpu")
    return inputs, forward(model, inputs)


class Judge:
    """A timer as one judge process holds it."""

    def __init__(self, cache: Path):
        self.timer = BaselineTimer("cpu", "cpu:test", torch.__version__, forward, BaselineCache(cache))

    def measure(self, task, opts: EvalOptions = OPTS) -> tuple[dict, str]:
        model = build_model(task.Model, task, 0, "cpu")  # a new reference per candidate, as the judge builds
        task_hash = program_hash(Path(str(task.__file__)).read_text())
        return self.timer.measure(task, task_hash, model, opts, run_reference)


def load(tmp_path: Path, name: str):
    return load_module(case_path(name).read_text(), tmp_path / f"{name}.py", f"ks_test_baselines_{name}")


@pytest.fixture
def timed(monkeypatch) -> Counter:
    """Every figure the timers measure, by name ("reference", "compile")."""
    counts: Counter = Counter()
    real = BaselineTimer.figures

    def figures(timer, name, *args, **kw):
        counts[name] += 1
        return real(timer, name, *args, **kw)

    monkeypatch.setattr(BaselineTimer, "figures", figures)
    return counts


@pytest.fixture
def judge(tmp_path, timed) -> Judge:
    return Judge(tmp_path / "baselines.sqlite")


def steady(monkeypatch, spread: bool = False) -> None:
    """Every figure judged unsteady (`spread`) or steady, whatever the loaded host measures."""
    why = (lambda name, stats, device: f"{name} spread" if stats else None) if spread else (lambda *a: None)
    monkeypatch.setattr(baselines, "unsteady", why)


def test_without_the_cache_a_task_is_timed_once_for_all_its_candidates(tmp_path, judge, timed):
    task = load(tmp_path, "elementwise_task")
    first, source = judge.measure(task, NO_CACHE)
    assert source == "measured" and timed == Counter(reference=1 + bool(first["unsteady"]))
    for _ in range(3):
        again, source = judge.measure(task, NO_CACHE)
        assert source == "this run" and again is first
    assert timed["reference"] == 1 + bool(first["unsteady"])
    assert not (tmp_path / "baselines.sqlite").exists()  # --no-cache still neither writes nor reads


def test_unsteady_figures_are_measured_once_and_stay_marked(tmp_path, judge, timed, monkeypatch):
    steady(monkeypatch, spread=True)
    task = load(tmp_path, "elementwise_task")
    first, source = judge.measure(task)
    assert source == "measured" and first["unsteady"]
    assert timed == Counter(reference=2)  # measured once more before it was given up, as before
    for _ in range(3):
        again, source = judge.measure(task)
        assert (source, again["unsteady"]) == ("this run", first["unsteady"])
    assert timed == Counter(reference=2)
    assert BaselineCache(tmp_path / "baselines.sqlite").entries() == []  # never stored


def test_a_steady_payload_another_judge_stored_replaces_an_unsteady_one(tmp_path, judge, timed, monkeypatch):
    task = load(tmp_path, "elementwise_task")
    steady(monkeypatch, spread=True)
    assert judge.measure(task)[0]["unsteady"]
    steady(monkeypatch)
    stored, source = Judge(tmp_path / "baselines.sqlite").measure(task)
    assert source == "measured" and stored["unsteady"] is None
    again, source = judge.measure(task)
    assert source == "cache" and again["reference"] == stored["reference"]


def test_two_tasks_are_timed_once_each_and_a_new_judge_reads_the_cache(tmp_path, judge, timed, monkeypatch):
    steady(monkeypatch)
    tasks = [load(tmp_path, "elementwise_task"), load(tmp_path, "rowsum_task")]
    assert [judge.measure(t)[1] for t in tasks] == ["measured"] * 2
    assert [judge.measure(t)[1] for t in tasks] == ["this run"] * 2
    assert timed == Counter(reference=2)
    later = Judge(tmp_path / "baselines.sqlite")  # a resumed run's judge
    assert [later.measure(t)[1] for t in tasks * 2] == ["cache"] * 4
    assert timed == Counter(reference=2)


def test_reuse_baselines_false_times_anew(tmp_path, judge, timed):
    task = load(tmp_path, "elementwise_task")
    fresh = OPTS.model_copy(update={"reuse_baselines": False})
    first, _ = judge.measure(task, fresh)
    second, source = judge.measure(task, fresh)
    assert source == "measured" and second is not first
    assert timed["reference"] >= 2


def test_a_task_is_compiled_once_in_a_process(tmp_path, judge, timed, monkeypatch):
    """Two timing settings of one task (two cache keys): torch.compile is asked once, and its compiled
    reference is timed for both."""
    compiles = []
    real = torch.compile

    def compile_eagerly(model):
        compiles.append(model)
        return real(model, backend="eager")  # no C++ build on the CPU

    monkeypatch.setattr(torch, "compile", compile_eagerly)
    task = load(tmp_path, "elementwise_task")
    compiled = OPTS.model_copy(update={"compile_baseline": True})
    for opts in (compiled, compiled, compiled.model_copy(update={"l2": "warm"})):
        payload, _ = judge.measure(task, opts)
        assert payload["compile_error"] is None and payload["compile"] is not None
    assert len(compiles) == 1 and timed["compile"] == 2


def test_a_large_reference_is_not_kept_compiled(tmp_path, judge, monkeypatch):
    """Weights above COMPILED_KEEP_BYTES stay with their verdict: another timing setting compiles anew
    (each setting's figures are still measured once)."""
    compiles = []
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model: compiles.append(model) or real(model, backend="eager"))
    monkeypatch.setattr(baselines, "COMPILED_KEEP_BYTES", -1)
    task = load(tmp_path, "elementwise_task")
    compiled = OPTS.model_copy(update={"compile_baseline": True})
    for opts in (compiled, compiled, compiled.model_copy(update={"l2": "warm"})):
        judge.measure(task, opts)
    assert len(compiles) == 2 and judge.timer.compiled == {}
