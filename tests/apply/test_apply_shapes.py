"""The shapes a server sees (issue 55): a tiny Llama decode step captured at batch 1 and 4 (its tasks:
tests/capture/test_capture_shapes.py); a patch of its kernels takes their regions at both, in eager and
compiled modes; at a third batch size the model's own ops run, said once, and the outputs are the model's.
The kernels read their sizes from their inputs (as a kernel judged at every shape must)."""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import pytest
import torch
from conftest import REPO

from kernelsmith.apply.patch_dir import Chosen, write_patch
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.run import capture
from kernelsmith.patch.install import install

pytest.importorskip("transformers")

ENTRY = f"{REPO / 'examples/llama_decode/model.py'}:tiny_decode_step"

ADD_NORM = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(64), requires_grad=False)

    def forward(self, x0, x1):
        h = x1 + x0.view(x1.shape)
        n = self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))
        return h, n, n.view(x0.shape)
"""

SILU_MUL = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x0, x1):
        return torch.nn.functional.silu(x0) * x1
"""
KERNELS = {"llamadecoderlayer_add_llamarmsnorm": ADD_NORM, "llamamlp_silu_mul": SILU_MUL}


@pytest.fixture(autouse=True)
def _fresh_compiles():
    """Each compile runs the patch's graph pass (no graph from Inductor's caches)."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        yield


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> tuple[Path, dict]:
    """The step captured at batch 1 (the main shape) and 4: (the capture, capture.json)."""
    out = tmp_path_factory.mktemp("shapes") / "cap"
    capture(ENTRY, out, forwards=1, shapes=[{"batch": 1}, {"batch": 4}])
    return out, json.loads((out / "capture.json").read_text())


def _patched(batches, tmp_path: Path):
    out, manifest = batches
    tasks = {t["name"]: t for t in manifest["tasks"]}
    kept: list[tuple[Chosen, str | None, dict]] = [
        (Chosen("runs/x", n, tasks[n]["share"], tasks[n]["calls"], 2.0, 1), code, tasks[n])
        for n, code in KERNELS.items()
    ]
    write_patch(tmp_path / "shape_patch", out, manifest, kept)
    model = call_entry(ENTRY, "cpu", {"batch": 1}).model
    return model, copy.deepcopy(model), install(model, tmp_path / "shape_patch")


def _step(patch, run, twin, batch: int) -> tuple[dict[str, int], list[str]]:
    """One forward at `batch`: (regions each kernel took, the warnings about shapes), its outputs the model's."""
    made = call_entry(ENTRY, "cpu", {"batch": batch})
    patch.reset_counts()
    with warnings.catch_warnings(record=True) as said, torch.no_grad():
        warnings.simplefilter("always")
        got = run(*copy.deepcopy(made.args), **copy.deepcopy(made.kwargs))
        want = twin(*copy.deepcopy(made.args), **copy.deepcopy(made.kwargs))
    assert torch.allclose(got.logits, want.logits, atol=1e-5, rtol=1e-5)
    return {n: c.fired for n, c in patch.counts.items()}, [
        str(w.message) for w in said if "not judged" in str(w.message)
    ]


def test_the_patch_takes_its_regions_at_both_batch_sizes_and_says_a_third_once(batches, tmp_path):
    model, twin, patch = _patched(batches, tmp_path)
    try:
        taken = {"llamadecoderlayer_add_llamarmsnorm": 4, "llamamlp_silu_mul": 2}  # the final norm's ops too
        for batch in (1, 4, 1, 4):
            assert _step(patch, model, twin, batch) == (taken, [])
        fired, said = _step(patch, model, twin, 3)
        assert fired == dict.fromkeys(taken, 0) and len(said) == 1
        assert "llamamlp_silu_mul at [3, 160]" in said[0] and "kernelsmith capture --shape" in said[0]
        assert _step(patch, model, twin, 3) == (dict.fromkeys(taken, 0), [])  # once a shape, not once a call
        assert _step(patch, model, twin, 4) == (taken, [])
        assert patch.unjudged == {
            n: [f"[3, {w}]"] for n, w in (("llamadecoderlayer_add_llamarmsnorm", 64), ("llamamlp_silu_mul", 160))
        }
    finally:
        patch.remove()


def test_a_compiled_patched_step_takes_its_regions_at_both_batch_sizes_and_says_a_third_once(batches, tmp_path):
    model, twin, patch = _patched(batches, tmp_path)
    step = torch.compile(model)
    try:
        taken = {"llamadecoderlayer_add_llamarmsnorm": 4, "llamamlp_silu_mul": 2}  # once a compile, not a call
        assert _step(patch, step, twin, 1) == (taken, [])
        assert _step(patch, step, twin, 4) == (taken, [])
        fired, said = _step(patch, step, twin, 3)
        assert fired == dict.fromkeys(taken, 0) and len(said) == 1 and "[3, 64]" in said[0]
    finally:
        patch.remove()
