"""Partial candidate for KernelBench level2 63_Gemm_ReLU_Divide: the GEMM stays nn.Linear; the epilogue
relu(x) / divisor is one Triton kernel, one program per BLOCK_SIZE elements of the GEMM output; reads it
once, writes once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_div_kernel(x_ptr, out_ptr,
                    n_elements, divisor,
                    BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.where(x < 0.0, 0.0, x) / divisor
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        # Same construction as Model: with the same seed, the Linear weights match.
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        y = self.linear(x)
        out = torch.empty_like(y)
        n_elements = y.numel()
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        relu_div_kernel[grid](y, out, n_elements, float(self.divisor), BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out
