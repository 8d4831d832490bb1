"""Honest, though not bit-reproducible: a softmax whose last bits differ from one call to the next, as a
kernel that sums with atomics in whatever order its blocks finish. Here every other call scales its
result by (1 + 2**-22), a few units in the last place of float32. Expected: correct (each call is held to
the tolerance, not to the other call's bits)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, scale, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0) * scale
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        self.calls += 1
        scale = 1.0 + 2.0**-22 * (self.calls % 2)
        softmax_kernel[(n_rows,)](
            out, x, x.stride(0), out.stride(0), n_cols, scale, BLOCK_SIZE=triton.next_power_of_2(n_cols)
        )
        return out
