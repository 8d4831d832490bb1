"""Allocates host memory in forward, 64 MiB at a time (pages touched), up to 4 GiB."""
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hoard = []
        chunk = 64 * 2**20
        for _ in range((4 * 2**30) // chunk):
            hoard.append(b"\x01" * chunk)  # filled, so every page is resident
        time.sleep(60)  # hold it until the judge notices
        return x.sum(dim=-1)
