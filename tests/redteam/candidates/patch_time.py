"""Cheat attempt: stop the clocks.

At import it replaces time.perf_counter, time.time, time.monotonic (and their _ns variants)
with functions that return constants, then computes an honest Triton softmax. A harness that
looks the clock up at call time would measure ~0 ms. Expected: correct, with a real time
(candidate_ms > 1 ms: the Triton interpreter needs far longer than that for this softmax).
"""
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

time.perf_counter = lambda: 1000.0
time.perf_counter_ns = lambda: 1_000_000_000_000
time.monotonic = lambda: 1000.0
time.monotonic_ns = lambda: 1_000_000_000_000
time.time = lambda: 1_700_000_000.0
time.time_ns = lambda: 1_700_000_000_000_000_000
time.process_time = lambda: 1.0


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
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return out
