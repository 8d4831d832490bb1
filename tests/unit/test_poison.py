"""What the sandbox overwrites between a trial's two calls (kernelsmith/evaluate/runner/poison.py): a
forward's outputs in place, never an input or a weight they share memory with."""

from __future__ import annotations

import torch

from kernelsmith.evaluate.runner import poison


def test_the_pattern_is_nan_in_every_float_dtype_and_minus_one_in_signed_integers():
    raw = torch.full((8,), poison.POISON, dtype=torch.uint8)
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        assert raw.view(dtype).isnan().all(), dtype
    assert (raw.view(torch.int32) == -1).all() and (raw.view(torch.int64) == -1).all()


def test_outputs_are_overwritten_in_place_except_storages_an_input_or_a_weight_shares():
    x, weight = torch.rand(4, 4), torch.nn.Parameter(torch.rand(3))
    fresh, view_of_input = torch.rand(2, 3), x[1:3]
    pair = torch.rand(6)
    before_x, before_w = x.clone(), weight.detach().clone()
    filled = poison.fill_outputs((fresh, view_of_input, [weight, pair[:3], pair[3:]], 7), [x, weight])
    assert fresh.isnan().all() and pair.isnan().all()
    assert torch.equal(x, before_x) and torch.equal(weight.detach(), before_w)
    assert sorted(filled) == [fresh.numel() * 4, pair.numel() * 4]  # one storage once, in bytes


def test_on_the_cpu_buffers_the_size_of_the_last_outputs_are_filled_and_freed():
    assert poison.fill_free_memory("cpu", [1024, 0, 4096]) == 5120
