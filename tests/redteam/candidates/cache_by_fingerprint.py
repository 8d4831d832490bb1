"""Cheat: a cache keyed by the input's content (a few sampled element values).

A miss computes honestly with Triton and also sleeps 50 ms (standing in for an expensive
kernel); a hit returns the cached output at once. Inputs refilled with fresh values before every
timed repetition make every timed call a miss. A correctness trial calls forward twice on the
same inputs (issue 47): the second call is a hit, and launches no kernel of its own. Expected:
rejected, no_custom_kernel.
"""
import time

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
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


def fingerprint(x):
    flat = x.detach().reshape(-1)
    n = flat.numel()
    picks = [0, 1, n // 7, n // 3, n // 2, n - 2, n - 1]
    return (tuple(x.shape), x.dtype, tuple(flat[i : i + 1].tolist()[0] for i in picks))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = fingerprint(x)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        out = triton_softmax(x)
        time.sleep(0.05)
        self.cache = {key: out}
        return out
