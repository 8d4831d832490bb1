"""Naive seed for row_sum: one program per row, a BLOCK_SIZE-wide fp32 accumulator over the row's
chunks, reduced at the end."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr,
                   n_cols,
                   x_row_stride,
                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        acc += tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2d = x.contiguous().view(-1, x.shape[-1])
        n_rows, n_cols = x2d.shape
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        BLOCK_SIZE = 1024
        row_sum_kernel[(n_rows,)](x2d, out, n_cols, x2d.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out.view(x.shape[:-1])
