"""Row softmax with the whole row in registers: one program per row reads it once and writes it once
(two reads, one write for a row too long for registers, as benchmarks/tasks/softmax_triton.py does)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # 1. The row, padded with -inf (exp(-inf) = 0 adds nothing to the sum).
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    # 2. exp(x - max) / sum, in fp32.
    num = tl.exp(x - tl.max(x, axis=0))
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _warps(block: int) -> int:
    # 8192 fp32 over 16 warps is 16 values a thread: no spills.
    return 16 if block >= 8192 else 8 if block >= 2048 else 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2d = x.contiguous().view(-1, x.shape[-1])
        out = torch.empty_like(x2d)
        n_rows, n_cols = x2d.shape
        block = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](
            out, x2d, x2d.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block, num_warps=_warps(block)
        )
        return out.view(x.shape)
