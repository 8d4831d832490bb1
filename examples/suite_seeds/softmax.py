"""Naive seed for softmax: one program per row, two passes over it in BLOCK_SIZE chunks: (1) running
max and rescaled running sum (online softmax), (2) normalise and write. Reads the row twice."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr,
                   n_cols,
                   x_row_stride, out_row_stride,
                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # 1. Running max m and sum s of exp(x - m), rescaled whenever m grows.
    m = float("-inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    # 2. Normalise.
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - m) / s
        tl.store(out_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        BLOCK_SIZE = 1024
        softmax_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out
