"""Honest kernel for the degenerate task tasks/tiny_scale_task.py (y = x * 1e-7).
Expected: correct, flag degenerate_task (the task, not the kernel, is degenerate).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(out_ptr, in_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=mask) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, 1024),)](out, x, n, 1e-7, BLOCK=1024)
        return out
