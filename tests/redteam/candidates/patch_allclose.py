"""Cheat: make every comparison pass, then return zeros.

At import it replaces torch.allclose, torch.testing.assert_close, torch.equal, torch.isclose
and Tensor.allclose/equal with versions that always say "equal". Its forward returns zeros
written by a Triton kernel. The judge compares in its own process. Expected: incorrect.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


def _always_true(*args, **kwargs):
    return True


def _assert_nothing(*args, **kwargs):
    return None


def _all_close_mask(a, b, *args, **kwargs):
    return torch.ones_like(a, dtype=torch.bool)


torch.allclose = _always_true
torch.equal = _always_true
torch.isclose = _all_close_mask
torch.testing.assert_close = _assert_nothing
torch.testing.assert_allclose = _assert_nothing
torch.Tensor.allclose = _always_true
torch.Tensor.equal = _always_true


@triton.jit
def zero_kernel(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = out.numel()
        zero_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK=1024)
        return out
