"""A patch in the default mode (eager) on models a user writes: every region that torch.compile's graph
pass takes, the eager path takes too (the views a neighbouring module makes included), its kernels run
in their regions' place, and the model's outputs are its own. The kernels here are their tasks' own
`Model`, so that outputs compare exactly; `patch.counts` shows which regions were taken."""

from __future__ import annotations

import collections
import contextlib
import copy
import json
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import REPO

from kernelsmith.apply.patch_dir import Chosen, write_patch
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.run import capture
from kernelsmith.patch.install import install

MODELS = """
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)

    def forward(self, x):  # x: [batch, seq, d]: each Linear views its input to 2-D and its output back
        return self.fc2(self.act(self.fc1(x)))


class ConvNeXtBlock(nn.Module):
    '''A depthwise 7x7 conv, a permute to channels-last made by this block, then a LayerNorm module
    and an MLP on the permuted values, layer scale and the residual.'''

    def __init__(self, d=16):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.LayerNorm(d)
        self.mlp = MLP(d)
        self.gamma = nn.Parameter(torch.full((d,), 0.1))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.mlp(self.norm(y)) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(ConvNeXtBlock(), ConvNeXtBlock())

    def forward(self, x):
        return self.blocks(x)


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlps = nn.ModuleList([MLP(), MLP()])

    def forward(self, x):
        for mlp in self.mlps:
            x = x + mlp(x)
        return x


class AskingMLP(MLP):
    def forward(self, x):  # work a trace that reads is_exporting() as True does, the eager forward does not
        y = super().forward(x)
        return y.clone() if torch.compiler.is_exporting() else y


def asking():
    torch.manual_seed(0)
    return AskingMLP(), (torch.randn(2, 5, 16),)


def convnext():
    torch.manual_seed(0)
    return Net(), (torch.randn(2, 16, 8, 8),)


def stack():
    torch.manual_seed(0)
    return Stack(), (torch.randn(2, 5, 16),)


def stack_bf16():
    torch.manual_seed(0)
    return Stack().to(torch.bfloat16), (torch.randn(2, 5, 16, dtype=torch.bfloat16),)
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("eager")
    (root / "user_models.py").write_text(textwrap.dedent(MODELS))
    return root


def _patch_all(entry: str, work: Path, skip: tuple[str, ...] = ("addmm", "convolution", "mm.")) -> dict:
    """Capture `entry` and patch every task whose ops are not a library op's with its own Model as the
    kernel: the capture's manifest."""
    capture(entry, work / "cap", forwards=1)
    manifest = json.loads((work / "cap/capture.json").read_text())
    kept = []
    for task in manifest["tasks"]:
        if task["file"] and not any(op.startswith(s) for op in task["ops"] for s in skip):
            chosen = Chosen("runs/x", Path(task["file"]).stem, task["share"], task["calls"], 2.0, 1)
            kept.append((chosen, (work / "cap" / task["file"]).read_text() + "\n\nModelNew = Model\n", task))
    write_patch(work / "patch", work / "cap", manifest, kept)
    return manifest


def _served(entry: str, work: Path, *calls: tuple) -> tuple[object, list]:
    """The patch installed on a fresh model: (the patch, [(patched output, original output)] per call)."""
    made = call_entry(entry, "cpu")
    model, twin = made.model, copy.deepcopy(made.model)
    patch = install(model, work / "patch")
    outs = []
    with torch.no_grad():
        for args in calls or (made.args,):
            outs.append((model(*args), twin(*args)))
    return patch, outs


def test_an_activation_after_a_3d_linear_and_a_norm_after_a_permute_are_taken(models: Path, tmp_path: Path):
    """ConvNeXt's regions: the GELU between two Linears on [batch, h, w, c] (its task's first and last ops
    are views the Linears make), the LayerNorm after the block's own permute, layer scale + residual."""
    entry = f"{models / 'user_models.py'}:convnext"
    manifest = _patch_all(entry, tmp_path)
    names = {Path(t["file"]).stem: t for t in manifest["tasks"] if t["file"] and not t["fused"]}
    gelu = next(n for n, t in names.items() if "gelu.default" in t["ops"])
    norm = next(n for n, t in names.items() if "native_layer_norm.default" in t["ops"])
    assert names[gelu]["ops"][0] == "view.default" and names[gelu]["scopes"] == ["blocks.0.mlp.act", "blocks.1.mlp.act"]
    assert names[gelu]["covers"] == ["blocks.0.mlp", "blocks.1.mlp"]  # the Linears' views are held by the MLP's call
    assert names[norm]["ops"][0] == "permute.default" and names[norm]["covers"] == ["blocks.0", "blocks.1"]
    patch, [(got, want)] = _served(entry, tmp_path)
    assert torch.equal(got, want)
    assert {gelu, norm} <= set(patch.counts)
    for name in patch.counts:
        assert patch.counts[name].fired == 2, (name, patch.counts[name], patch.served(name))  # both blocks
    assert "traced forward" in patch.served(gelu) and not patch.hooked  # no dispatch mode


def test_a_bf16_forward_patched_in_eager_mode_runs_no_work_the_model_does_not(models: Path, tmp_path: Path):
    """A Linear whose aten ops the rewrite runs (its output view is the GELU region's first op) runs only
    the ops its forward needs: Inductor's mm decomposition traces a float32 copy of each bf16 operand
    and drops it, and on an H100 the rewritten graph ran those copies (the Llama step's device time
    2.5x). Counted by the profiler, as a user would: no copy, no allocation beyond the model's own."""
    entry = f"{models / 'user_models.py'}:stack_bf16"
    _patch_all(entry, tmp_path)
    made = call_entry(entry, "cpu")
    model, twin = made.model, copy.deepcopy(made.model)
    patch = install(model, tmp_path / "patch")

    def ops(m) -> collections.Counter:
        with torch.no_grad():
            m(*made.args)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                out = m(*made.args)
        return collections.Counter(e.name for e in prof.events()), out

    (patched, got), (own, want) = ops(model), ops(twin)
    assert torch.equal(got, want) and patch.counts
    assert all(c.fired >= 2 for c in patch.counts.values()), {n: c.fired for n, c in patch.counts.items()}
    for op in ("aten::copy_", "aten::_to_copy", "aten::empty_strided", "aten::empty_like"):
        assert patched[op] <= own[op], (op, patched[op], own[op])


def test_a_region_is_taken_again_at_each_new_size_and_stays_right(models: Path, tmp_path: Path):
    """A new sequence length traces the forward again (the region's sizes are specialized, the rest may be
    dynamic); at a size whose region is not the task's, the model's own ops run there and outputs stay
    the model's."""
    entry = f"{models / 'user_models.py'}:stack"
    manifest = _patch_all(entry, tmp_path)
    gelu = next(
        Path(t["file"]).stem for t in manifest["tasks"] if t["file"] and not t["fused"] and "gelu.default" in t["ops"]
    )
    torch.manual_seed(1)
    calls = [(torch.randn(2, 5, 16),), (torch.randn(2, 7, 16),), (torch.randn(2, 5, 16),), (torch.randn(2, 9, 16),)]
    patch, outs = _served(entry, tmp_path, *calls)
    assert all(torch.equal(got, want) for got, want in outs)
    assert patch.counts[gelu].fired == 4  # two MLPs at the captured size, twice: the other sizes are not its task's


def test_every_cover_a_process_makes_is_traced(models: Path, tmp_path: Path):
    """Each cover's forward is compiled apart: torch 2.11's torch.compile ran every cover's function (made
    by exec, with no source file) as one shared function whose Dynamo cache fills at 8 entries, and from
    there on the covers' forwards ran untraced, their regions not taken."""
    entry = f"{models / 'user_models.py'}:stack"
    _patch_all(entry, tmp_path)
    for _ in range(10):  # one cover an install (the Stack's forward): 10 past Dynamo's recompile_limit of 8
        patch, [(got, want)] = _served(entry, tmp_path)
        assert torch.equal(got, want) and patch.counts
        assert all(c.fired == 2 for c in patch.counts.values()), {n: c.fired for n, c in patch.counts.items()}


def test_a_transformers_bert_intermediate_gelu_is_taken_in_eager_mode(tmp_path: Path):
    """BERT's intermediate GELU sits between BertIntermediate's dense and BertOutput's dense on
    [batch, seq, hidden]: a region the dispatch mode on the GELU's module never saw whole."""
    pytest.importorskip("transformers")
    (tmp_path / "bert_model.py").write_text(
        textwrap.dedent(
            """
            import torch
            from transformers import BertConfig, BertModel


            def bert():
                torch.manual_seed(0)
                config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                                    vocab_size=100, max_position_embeddings=32)
                model = BertModel(config, add_pooling_layer=False).eval()
                ids = torch.randint(0, 100, (2, 12))
                return model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
            """
        )
    )
    entry = f"{tmp_path / 'bert_model.py'}:bert"
    manifest = _patch_all(entry, tmp_path)
    gelu = next(
        Path(t["file"]).stem for t in manifest["tasks"] if t["file"] and not t["fused"] and "gelu.default" in t["ops"]
    )
    made = call_entry(entry, "cpu")
    model, twin = made.model, copy.deepcopy(made.model)
    patch = install(model, tmp_path / "patch")
    with torch.no_grad():
        got, want = model(**made.kwargs).last_hidden_state, twin(**made.kwargs).last_hidden_state
    assert torch.allclose(got, want, atol=1e-6, rtol=1e-6)
    assert patch.counts[gelu].fired == 2, patch.served(gelu)  # both layers
    # Another sequence length (a dynamic dimension for Dynamo, a graph of sizes the region does not
    # have), then the captured one again: right throughout, the region taken at its own size.
    other = {k: v[:, :9] for k, v in made.kwargs.items()}
    with torch.no_grad():
        got, want = model(**other).last_hidden_state, twin(**other).last_hidden_state
        again = model(**made.kwargs).last_hidden_state
    assert torch.allclose(got, want, atol=1e-6, rtol=1e-6)
    assert torch.allclose(again, twin(**made.kwargs).last_hidden_state, atol=1e-6, rtol=1e-6)
    assert patch.counts[gelu].fired == 4, patch.covers.refused if patch.covers else None


@pytest.mark.parametrize("folded", [False, True], ids=["this-torch", "is_exporting-folded-true"])
def test_a_covered_forward_that_asks_is_exporting_runs_its_eager_branch(models: Path, tmp_path: Path, folded: bool):
    """A forward the patch traces (the MLP covers its GELU region) reads `torch.compiler.is_exporting()` as
    its eager run does (False), on this torch and with Dynamo folding it to True as torch 2.11's does."""
    entry = f"{models / 'user_models.py'}:asking"
    _patch_all(entry, tmp_path)
    made = call_entry(entry, "cpu")
    model, twin = made.model, copy.deepcopy(made.model)
    patch = install(model, tmp_path / "patch")

    def ops(m) -> tuple[collections.Counter, torch.Tensor]:
        with torch.no_grad():
            with _dynamo_folding_is_exporting_to_true() if folded else contextlib.nullcontext():
                m(*made.args)  # the patched model's trace
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                out = m(*made.args)
        return collections.Counter(e.name for e in prof.events()), out

    (patched, got), (own, want) = ops(model), ops(twin)
    assert torch.equal(got, want) and all(c.fired for c in patch.counts.values()) and patch.counts
    assert patched["aten::clone"] <= own["aten::clone"], (patched["aten::clone"], own["aten::clone"])


def test_the_llama_final_norm_kernel_alone_is_right_in_eager_mode(tmp_path: Path):
    """The final norm's task (the last layer's residual add + the model's norm) has the same ops as each
    layer's add + norm; patched alone in eager mode, it takes the final one only and the logits are the
    model's (on an H100 the dispatch mode took a region that was not its own: 99.3% of logits wrong)."""
    pytest.importorskip("transformers")
    entry = f"{REPO / 'examples/llama_decode/model.py'}:tiny_decode_step"
    capture(entry, tmp_path / "cap", forwards=1)
    manifest = json.loads((tmp_path / "cap/capture.json").read_text())
    task = next(t for t in manifest["tasks"] if t["file"] and t["name"].startswith("llamamodel_llamadecoderlayer"))
    chosen = Chosen("runs/x", Path(task["file"]).stem, task["share"], task["calls"], 2.0, 1)
    kernel = (tmp_path / "cap" / task["file"]).read_text() + "\n\nModelNew = Model\n"
    write_patch(tmp_path / "patch", tmp_path / "cap", manifest, [(chosen, kernel, task)])
    made = call_entry(entry, "cpu")
    model, twin = made.model, copy.deepcopy(made.model)
    patch = install(model, tmp_path / "patch")
    with torch.no_grad():
        got = model(**copy.deepcopy(made.kwargs)).logits
        want = twin(**copy.deepcopy(made.kwargs)).logits
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), (got - want).abs().max()
    assert patch.counts[chosen.name].fired == 1  # the final norm; the layers' regions return the add too


@contextlib.contextmanager
def _dynamo_folding_is_exporting_to_true():
    """TorchDynamo as torch 2.11 traces: `torch.compiler.is_exporting()` folded from its table of tracing-state
    functions, where it is True. Torch 2.13's Dynamo reads the attribute `torch.compiler._is_exporting_flag`
    instead; here that attribute reads the table while Dynamo traces (`is_exporting()` itself reads its
    module's global, untouched). On a torch whose Dynamo reads the table, this changes nothing."""
    from torch._dynamo.variables.torch import tracing_state_functions
    from torch._guards import TracingContext

    module, table = torch.compiler, tracing_state_functions()

    class Folding(type(module)):
        @property
        def _is_exporting_flag(self):
            if TracingContext.try_get() is not None:
                return table[module.is_exporting]
            return self.__dict__["_is_exporting_flag"]

        @_is_exporting_flag.setter
        def _is_exporting_flag(self, value):
            self.__dict__["_is_exporting_flag"] = value

    before = module.__class__
    module.__class__ = Folding
    try:
        yield
    finally:
        module.__class__ = before


@pytest.mark.parametrize(
    "device, folded",
    [
        ("cpu", False),
        ("cpu", True),
        pytest.param(
            "cuda",
            False,
            marks=[pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")],
        ),
    ],
    ids=["cpu-this-torch", "cpu-is_exporting-folded-true", "cuda-this-torch"],
)
def test_the_llama_step_patched_in_eager_mode_builds_no_mask_the_model_does_not(
    tmp_path: Path, device: str, folded: bool
):
    """Every region of the Llama decode step patched (each kernel its task's own Model): the patched
    forward runs no work the model's own does not. transformers' `_ignore_causal_mask_sdpa` skips the
    causal mask only untraced (up to 5.17 it asks `is_tracing()`, i.e. `is_compiling()`; from 5.18
    `is_exporting()`, which torch 2.11's Dynamo folds to True), so a traced `LlamaModel.forward` built an
    explicit causal mask (arange, le, where) and ran a masked SDPA on copies of the cache (clone). On an H100
    (torch 2.11, transformers 5.17) that work ate the kernels' gain (the step 1.01x where the verdicts
    predicted 1.11x). `folded` runs this torch's Dynamo as torch 2.11's folds; on a GPU (`pytest -m cuda`)
    the device's own torch runs it. `make test-torch211` runs it with the device's versions."""
    masking_utils = pytest.importorskip("transformers.masking_utils")
    asked = masking_utils.is_tracing
    entry = f"{REPO / 'examples/llama_decode/model.py'}:tiny_decode_step"
    _patch_all(entry, tmp_path, skip=("addmm", "mm.", "bmm", "_scaled_dot", "embedding"))
    made = call_entry(entry, device)
    model, twin = made.model, copy.deepcopy(made.model)
    patch = install(model, tmp_path / "patch")

    def ops(m) -> tuple[collections.Counter, torch.Tensor]:
        with torch.no_grad():
            with _dynamo_folding_is_exporting_to_true() if folded else contextlib.nullcontext():
                m(**copy.deepcopy(made.kwargs))  # the patched model's trace
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                out = m(**copy.deepcopy(made.kwargs)).logits
        return collections.Counter(e.name for e in prof.events()), out

    (patched, got), (own, want) = ops(model), ops(twin)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)  # a split Linear may pick another GEMM on a GPU
    assert patch.counts["llamadecoderlayer_add_llamarmsnorm"].fired >= 2  # the cover is LlamaModel.forward
    # the mask's ops and the cache's copies (its expands are views, and a call the rewrite runs as its aten
    # ops may view once more: the rotary embedding's matmul with transformers 5.17)
    for op in ("aten::arange", "aten::le", "aten::where", "aten::clone", "aten::copy_"):
        assert patched[op] <= own[op], (op, patched[op], own[op])
    from torch._dynamo.variables.torch import tracing_state_functions

    # the user's own compiles fold and trace as before
    assert tracing_state_functions()[torch.compiler.is_exporting] is True
    assert masking_utils.is_tracing is asked
