"""`optimize --shape` (issue 55): the tiny Llama decode step optimized at batch 1 and 4 with the example's own
seeds, each judged at both shapes; the patch it writes serves a batch-4 model as it does a batch-1 one."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from conftest import REPO

from kernelsmith.capture.entry import call_entry
from kernelsmith.evolve.store import RunStore
from kernelsmith.optimize import OptimizeOptions, optimize
from kernelsmith.patch.install import install

ENTRY = f"{REPO / 'examples/llama_decode/model.py'}:tiny_decode_step"


def test_the_llama_step_optimized_at_two_batch_sizes_serves_both(tmp_path: Path, monkeypatch):
    pytest.importorskip("transformers")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    opts = OptimizeOptions(
        entry=ENTRY,
        out=tmp_path / "work",
        device="cpu",
        seeds=f"{REPO / 'examples/llama_decode/seeds.py'}:seed_for",
        iterations=0,
        budget_s=60,
        shapes=[{"batch": 1}, {"batch": 4}],
    )
    done = optimize(opts, lambda _: None)
    assert done.passed, done.reason
    work = tmp_path / "work"
    assert json.loads((work / "optimize.json").read_text())["settings"]["shapes"] == [{"batch": 1}, {"batch": 4}]
    patched = json.loads((work / "tiny_decode_step_patch/patch.json").read_text())["kernels"]
    assert len(patched) >= 4
    for kernel in patched:  # each start was judged at both: its trials name the other shape
        store = RunStore(work / "runs" / kernel["name"])
        best = store.best()
        store.close()
        assert best is not None and best.eval is not None
        assert [t["sizes"] for t in best.eval["trials"]][-1] == {"X0_DIM0": 4}, kernel["name"]
    model = call_entry(ENTRY, "cpu", {"batch": 4}).model
    twin = copy.deepcopy(model)
    patch = install(model, work / "tiny_decode_step_patch")
    try:
        made = call_entry(ENTRY, "cpu", {"batch": 4})
        with torch.no_grad():
            got = model(*copy.deepcopy(made.args), **copy.deepcopy(made.kwargs)).logits
            want = twin(*copy.deepcopy(made.args), **copy.deepcopy(made.kwargs)).logits
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)
        assert all(c.fired > 0 for c in patch.counts.values()) and not patch.unjudged
    finally:
        patch.remove()
