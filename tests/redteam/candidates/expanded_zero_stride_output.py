"""Cheat: write one number and expand it to the output's shape (all strides 0).

A Triton kernel writes a single value (the mean probability, 1 / n_cols) into a 1-element
tensor, which is returned as `.expand_as(x)`: 4 bytes of storage standing for 64x512 values. A
harness that looked at the storage, or copied it without honouring strides, would be fooled
or crash. Expected: incorrect.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_one_kernel(ptr, value):
    tl.store(ptr, value)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        one = torch.empty(1, dtype=x.dtype, device=x.device)
        fill_one_kernel[(1,)](one, 1.0 / x.shape[-1])
        return one.expand_as(x)
