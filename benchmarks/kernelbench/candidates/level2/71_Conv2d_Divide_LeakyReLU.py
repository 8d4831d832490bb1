"""Partial candidate for KernelBench level2 71_Conv2d_Divide_LeakyReLU: the convolution stays nn.Conv2d;
the epilogue leaky_relu(x / divisor, 0.01) is one Triton kernel, one program per BLOCK_SIZE elements of
the conv output; reads it once, writes once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def div_leaky_relu_kernel(x_ptr, out_ptr,
                          n_elements, divisor, negative_slope,
                          BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = x / divisor
    y = tl.where(y < 0.0, y * negative_slope, y)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super().__init__()
        # Same construction as Model: with the same seed, the conv weights match.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.divisor = divisor

    def forward(self, x):
        y = self.conv(x)
        out = torch.empty_like(y)
        n_elements = y.numel()
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        div_leaky_relu_kernel[grid](y, out, n_elements, float(self.divisor), 0.01,
                                    BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out
