import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fused_steps_kernel(x_ptr, out_ptr, n, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    """The sixteen steps in float32, rounded to the output's dtype once."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    for _ in tl.static_range(STEPS):
        y = y * 1.01 + 0.01
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        fused_steps_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), STEPS=16, BLOCK=4096)
        return out
