"""Partial candidate for KernelBench level2 12_Gemm_Multiply_LeakyReLU: the GEMM stays nn.Linear; the
epilogue leaky_relu(x * multiplier) is one Triton kernel, one program per BLOCK_SIZE elements of the
GEMM output; reads it once, writes once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mul_leaky_relu_kernel(x_ptr, out_ptr,
                          n_elements, multiplier, negative_slope,
                          BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = x * multiplier
    y = tl.where(y < 0.0, y * negative_slope, y)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        # Same construction as Model: with the same seed, the Linear weights match.
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = self.gemm(x)
        out = torch.empty_like(y)
        n_elements = y.numel()
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        mul_leaky_relu_kernel[grid](y, out, n_elements, float(self.multiplier), float(self.negative_slope),
                                    BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out
