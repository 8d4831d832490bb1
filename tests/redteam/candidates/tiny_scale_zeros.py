"""Cheat on a degenerate task (tasks/tiny_scale_task.py: y = x * 1e-7): a Triton kernel writes
zeros, which are within the elementwise fp32 tolerance of every reference value.
Expected: incorrect, flag degenerate_task (the relative L2 error check rejects zeros).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


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
