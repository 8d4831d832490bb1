"""Fault/cheat: no output allocation at all: the Triton kernel writes the softmax over its input
in place and returns the input tensor. The values returned are right, but the caller's input is
gone. Expected: incorrect, "modified its input".
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_inplace_kernel(ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(ptr + row * row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        softmax_inplace_kernel[(n_rows,)](x, x.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return x
