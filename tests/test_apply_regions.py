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

from kernelsmith.capture.apply import Chosen, write_patch
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.patch_runtime import install
from kernelsmith.capture.run import capture

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


def gpt():
    torch.manual_seed(0)
    return GPT(), (torch.randint(0, 32, (2, 8)),)


def gpt_in_place():
    torch.manual_seed(0)
    return GPT(in_place=True), (torch.randint(0, 32, (2, 8)),)


def cache():
    torch.manual_seed(0)
    return Cache(), (torch.randn(2, 1, 16), torch.tensor([3]))
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
    task = next(t for t in manifest["tasks"] if t["file"] and has_op in t["ops"])
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
    from kernelsmith.capture.pattern import trace, unview

    class Tail(torch.nn.Module):
        def forward(self, x):
            return TAILS[tail](x.exp())

    x = torch.randn(4, 5)
    pattern = trace("tail", Tail(), [x])
    assert pattern.bases[0].kind == "val" and pattern.unviews[0]
    got = Tail()(x)
    for view in reversed(pattern.unviews[0]):
        got = unview(pattern, view, got)
    assert torch.equal(got, x.exp())


def test_an_output_that_is_part_of_a_value_is_refused_in_one_line():
    from kernelsmith.capture.pattern import PatternError, trace

    class Part(torch.nn.Module):
        def forward(self, x):
            return x.exp()[1:]

    with pytest.raises(PatternError) as exc:
        trace("part", Part(), [torch.randn(4, 5)])
    assert str(exc.value) == (
        "an output is made by aten.slice.Tensor after its last compute op (a view of part of it: the kernel's "
        "output cannot give the value it is made of)"
    )
