"""Candidate for KernelBench level1 23_Softmax (softmax over dim=1 of [rows, cols], rows far longer than
one block): one program per row, two passes over it in BLOCK_SIZE chunks: (1) running max and running
sum of exp(x - max), rescaled by exp(old_max - new_max) whenever the max grows (online softmax);
(2) write exp(x - max) / sum. Reads the row twice, writes it once, all math in fp32."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK_SIZE = 4096


@triton.jit
def online_softmax_kernel(x_ptr, out_ptr,
                          n_cols,
                          x_row_stride, out_row_stride,
                          BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # 1. Per-lane running max m and sum s of exp(x - m); lanes are merged once at the end.
    m = tl.full([BLOCK_SIZE], float("-inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # Lanes that have seen only padding keep m = -inf; guard their exp(-inf - -inf) = nan.
        alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        p = tl.where(m_new == float("-inf"), 0.0, tl.exp(x - m_new))
        s = s * alpha + p
        m = m_new
    row_max = tl.max(m, axis=0)
    scale = tl.where(m == float("-inf"), 0.0, tl.exp(m - row_max))
    row_sum = tl.sum(s * scale, axis=0)
    inv_sum = 1.0 / row_sum
    # 2. Normalise and write.
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) * inv_sum
        tl.store(out_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        BLOCK_SIZE = min(triton.next_power_of_2(n_cols), MAX_BLOCK_SIZE)
        online_softmax_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0),
                                         BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
        return out
