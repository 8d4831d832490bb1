"""capture/data_dependent.py: which recorded values hold a count of the data (an MoE's tokens per expert),
followed through the ops that carry it and stopped where it goes back into a tensor of fixed shape."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from kernelsmith.capture.data_dependent import data_dependent, region_note
from kernelsmith.capture.regions import find_regions
from kernelsmith.capture.tape import record


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.act, self.down = nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class MoE(nn.Module):
    """Top-2 of 4 experts, each token reaching its experts by `how`: a boolean mask, torch.where (nonzero)
    or masked_select (then a view); the experts' sum goes back into a tensor of the input's shape."""

    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.gate = nn.Linear(16, 4)
        self.experts = nn.ModuleList(Expert() for _ in range(4))
        self.norm = nn.LayerNorm(16)
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        flat = self.norm(x)
        w, idx = self.gate(flat).softmax(-1).topk(2, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            if self.how == "mask":
                rows = (idx == e).any(-1)
                out[rows] += expert(flat[rows]) * (w * (idx == e)).sum(-1)[rows, None]
            elif self.how == "where":
                token, slot = torch.where(idx == e)
                out.index_add_(0, token, expert(flat[token]) * w[token, slot, None])
            else:
                rows = (idx == e).any(-1)
                picked = flat.masked_select(rows[:, None]).view(-1, 16)
                out[rows] += expert(picked)
        return torch.nn.functional.gelu(self.proj(x + out))


@pytest.mark.parametrize("how", ["mask", "where", "select"])
def test_an_experts_token_count_is_data_dependent_and_the_model_around_it_is_not(how: str):
    torch.manual_seed(0)
    model = MoE(how).eval()
    tape = record(model, (torch.randn(12, 16),), {})
    held = data_dependent(tape)
    notes = {}
    for region in find_regions(tape):
        path = tape.calls[region.call].path if region.call is not None else ""
        notes.setdefault(path, []).append(region_note(tape, held, region))
    for e in range(4):  # every expert's regions run at its count of tokens
        assert all(all(notes[f"experts.{e}.{m}"]) for m in ("up", "act", "down")), notes
    made = {"mask": "a boolean mask's selection (aten.index.Tensor)", "where": "aten.nonzero", "select": "aten."}[how]
    said = notes["experts.0.act"][0]
    assert said is not None and f"is a count of the data (from {made}" in said and "\n" not in said
    assert said.endswith("the task fixes this forward's count")
    # Before the routing and after the experts' sum went back into the model's own tensor: fixed shapes.
    assert notes["norm"] == [None] and notes["gate"] == [None]
    last = max(find_regions(tape), key=lambda r: r.ops[-1])
    assert tape.ops[last.ops[-1]].name == "gelu.default" and region_note(tape, held, last) is None


def test_a_model_without_counts_of_its_data_has_none():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16), nn.LayerNorm(16)).eval()
    x = torch.randn(4, 16)
    tape = record(model, (x,), {})
    assert data_dependent(tape) == {}
    masked = record(nn.Dropout(0.0).eval(), (x.masked_fill(x > 0, 0.0),), {})  # a mask that selects no count
    assert data_dependent(masked) == {}
