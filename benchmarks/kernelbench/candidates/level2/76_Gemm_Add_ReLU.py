"""Partial candidate for KernelBench level2 76_Gemm_Add_ReLU: the bias-free GEMM stays nn.Linear; the
epilogue relu(x + bias[col]) is one Triton kernel, one program per BLOCK_SIZE elements of the GEMM
output, the bias gathered by column (offset % out_features); reads the GEMM output once, writes once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(x_ptr, b_ptr, out_ptr,
                     n_elements, n_cols,
                     BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0).to(tl.float32)
    y = x + b
    y = tl.where(y < 0.0, 0.0, y)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        # Same construction order as Model: with the same seed, the Linear weight and the bias match.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = self.gemm(x)
        out = torch.empty_like(y)
        n_elements = y.numel()
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        bias_relu_kernel[grid](y, self.bias, out, n_elements, y.shape[-1], BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out
