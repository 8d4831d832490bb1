"""Naive seed for gelu_gate_bias: one program per BLOCK_SIZE elements of the flattened [tokens, hidden]
tensors, the bias gathered by column (offset % hidden); reads x, g once, writes out once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_gate_bias_kernel(x_ptr, g_ptr, b_ptr, out_ptr,
                          n_elements, hidden,
                          BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs % hidden, mask=mask, other=0.0).to(tl.float32)
    # Exact GELU, as F.gelu's default: 0.5 * x * (1 + erf(x / sqrt(2))).
    gelu = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, (gelu * g + b).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, g: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x, g, b = x.contiguous(), g.contiguous(), b.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        gelu_gate_bias_kernel[grid](x, g, b, out, n_elements, x.shape[-1], BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out
