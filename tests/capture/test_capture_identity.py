"""A captured task's identity is its region's, not its timing: a re-capture of the same model, whose
measured shares and ranks differ, keeps every task's file name and `Region:` line, and a run made on
the first capture's task is still found by `apply` (CPU)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kernelsmith.apply.patch_dir import choose, read_capture
from kernelsmith.apply.run import apply_runs
from kernelsmith.capture import profile
from kernelsmith.capture.run import capture
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import RunStore
from kernelsmith.task import Task

MODEL = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(32, 64)
        self.down = nn.Linear(64, 32)
        self.weight = nn.Parameter(torch.rand(64) + 0.5)

    def forward(self, x):
        h = self.up(x)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return torch.softmax(self.down(torch.nn.functional.gelu(h)), -1)


def make():
    torch.manual_seed(0)
    return Block(), (torch.randn(8, 32),)
"""
KERNEL = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    pass\n"


@pytest.fixture
def entry(tmp_path: Path) -> str:
    path = tmp_path / "two_gemms.py"
    path.write_text(textwrap.dedent(MODEL))
    return f"{path}:make"


def _stored_run(run_dir: Path, task_path: Path) -> Path:
    """A run on the task as `kernelsmith evolve` stores one: the task's text and one success."""
    task = Task.from_file(task_path)
    store = RunStore(run_dir)
    for key, value in (("task_hash", task.hash), ("task_name", task.name), ("task_source", task.source)):
        store.set_meta(key, value)
    store.add(Program(iteration=0, island=0, operator="seed", code=KERNEL, status="correct", speedup=1.5))
    store.close()
    return run_dir


def _reversed_times(monkeypatch) -> None:
    """Another capture's timings: every op's time scaled by its place, so that the ranks turn over."""
    real = profile.read_times

    def other(*args, **kwargs):
        times = real(*args, **kwargs)
        times.per_op_us = [(i + 1) * 1000.0 for i in range(len(times.per_op_us))]
        times.total_us = sum(times.per_op_us) * 1.5
        return times

    monkeypatch.setattr(profile, "read_times", other)


def test_a_recapture_keeps_names_and_identity_and_apply_finds_earlier_runs(entry, tmp_path: Path, monkeypatch):
    out = tmp_path / "cap"
    first = capture(entry, out)
    norm = next(t for t in first.tasks if not t.fused and "gelu.default" in t.ops)
    run = _stored_run(tmp_path / "runs/norm", out / norm.file)  # type: ignore[operator]
    _reversed_times(monkeypatch)
    second = capture(entry, out)
    ranks = lambda c: [t.name for t in sorted(c.tasks, key=lambda t: t.rank)]
    assert ranks(first) != ranks(second)  # the timings moved the ranks (and the shares)
    manifest = read_capture(out)
    [(chosen, code, task)] = choose([run], out, manifest, min_speedup=0.0)
    assert (
        task["file"] == norm.file
        and code == KERNEL
        and chosen.share == next(t.share for t in second.tasks if t.name == norm.name)
    )
    by_name = lambda c: {t.name: (t.file, t.region) for t in c.tasks}
    assert by_name(first) == by_name(second)  # names, files and identities stay
    assert all(t.file == f"{t.name}.py" and len(t.region) == 16 for t in second.tasks)
    assert "Share" not in (out / norm.file).read_text()  # type: ignore[operator]
    applied = apply_runs([run], out, tmp_path / "patch", check=False, min_speedup=0.0)
    assert [c.name for c in applied.kernels] == [norm.name] and applied.kernels[0].why is None
    assert json.loads((tmp_path / "patch/patch.json").read_text())["kernels"][0]["task"] == f"tasks/{norm.file}"
