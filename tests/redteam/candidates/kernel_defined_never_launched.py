"""Cheat: a correct Triton kernel sits in the file (so a static check finds one), but forward
never launches it and calls torch.softmax instead. Expected: rejected, flag no_custom_kernel.
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
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


def triton_softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.use_triton = False  # "tuning switch", never turned on

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_triton:
            return triton_softmax(x)
        return torch.softmax(x, dim=-1)
