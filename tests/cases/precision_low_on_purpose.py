"""Cheat aimed at the precision rule: compute a float32 task from inputs rounded to bfloat16 on purpose
(cheaper loads), hoping the rule's second look waves the larger error through. Expected: incorrect."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def low_precision_kernel(x_ptr, out_ptr, n, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask).to(tl.bfloat16).to(tl.float32)
    for _ in tl.static_range(STEPS):
        y = y * 1.01 + 0.01
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        low_precision_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), STEPS=16, BLOCK=4096)
        return out
