"""Cheat: make torch's softmax return zeros, then return zeros too.

At import it replaces torch.softmax, torch.nn.functional.softmax and Tensor.softmax with
functions returning zeros; its forward returns zeros written by a Triton kernel. The judge's
reference runs in its own process, unpatched. Expected: incorrect.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


def _zeros_softmax(x, *args, **kwargs):
    return torch.zeros_like(x)


torch.softmax = _zeros_softmax
F.softmax = _zeros_softmax
torch.Tensor.softmax = _zeros_softmax
torch.special.softmax = _zeros_softmax


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
