"""Partial candidate for KernelBench level2 57_Conv2d_ReLU_HardSwish: the convolution stays nn.Conv2d;
the epilogue r = relu(x); r * clamp((r + 3) / 6, 0, 1) is one Triton kernel, one program per BLOCK_SIZE
elements of the conv output; reads it once, writes once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_hardswish_kernel(x_ptr, out_ptr,
                          n_elements,
                          BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.where(x < 0.0, 0.0, x)
    gate = tl.minimum(tl.maximum((r + 3.0) / 6.0, 0.0), 1.0)
    tl.store(out_ptr + offs, (r * gate).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        # Same construction as Model: with the same seed, the conv weights match.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = self.conv(x)
        out = torch.empty_like(y)
        n_elements = y.numel()
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        relu_hardswish_kernel[grid](y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out
