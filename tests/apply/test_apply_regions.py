"""`kernelsmith apply` on the regions of a small GPT (LayerNorm, causal attention written out, GELU MLP):
regions that end in views (the softmax before `att @ v` ends in an expand) and regions that write
tensors in place (`x += ...`, a cache buffer) are substituted, and leave the model's tensors as the
model's own ops would. The kernels here are their tasks' own `Model` (so outputs compare exactly);
`patch.counts` shows that they took the regions."""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelsmith.apply.patch_dir import Chosen, write_patch
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.run import capture
from kernelsmith.patch.install import install

GPT = """
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, d=16, heads=2, t=8):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v  # an expand of the softmax's output feeds the bmm
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, in_place, d=16):
        super().__init__()
        self.in_place = in_place
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(d), Attn(d), nn.LayerNorm(d)
        self.fc, self.act, self.out = nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        if self.in_place:
            x += self.out(self.act(self.fc(self.ln_2(x))))
            return x
        return x + self.out(self.act(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, in_place=False, vocab=32, d=16, t=8):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(t, d)
        self.blocks = nn.ModuleList([Block(in_place, d) for _ in range(2)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class Cache(nn.Module):
    '''Writes its buffer in place: a norm's output appended to a cache, which it then reads.'''

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.register_buffer("cache", torch.zeros(2, 8, 16))

    def forward(self, x, pos):
        self.cache.index_copy_(1, pos, self.norm(x))
        return self.cache.sum(1)


class Peek(Cache):
    '''The same region, but the model reads the cache through a view of it before the region ends.'''

    def forward(self, x, pos):
        self.cache.index_copy_(1, pos, self.norm(x))
        seen = self.cache[:, 3].sum()
        return self.cache.sum(1) + seen


def gpt():
    torch.manual_seed(0)
    return GPT(), (torch.randint(0, 32, (2, 8)),)


def gpt_in_place():
    torch.manual_seed(0)
    return GPT(in_place=True), (torch.randint(0, 32, (2, 8)),)


def cache():
    torch.manual_seed(0)
    return Cache(), (torch.randn(2, 1, 16), torch.tensor([3]))


def peek():
    torch.manual_seed(0)
    return Peek(), (torch.randn(2, 1, 16), torch.tensor([3]))
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gpt")
    (root / "gpt_model.py").write_text(textwrap.dedent(GPT))
    return root


def _captured(root: Path, factory: str) -> tuple[str, Path, dict]:
    entry = f"{root / 'gpt_model.py'}:{factory}"
    if not (root / factory / "capture.json").is_file():
        capture(entry, root / factory)
    return entry, root / factory, json.loads((root / factory / "capture.json").read_text())


def _patch(root: Path, factory: str, has_op: str, out: Path) -> tuple[str, dict]:
    """A patch of the first written task of `factory`'s capture whose ops include `has_op`, its kernel
    the task's own Model. Returns (ENTRY, the task's capture record)."""
    entry, cap, manifest = _captured(root, factory)
    task = next(t for t in manifest["tasks"] if t["file"] and not t["fused"] and has_op in t["ops"])
    chosen = Chosen("runs/x", Path(task["file"]).stem, task["share"], task["calls"], 2.0, 1)
    kernel = (cap / task["file"]).read_text() + "\n\nModelNew = Model\n"
    write_patch(out, cap, manifest, [(chosen, kernel, task)])
    return entry, task


def _twins(entry: str) -> tuple[torch.nn.Module, torch.nn.Module, tuple]:
    e = call_entry(entry, "cpu")
    return e.model, copy.deepcopy(e.model), e.args


def test_a_region_that_ends_in_an_expand_takes_the_kernels_output(models: Path, tmp_path: Path):
    entry, task = _patch(models, "gpt", "_softmax.default", tmp_path / "p")
    assert task["ops"][-2:] == ["expand.default", "view.default"]  # after its last compute op
    model, twin, args = _twins(entry)
    patch = install(model, tmp_path / "p")
    assert not patch.skipped
    with torch.no_grad():
        got, want = model(*args), twin(*args)
    assert torch.equal(got, want)
    counts = patch.counts[Path(task["file"]).stem]
    assert (counts.fired, counts.dropped, counts.recomputed) == (2, 0, 0)  # both blocks' attention


def test_a_region_that_adds_to_its_input_in_place_leaves_the_model_as_its_own_ops_would(models, tmp_path):
    """The last block's `x += mlp(...)` and the final norm: the task adds to a clone of x; the kernel
    (which writes nothing) serves the region, and x is left as the model's add_ leaves it. The first
    block's `x += ...` and the second block's first norm are the same ops: the kernel serves them too."""
    entry, task = _patch(models, "gpt_in_place", "add_.Tensor", tmp_path / "p")
    model, twin, args = _twins(entry)
    patch = install(model, tmp_path / "p")
    assert not patch.skipped
    with torch.no_grad():
        got, want = model(*args), twin(*args)
    assert torch.equal(got, want)
    counts = patch.counts[Path(task["file"]).stem]
    assert (counts.fired, counts.dropped) == (2, 0)


@pytest.mark.parametrize("factory, fired, dropped", [("cache", 2, 0), ("peek", 0, 2)])
def test_a_buffer_the_region_writes_in_place_is_left_as_the_models_own_ops_leave_it(
    models, tmp_path, factory, fired, dropped
):
    """A norm's output appended to a cache buffer (index_copy_), then read: the buffer holds the same
    values after each forward. Peek reads the cache through a view of it before the region ends: the
    match runs as the model's own ops."""
    entry, task = _patch(models, "cache", "index_copy_.default", tmp_path / "p")
    model, twin, (x, _) = _twins(entry.replace(":cache", f":{factory}"))
    patch = install(model, tmp_path / "p")
    with torch.no_grad():
        for pos in (3, 5):  # the second forward reads what the first wrote
            got, want = model(x, torch.tensor([pos])), twin(x, torch.tensor([pos]))
            assert torch.equal(got, want) and torch.equal(model.cache, twin.cache)
    counts = patch.counts[Path(task["file"]).stem]
    assert (counts.fired, counts.dropped) == (fired, dropped)


# A region that adds to the caller's tensor `acc` in place, as capture writes its task (it adds to a
# clone); RETURNS and BEFORE vary what the task returns and whether it reads acc before the write.
ACC_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x0, x1):
        w1 = x1.clone()
        BEFORE
        v2 = torch.ops.aten.exp.default(x0)
        torch.ops.aten.add_.Tensor(w1, v2)
        v3 = torch.ops.aten.sum.dim_IntList(w1, [-1])
        return RETURNS


def get_inputs():
    return [torch.randn(4, 8), torch.randn(4, 8)]


def get_init_inputs():
    return []
"""
# A kernel of other ops than the region's (add, not add_): it returns what the task returns.
ACC_KERNEL = """
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x0, x1):
        new = x1 + x0.exp()
        return RETURNS
"""


class Acc(torch.nn.Module):
    def __init__(self, before: bool):
        super().__init__()
        self.before = before

    def forward(self, x, acc):
        doubled = acc * 2.0 if self.before else None
        acc.add_(x.exp())
        total = acc.sum(-1)
        return total if doubled is None else total + doubled.sum()  # the region's inner value, read late


class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] = self.ops.get(str(func), 0) + 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    "returns, before, replayed",
    [("w1, v3", False, 0), ("v3", False, 1), ("v3", True, 1), ("w1, v3", True, 0)],
)
def test_a_tensor_written_in_place_gets_the_kernels_value_or_the_regions_own_write(
    tmp_path: Path, returns: str, before: bool, replayed: int
):
    """Where the task returns the written tensor, the kernel's output is its new value; where it does
    not, the region's own add_ runs after the kernel. A value the region reads before the write (acc * 2)
    and the model reads late is computed from acc as it was."""
    cap = tmp_path / "cap"
    cap.mkdir()
    task = ACC_TASK.replace("RETURNS", returns)
    task = task.replace("BEFORE", "v1 = torch.ops.aten.mul.Tensor(w1, 2.0)" if before else "pass")
    (cap / "01_acc.py").write_text(task)
    kernel = ACC_KERNEL.replace("RETURNS", "new, new.sum(-1)" if "w1" in returns else "new.sum(-1)")
    record = dict(file="01_acc.py", share=1.0, calls=1, rank=1, scopes=[""])
    write_patch(
        tmp_path / "p", cap, {"entry": "x:y", "tasks": [record]}, [(Chosen("r", "acc", 1.0, 1, 2.0, 1), kernel, record)]
    )
    model, x, acc = Acc(before), torch.randn(4, 8), torch.randn(4, 8)
    want_acc = acc.clone()
    with torch.no_grad():
        want = model(x, want_acc)
        patch = install(model, tmp_path / "p")
        with Count() as seen:
            got = model(x, acc)
    assert torch.allclose(got, want) and torch.allclose(acc, want_acc)
    assert seen.ops.get("aten.add_.Tensor", 0) == replayed and patch.counts["acc"].fired == 1
    assert patch.counts["acc"].recomputed == before


TAILS = {
    "expand": lambda y: y.unsqueeze(0).expand(3, 4, 5),
    "t": lambda y: y.t(),
    "transpose": lambda y: y.transpose(0, 1).unsqueeze(1),
    "broadcast": lambda y: y.view(4, 1, 5).expand(4, 6, 5),
    "permute": lambda y: y.permute(1, 0).unsqueeze(-1),
    "detach": lambda y: y.detach().view(2, 2, 5),
}


@pytest.mark.parametrize("tail", TAILS)
def test_the_value_under_an_outputs_trailing_views_follows_from_the_output(tail: str):
    from kernelsmith.patch.pattern import trace, unviewer

    class Tail(torch.nn.Module):
        def forward(self, x):
            return TAILS[tail](x.exp())

    x = torch.randn(4, 5)
    pattern = trace("tail", Tail(), [x])
    assert pattern.bases[0].kind == "val" and pattern.unviews[0]
    got = Tail()(x)
    for view in reversed(pattern.unviews[0]):
        got = unviewer(pattern, view)(got)
    assert torch.equal(got, x.exp())


def test_an_output_that_is_part_of_a_value_is_refused_in_one_line():
    from kernelsmith.patch.pattern import PatternError, trace

    class Part(torch.nn.Module):
        def forward(self, x):
            return x.exp()[1:]

    with pytest.raises(PatternError) as exc:
        trace("part", Part(), [torch.randn(4, 5)])
    assert str(exc.value) == (
        "an output is made by aten.slice.Tensor after its last compute op (a view of part of it: the kernel's "
        "output cannot give the value it is made of)"
    )
