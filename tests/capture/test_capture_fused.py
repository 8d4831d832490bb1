"""Regions across the library boundary (issue 57): capture proposes, beside the split regions, a library op with
its neighbours (a norm into a GEMM, a GEMM into its epilogue, sibling GEMMs of one input, decode attention with
its rotary and KV-cache append), each a task whose reference is the model's own ops and whose GEMM weights are
its parameters. The split regions stay exactly as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO

from kernelsmith.capture.run import capture

LLAMA = f"{REPO / 'examples/llama_decode/model.py'}:tiny_decode_step"
KINDS = {"prologue", "epilogue", "siblings", "siblings+epilogue", "prologue+siblings", "attention"}


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> tuple[Path, dict]:
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("fused") / "cap"
    capture(LLAMA, out, forwards=1)
    return out, json.loads((out / "capture.json").read_text())


def test_every_kind_is_proposed_written_and_checked_against_the_model(llama):
    out, manifest = llama
    fused = [t for t in manifest["tasks"] if t["fused"]]
    assert {t["fused"] for t in fused} == KINDS
    assert all(t["file"] and t["validated"] for t in fused), [(t["name"], t["why"]) for t in fused if not t["file"]]
    for t in fused:
        text = (out / t["file"]).read_text()
        assert t["name"].startswith(t["fused"].replace("+", "_") + "_") and not t["library"]
        assert t["library_ops"] and all(op in t["ops"] for op in t["library_ops"])
        assert f"Fused: {t['fused']}, across the library boundary: {', '.join(t['library_ops'])}" in text
    # the input norm into Q, K and V (by name: the ranking by time may put the add + norm + gate, up task first)
    qkv = next(
        t for t in fused if t["fused"] == "prologue+siblings" and t["name"].endswith("llamarmsnorm_llamaattention")
    )
    assert qkv["library_ops"] == ["mm.default"] * 3 and qkv["module_class"] == "LlamaDecoderLayer"
    text = (out / qkv["file"]).read_text()
    # the weights are its parameters, named by their path below the layer (the same in every layer)
    for name in ("input_layernorm_weight", "self_attn_q_proj_weight", "self_attn_k_proj_weight"):
        assert f"self.{name} = nn.Parameter(" in text
    assert "torch.ops.aten.t.default(self.self_attn_q_proj_weight)" in text
    gating = next(t for t in fused if t["fused"] == "siblings+epilogue" and "silu.default" in t["ops"])
    assert gating["calls"] == 2 and gating["module_class"] == "LlamaMLP"  # one task for both layers
    attention = next(t for t in fused if t["fused"] == "attention")
    assert {"cat.default", "neg.default"} <= set(attention["ops"])  # the cache append and the rotary embedding
    # shares overlap (a fused region holds split ones' ops): the covered share counts each op once
    split = sum(t["share"] for t in manifest["tasks"] if t["file"] and not t["fused"])
    assert split <= manifest["covered_share"] + 1e-9 and manifest["covered_share"] <= 1.0
    shares = [t["share"] for t in manifest["tasks"]]
    assert shares == sorted(shares, reverse=True)  # ranked with the split regions, by time


def test_the_split_regions_are_as_they_were(llama, tmp_path):
    """The same capture without fused regions (`--no-fused`): every split task has the same name, identity and
    file, and no fused task is written."""
    out, manifest = llama
    capture(LLAMA, tmp_path / "split", forwards=1, fused=False)
    before = json.loads((tmp_path / "split/capture.json").read_text())["tasks"]
    after = [t for t in manifest["tasks"] if not t["fused"]]
    assert not any(t["fused"] for t in before)
    key = lambda t: (t["name"], t["region"], t["file"], t["calls"], t["ops"])
    assert sorted(map(key, before)) == sorted(map(key, after))
    for t in before:
        if t["file"]:
            assert (tmp_path / "split" / t["file"]).read_text() == (out / t["file"]).read_text()


def test_fused_tasks_hold_every_shape_captured(tmp_path):
    """At --shape batch=1 and batch=2 a fused task holds both, its batch a named size."""
    pytest.importorskip("transformers")
    done = capture(LLAMA, tmp_path / "cap", forwards=1, shapes=[{"batch": 1}, {"batch": 2}])
    gating = next(t for t in done.tasks if t.fused == "siblings+epilogue" and "silu.default" in t.ops)
    assert gating.shapes == ["batch=1", "batch=2"], gating.shapes_why
    assert "SHAPES = [" in (tmp_path / "cap" / gating.file).read_text()  # type: ignore[operator]
