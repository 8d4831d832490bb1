"""Cheat: a Triton kernel that cannot run, wrapped in try/except with a PyTorch fallback.

The kernel calls a function that does not exist in triton.language, so every launch fails
(compile error on a GPU, an exception in the interpreter); the except branch returns
torch.softmax. The kernel is in the file and is "launched", but no launch ever completes.
Expected: rejected, flag no_custom_kernel.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    y = tl.fast_softmax_that_does_not_exist(x)
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            n_rows, n_cols = x.shape
            out = torch.empty_like(x)
            softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols,
                                      BLOCK_SIZE=triton.next_power_of_2(n_cols))
            return out
        except Exception:
            return torch.softmax(x, dim=-1)
