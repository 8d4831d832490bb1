"""Capture at the shapes a server sees (issue 55): `--shape` calls the factory once a shape, and each task
holds every shape its region holds at (SHAPES), checked on each shape's recorded values; a shape a task
cannot hold is left out of it, said in capture.json."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from conftest import REPO

from kernelsmith.capture.run import capture
from kernelsmith.errors import UserError

ENTRY = f"{REPO / 'examples/llama_decode/model.py'}:tiny_decode_step"

MASKED = """
import torch
import torch.nn as nn


class Masked(nn.Module):
    def forward(self, x, mask):
        return torch.nn.functional.gelu(x * 2).masked_fill(mask, 0.0)


def make(batch=2):
    torch.manual_seed(0)
    return Masked(), (torch.randn(batch, 64), torch.rand(batch, 64) < 0.5)
"""


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> tuple[Path, dict]:
    """The step captured at batch 1 (the main shape) and 4: (the capture, capture.json)."""
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("shapes") / "cap"
    capture(ENTRY, out, forwards=1, shapes=[{"batch": 1}, {"batch": 4}])
    return out, json.loads((out / "capture.json").read_text())


def test_every_task_of_the_step_holds_both_batch_sizes(batches):
    out, manifest = batches
    assert manifest["shapes"] == [{"batch": 1}, {"batch": 4}]
    written = [t for t in manifest["tasks"] if t["file"]]
    assert written and all(t["shapes"] == ["batch=1", "batch=4"] and not t["shapes_why"] for t in written)
    source = (out / "llamamlp_silu_mul.py").read_text()
    assert "X0_DIM0 = 1\n" in source and "SHAPES = [{'X0_DIM0': 4}]" in source  # named though small
    assert "[X0_DIM0, 1, X0_DIM1]" in source
    rotary = (out / "llamarotaryembedding.py").read_text()  # the step's positions: one value, at any batch
    assert "torch.full([X0_DIM0, 1, 1], 16, dtype=torch.int64)" in rotary


def test_a_batch_and_cache_length_pair_is_held_by_the_attention_too(tmp_path):
    pytest.importorskip("transformers")
    capture(ENTRY, tmp_path / "cap", forwards=1, shapes=[{"batch": 1, "cached": 16}, {"batch": 2, "cached": 24}])
    manifest = json.loads((tmp_path / "cap/capture.json").read_text())
    written = [t for t in manifest["tasks"] if t["file"]]
    assert all(t["shapes"] == ["batch=1,cached=16", "batch=2,cached=24"] for t in written)
    sdpa = next(t for t in written if "sdpa" in t["name"])
    shapes = re.search(r"^SHAPES = (.*)$", (tmp_path / "cap" / sdpa["file"]).read_text(), re.M)
    assert shapes is not None and sorted(eval(shapes.group(1))[0].values()) == [2, 25]  # batch, cache + 1


def test_a_task_whose_input_is_a_literal_holds_the_main_shape_only_and_says_why(tmp_path):
    (tmp_path / "masked.py").write_text(textwrap.dedent(MASKED))
    capture(f"{tmp_path / 'masked.py'}:make", tmp_path / "cap", forwards=1, shapes=[{"batch": 2}, {"batch": 3}])
    [task] = [t for t in json.loads((tmp_path / "cap/capture.json").read_text())["tasks"] if t["file"]]
    assert task["shapes"] == ["batch=2"] and "fixed shape" in task["shapes_why"]["batch=3"]
    assert "SHAPES" not in (tmp_path / "cap" / task["file"]).read_text()


def test_a_shape_that_names_no_parameter_of_the_factory_is_one_line(tmp_path):
    pytest.importorskip("transformers")
    with pytest.raises(UserError, match=r"--shape batch=1,beams=2 names beams, not a parameter of the factory"):
        capture(ENTRY, tmp_path / "cap", forwards=1, shapes=[{"batch": 1, "beams": 2}])
    assert not (tmp_path / "cap").exists()
