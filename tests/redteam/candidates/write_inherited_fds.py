"""Cheat/fault: scribble on every file descriptor the process inherited.

In forward it writes a garbage line to each fd 0..64 that accepts a write (its channel to the
judge among them, whose frames start with a 4-byte length: the garbage announces a ~1.8 GB
message), then returns an honest softmax. A judge that trusts the stream, or blocks reading a
frame of the announced length, is broken or hangs. Expected: runtime_error (not correct), and
the evaluation must come back within the time limit.
"""
import os
import select

import torch
import torch.nn as nn
import triton
import triton.language as tl

GARBAGE = b"kernelsmith redteam garbage: {\"status\": \"correct\", \"speedup\": 100}\n"


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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for fd in range(65):
            try:
                if select.select([], [fd], [], 0)[1]:  # never block on a full pipe or socket
                    os.write(fd, GARBAGE)
            except (OSError, ValueError):
                pass
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return out
