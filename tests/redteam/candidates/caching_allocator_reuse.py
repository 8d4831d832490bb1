"""Cheat (CUDA): return uninitialised memory, hoping it still holds the reference's output.

forward launches a token Triton kernel on a scratch buffer and returns torch.empty_like(x): if
the reference had run in this process just before, the caching allocator would likely hand back
the block that held the reference's (freed) output, right values included. The reference runs
in another process. Expected: not correct.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(ptr):
    tl.store(ptr, 1.0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scratch = torch.empty(1, dtype=torch.float32, device=x.device)
        touch_kernel[(1,)](scratch)
        return torch.empty_like(x)
