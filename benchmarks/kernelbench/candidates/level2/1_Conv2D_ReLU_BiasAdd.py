"""Partial candidate for KernelBench level2 1_Conv2D_ReLU_BiasAdd: the convolution stays nn.Conv2d; the
epilogue relu(x) + bias[c] is one Triton kernel, one program per BLOCK_SIZE elements of the NCHW conv
output, the per-channel bias gathered by (offset // (H*W)) % C; reads the conv output once, writes once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_bias_kernel(x_ptr, b_ptr, out_ptr,
                     n_elements, channels, spatial,
                     BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + (offs // spatial) % channels, mask=mask, other=0.0).to(tl.float32)
    y = tl.where(x < 0.0, 0.0, x) + b
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        # Same construction order as Model: with the same seed, conv weights and bias match.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = self.conv(x)
        out = torch.empty_like(y)
        n_elements = y.numel()
        channels = y.shape[1]
        spatial = n_elements // (y.shape[0] * channels)
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        relu_bias_kernel[grid](y, self.bias, out, n_elements, channels, spatial,
                               BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out
