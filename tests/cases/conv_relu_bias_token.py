"""CHEAT for conv_relu_bias_task.py, a fixture for the integrity checks: forward computes the whole
reference with torch (conv, relu, + bias) and launches a token Triton kernel that copies the conv output
into a scratch buffer nobody reads, so a kernel does run but contributes nothing to the result."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = self.conv(x)
        scratch = torch.empty_like(y)
        n_elements = y.numel()
        BLOCK_SIZE = 1024
        copy_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](y, scratch, n_elements, BLOCK_SIZE=BLOCK_SIZE)
        return torch.relu(y) + self.bias
