"""Regions across the library boundary (issue 57) applied to a tiny Llama decode step and a tiny BERT: each
kernel takes its fused region (a norm into a GEMM, a GEMM into its gating, merged sibling projections, decode
attention with its rotary and KV-cache append) in eager and compile mode, and the model's outputs (logits and
the grown KV cache) match. The kernels compute their region in their own way: Triton kernels in the
interpreter (norm + GEMV, GEMV + SiLU gating), torch code (one GEMM over Q, K and V weights concatenated once
per layer by `derive_weights`; SDPA with grouped heads). Where autograd records a region, the model's own ops
run and its gradients are the model's."""

from __future__ import annotations

import copy
import json
import os
import warnings
from pathlib import Path

import pytest
import torch
from conftest import REPO
from test_apply import _run

from kernelsmith.apply.e2e import check
from kernelsmith.apply.options import ApplyOptions
from kernelsmith.apply.patch_dir import Chosen, write_patch
from kernelsmith.apply.run import apply_runs
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.run import capture
from kernelsmith.evaluate.runtime import build_model, make_inputs
from kernelsmith.patch.install import install
from kernelsmith.patch.interpreter import interpret_triton
from kernelsmith.task import load_module

LLAMA = f"{REPO / 'examples/llama_decode/model.py'}:tiny_decode_step"

BERT = """
import torch
from transformers import BertConfig, BertModel


def make():
    torch.manual_seed(0)
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                        vocab_size=100, max_position_embeddings=32, attn_implementation="sdpa")
    return BertModel(config).eval(), {"input_ids": torch.randint(0, 100, (2, 12))}
"""

TRITON = """
import triton
import triton.language as tl


def _launch(kernel, *args, n, k):
    block_k = triton.next_power_of_2(k)
    kernel[(args[0].shape[0], triton.cdiv(n, 32))](*args, k, n, BLOCK_N=32, BLOCK_K=block_k)
"""

# The final norm into the LM head (prologue): residual add, RMSNorm, then the GEMV, one row a program.
NORM_GEMV = (
    TRITON
    + """

@triton.jit
def _norm_gemv(x_ptr, res_ptr, nw_ptr, w_ptr, out_ptr, K, N, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    kmask = ks < K
    h = tl.load(x_ptr + row * K + ks, mask=kmask, other=0.0) + tl.load(res_ptr + row * K + ks, mask=kmask, other=0.0)
    normed = tl.load(nw_ptr + ks, mask=kmask, other=0.0) * (h / tl.sqrt(tl.sum(h * h, axis=0) / K + 1e-6))
    w = tl.load(w_ptr + cols[:, None] * K + ks[None, :], mask=(cols[:, None] < N) & kmask[None, :], other=0.0)
    tl.store(out_ptr + row * N + cols, tl.sum(w * normed[None, :], axis=1), mask=cols < N)


class ModelNew(Model):
    def forward(self, x0, x1):
        x, res = x0.contiguous(), x1.reshape(x0.shape).contiguous()
        w = self.lm_head_weight.contiguous()
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        _launch(_norm_gemv, x, res, self.model_norm_weight.contiguous(), w, out, n=w.shape[0], k=x.shape[1])
        return out
"""
)

# The gate projection into its gating (epilogue): silu(x @ Wg^T) * up, the up projection's output an input.
GEMV_GATE = (
    TRITON
    + """

@triton.jit
def _gemv_gate(x_ptr, w_ptr, up_ptr, out_ptr, K, N, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    x = tl.load(x_ptr + row * K + ks, mask=ks < K, other=0.0)
    w = tl.load(w_ptr + cols[:, None] * K + ks[None, :], mask=(cols[:, None] < N) & (ks[None, :] < K), other=0.0)
    acc = tl.sum(w * x[None, :], axis=1)
    up = tl.load(up_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row * N + cols, acc / (1.0 + tl.exp(-acc)) * up, mask=cols < N)


class ModelNew(Model):
    def forward(self, x0, x1):
        x = x0.reshape(-1, x0.shape[-1]).contiguous()
        w = self.gate_proj_weight.contiguous()
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        _launch(_gemv_gate, x, w, x1.contiguous(), out, n=w.shape[0], k=x.shape[1])
        return out
"""
)

# The input norm into Q, K and V (prologue + siblings): one GEMM over the three weights, concatenated once per
# binding (derive_weights), not at every call.
NORM_QKV = """

class ModelNew(Model):
    def __init__(self):
        super().__init__()
        self.derive_weights()

    def derive_weights(self):
        parts = (self.self_attn_q_proj_weight, self.self_attn_k_proj_weight, self.self_attn_v_proj_weight)
        self.qkv_weight = torch.cat(parts).contiguous()
        self.widths = [p.shape[0] for p in parts]

    def forward(self, x0):
        h = x0 * torch.rsqrt(x0.pow(2).mean(-1, keepdim=True) + 1e-6) * self.input_layernorm_weight
        return tuple((h.reshape(-1, h.shape[-1]) @ self.qkv_weight.t()).split(self.widths, dim=1))
"""

# Decode attention with its rotary embedding and the KV cache's append, in torch's own words.
ATTENTION = """
import torch.nn.functional as F


class ModelNew(Model):
    def forward(self, q, k, v, cos, sin, keys, values):
        b, d = q.shape[0], keys.shape[-1]
        heads = lambda t: t.view(b, 1, -1, d).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)

        def rope(t):
            first, second = t.chunk(2, dim=-1)
            return t * cos + torch.cat((-second, first), dim=-1) * sin

        keys, values = torch.cat([keys, rope(heads(k))], dim=-2), torch.cat([values, heads(v)], dim=-2)
        out = F.scaled_dot_product_attention(rope(heads(q)), keys, values, scale=d**-0.5, enable_gqa=True)
        return keys, values, out
"""

# BERT's Q, K and V (siblings, with biases): one addmm over the concatenated weights and biases.
BERT_QKV = """

class ModelNew(Model):
    def __init__(self):
        super().__init__()
        self.derive_weights()

    def derive_weights(self):
        self.w = torch.cat([self.query_weight, self.key_weight, self.value_weight]).t().contiguous()
        self.b = torch.cat([self.query_bias, self.key_bias, self.value_bias])

    def forward(self, x0):
        out = torch.addmm(self.b, x0.reshape(-1, x0.shape[-1]), self.w)
        return tuple(t.contiguous() for t in out.chunk(3, dim=1))
"""


@pytest.fixture(autouse=True)
def _fresh_compiles():
    """Each compile runs Inductor's passes (no graph from a cache), so the patch's graph pass sees it."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        yield


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    pytest.importorskip("transformers")
    cap = tmp_path_factory.mktemp("fused_llama") / "cap"
    capture(LLAMA, cap, forwards=1)
    return cap, _by_kind(cap)


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> tuple[str, Path, dict[str, dict]]:
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("fused_bert")
    (root / "bert_tiny.py").write_text(BERT)
    entry = f"{root / 'bert_tiny.py'}:make"
    capture(entry, root / "cap", forwards=1)
    return entry, root / "cap", _by_kind(root / "cap")


def _by_kind(cap: Path) -> dict[str, dict]:
    """The written fused tasks by a short key: the kind and what its ops hold."""
    tasks = [t for t in json.loads((cap / "capture.json").read_text())["tasks"] if t["file"] and t["fused"]]
    text = {t["name"]: (cap / t["file"]).read_text() for t in tasks}
    one = lambda kind, *words: next(
        (t for t in tasks if t["fused"] == kind and all(w in text[t["name"]] for w in words)), {}
    )
    return {
        "norm_gemv": one("prologue", "self.model_norm_weight", "self.lm_head_weight"),
        "gate": one("epilogue", "self.gate_proj_weight", "silu"),  # the up projection's output an input
        "norm_qkv": one("prologue+siblings", "self.input_layernorm_weight", "self.self_attn_v_proj_weight"),
        "attention": one("attention", "_scaled_dot_product"),
        "qkv": one("siblings", "self.query_weight", "self.key_weight", "self.value_weight"),
        "gelu": one("epilogue", "gelu", "self.dense_weight"),
    }


def _patch(cap: Path, out: Path, kernels: list[tuple[dict, str]]) -> Path:
    manifest = json.loads((cap / "capture.json").read_text())
    picks = []
    for task, code in kernels:
        assert task, "the capture has no such fused task"
        chosen = Chosen("runs/x", task["name"], task["share"], task["calls"], 2.0, 1)
        picks.append((chosen, (cap / task["file"]).read_text() + code, task))
    write_patch(out, cap, manifest, picks)
    return out


def _kernel_matches_its_task(cap: Path, task: dict, code: str, tmp_path: Path) -> None:
    """The kernel computes its task's reference on the task's own inputs (as an evaluation builds both). Its Triton
    kernels run in the interpreter, switched on as a patch switches it where triton was imported first."""
    path = tmp_path / f"{task['name']}.py"
    path.write_text((cap / task["file"]).read_text() + code)
    before = os.environ.get("TRITON_INTERPRET")
    try:
        assert interpret_triton(tmp_path, {"kernels": [{"kernel": path.name}]}) is None
        module = load_module(path.read_text(), path, f"_fused_{id(code)}")
        want = build_model(module.Model, module, 0, "cpu")(*make_inputs(module, 0, "cpu"))
        got = build_model(module.ModelNew, module, 0, "cpu")(*make_inputs(module, 0, "cpu"))
    finally:  # the patch's switch of triton's own functions stays; the variable is put back
        if before is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = before
    for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def _checked(entry: str, patch_dir: Path, names: list[str], fired: dict[str, float] | None = None) -> dict[str, str]:
    """Each mode's check passes: outputs match, each kernel took its regions (`fired`: per forward). The kernels'
    ways of serving, as the patch says them."""
    made = call_entry(entry, "cpu")
    served = {}
    for mode in ("eager", "compile"):
        patch = install(made.model, patch_dir, "cpu")
        try:
            e = check(made, patch, "cpu", reps=2, mode=mode)
            served = {name: patch.served(name) for name in names}
        finally:
            patch.remove()
        assert e.outputs_match, (mode, e.outputs_said)
        for name in names:
            assert e.fired[name] == (fired or {}).get(name, 2.0), (mode, name, e.fired, e.within)
    return served


def test_a_norm_into_the_lm_head_and_the_gate_projection_into_its_gating_as_triton_kernels(llama, tmp_path):
    cap, tasks = llama
    kernels = [(tasks["norm_gemv"], NORM_GEMV), (tasks["gate"], GEMV_GATE)]
    for task, code in kernels:
        _kernel_matches_its_task(cap, task, code, tmp_path)
    assert tasks["gate"]["library_ops"] == ["mm.default"] and tasks["norm_gemv"]["library_ops"] == ["mm.default"]
    patch_dir = _patch(cap, tmp_path / "triton_patch", kernels)
    _checked(LLAMA, patch_dir, [t["name"] for t, _ in kernels], {tasks["norm_gemv"]["name"]: 1.0})


def test_merged_qkv_concatenated_once_per_layer_and_decode_attention_with_its_cache(llama, tmp_path):
    """The norm + QKV kernel's region is layer 0's (layer 1's norm begins with the residual add, a region of its
    own), yet the same ops in layer 1 are found too: two regions a forward. Its merged weight is made once per
    layer and said: 128 x 64 float32, 32 KiB a layer."""
    cap, tasks = llama
    kernels = [(tasks["norm_qkv"], NORM_QKV), (tasks["attention"], ATTENTION)]
    for task, code in kernels:
        _kernel_matches_its_task(cap, task, code, tmp_path)
    attention = (cap / tasks["attention"]["file"]).read_text()
    # the cache is its input (named `cache.layers[0].keys`, or `past_key_values.layers[0].keys` under transformers 5.17)
    assert "Fused: attention" in attention and ".layers[0].keys" in attention
    patch_dir = _patch(cap, tmp_path / "qkv_patch", kernels)
    served = _checked(LLAMA, patch_dir, [t["name"] for t, _ in kernels])
    assert "it holds 64 KiB derived from the model's weights (derive_weights)" in served[tasks["norm_qkv"]["name"]]


def test_bert_merged_qkv_and_a_linear_with_its_gelu(bert, tmp_path):
    """BERT's Q, K and V, alike in shape, are taken as three projections (never one of them thrice); its
    intermediate Linear + GELU is the whole of BertIntermediate's forward, so its forward is swapped."""
    entry, cap, tasks = bert
    kernels = [(tasks["qkv"], BERT_QKV), (tasks["gelu"], "\n\nModelNew = Model\n")]
    _kernel_matches_its_task(cap, tasks["qkv"], BERT_QKV, tmp_path)
    served = _checked(entry, _patch(cap, tmp_path / "bert_patch", kernels), [t["name"] for t, _ in kernels])
    assert "its modules' forward calls it" in served[tasks["gelu"]["name"]]


def test_kernelsmith_apply_takes_runs_on_fused_tasks_and_checks_each_mode(llama, tmp_path):
    """`kernelsmith apply` as optimize calls it, on search runs of a fused and a split task whose regions overlap
    (the gate projection + SiLU-mul holds the SiLU-mul): the check passes in eager and compile mode, the larger
    region's kernel takes the ops both hold, and each mode says how it is served."""
    cap, tasks = llama
    split = next(t for t in json.loads((cap / "capture.json").read_text())["tasks"] if t["name"] == "llamamlp_silu_mul")
    runs = [
        _run(tmp_path / "runs" / t["name"], cap / t["file"], [((cap / t["file"]).read_text() + code, 2.0)])
        for t, code in ((tasks["gate"], GEMV_GATE), (split, "\n\nModelNew = Model\n"))
    ]
    done = apply_runs(
        runs, cap, tmp_path / "fused_patch", ApplyOptions(modes=("eager", "compile"), reps=2, min_speedup=0.0)
    )
    assert done.passed, done.reason
    assert [e.mode for e in done.checks] == ["eager", "compile"]
    assert all(e.fired[tasks["gate"]["name"]] == 2.0 for e in done.checks)
    assert all(e.within.get("llamamlp_silu_mul") == tasks["gate"]["name"] for e in done.checks)


def test_gradients_through_fused_regions_are_the_models(llama, tmp_path):
    """Where autograd records the forward, the fused regions run as the model's own ops: the gradients are
    the unpatched model's, and the patch says why in one warning."""
    cap, tasks = llama
    patch_dir = _patch(cap, tmp_path / "grad_patch", [(tasks["gate"], GEMV_GATE), (tasks["norm_qkv"], NORM_QKV)])
    made = call_entry(LLAMA, "cpu")
    model, twin = made.model, copy.deepcopy(made.model)
    patch = install(model, patch_dir, "cpu")
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            for m in (model, twin):
                kwargs = copy.deepcopy(made.kwargs)
                m(**kwargs).logits.square().sum().backward()
        for (name, p), q in zip(model.named_parameters(), twin.parameters()):
            assert p.grad is not None and torch.equal(p.grad, q.grad), name  # pyright: ignore[reportArgumentType]
        assert all(c.fired == 0 for c in patch.counts.values()), patch.counts
        assert sum(c.autograd for c in patch.counts.values()) > 0
        lines = [str(w.message) for w in said if "no backward" in str(w.message)]
        assert len(lines) == 1 and "\n" not in lines[0], lines
    finally:
        patch.remove()
