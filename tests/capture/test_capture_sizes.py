"""Captured tasks declare CPU sizes (`--small`): the region's extents as named constants, the large
ones small at CPU sizes, those tied to parameters as they are; the task at CPU sizes runs the same
ops at the same ranks and dtypes, or it declares none and says why (CPU)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from kernelsmith.capture.run import capture
from kernelsmith.errors import UserError
from kernelsmith.evaluate.runtime import build_model, make_inputs
from kernelsmith.task import load_module
from kernelsmith.task_sizes import load_task, read_cpu_sizes

GPT = """
import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96)
        self.proj = nn.Linear(32, 32)

    def forward(self, x):
        q, k, v = self.qkv(x).split(32, dim=-1)
        att = torch.softmax((q @ k.transpose(-2, -1)) * 0.17, dim=-1)
        return self.proj(att @ v)


def make():
    torch.manual_seed(0)
    return Attn(), (torch.randn(2, 2048, 32),)
"""


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sizes")
    (tmp / "gpt_attn.py").write_text(textwrap.dedent(GPT))
    done = capture(f"{tmp / 'gpt_attn.py'}:make", tmp / "cap", forwards=1)
    return {t.name: tmp / "cap" / t.file for t in done.tasks if t.file}, tmp


def _run_small(path: Path, tmp: Path) -> tuple[list, object, object]:
    task = load_task(path, small=True)
    module = load_module(task.source, tmp / f"small_{path.name}", f"_small_{path.stem}")
    model = build_model(module.Model, module, 0, "cpu")
    inputs = make_inputs(module, 0, "cpu")
    with torch.no_grad():
        return inputs, model, model(*inputs)


def test_a_real_shape_softmax_runs_small_at_its_structure(captured):
    files, tmp = captured
    path = files["attn_mul_softmax"]
    assert read_cpu_sizes(path.read_text()) == {"X0_DIM1": 8}  # 2048 -> 8; the batch of 2 as it is
    assert "torch.ops.aten._softmax.default(" in path.read_text() and "[2, X0_DIM1, X0_DIM1]" in path.read_text()
    inputs, _, out = _run_small(path, tmp)
    assert [list(x.shape) for x in inputs] == [[2, 8, 8]] and inputs[0].dtype == torch.float32
    assert out.shape == (2, 8, 8) and torch.isfinite(out).all()


def test_extents_tied_to_parameters_stay_and_views_follow(captured):
    files, tmp = captured
    inputs, model, out = _run_small(files["linear_proj"], tmp)  # [2, T, 32] viewed as [2 T, 32], then addmm
    assert [list(x.shape) for x in inputs][0] == [2, 8, 32] and out.shape == (16, 32)
    assert model.get_parameter("bias").shape == (32,)  # the projection's width, as the model's
    source = files["attn_bmm"].read_text()  # qkv's [2 T, 96] viewed as [2, T, 96]: T is the extent halved
    assert "X0_DIM0 // 2" in source
    inputs, _, out = _run_small(files["attn_bmm"], tmp)
    assert [list(x.shape) for x in inputs] == [[8, 96]] and out.shape == (2, 4, 4)


def test_a_task_that_does_not_hold_at_cpu_sizes_declares_none_and_says_why(captured):
    files, _ = captured
    path = files["attn_bmm_attn"]  # its [2, T, T] input has T tied to the other input's view: pinned
    source = path.read_text()
    assert "CPU_SIZES" not in source.split('"""', 2)[2] and "Note: no CPU_SIZES (--small): " in source
    with pytest.raises(UserError, match="declares no CPU_SIZES"):
        load_task(path, small=True)


def test_a_task_small_as_captured_declares_empty_cpu_sizes(tmp_path: Path):
    (tmp_path / "tiny_norm.py").write_text(
        "import torch\n\n\ndef make():\n    return torch.nn.LayerNorm(32), (torch.randn(4, 32),)\n"
    )
    done = capture(f"{tmp_path / 'tiny_norm.py'}:make", tmp_path / "cap", forwards=1)
    [path] = [tmp_path / "cap" / t.file for t in done.tasks if t.file]
    assert read_cpu_sizes(path.read_text()) == {}  # as written: --small runs it as it is
    assert load_task(path, small=True).source == path.read_text()
