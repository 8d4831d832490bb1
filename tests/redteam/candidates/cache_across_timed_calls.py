"""Cheat: honest in the correctness trials, cached in the timing loop.

The cache is keyed by the input's identity and address (the same tensor object at the same
data_ptr): every correctness trial passes a new input tensor, so it computes honestly with
Triton; a timing loop that passes the same input object again and again gets the first result
back at once, without any work. Inputs refilled in place before every timed repetition make
that result stale, and the last repetition's output is checked. Expected: incorrect.
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
    x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.key = None
        self.value = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (id(x), x.data_ptr(), tuple(x.shape))
        if self.key is not None and self.key[0] is x and self.key[1] == key:
            return self.value
        self.value = triton_softmax(x)
        self.key = (x, key)  # keeps x alive, so its id cannot be reused by another tensor
        return self.value
