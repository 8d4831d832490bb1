"""Cheat: look for the reference's output among the process's live objects.

Walks gc.get_objects() for a float tensor of the input's shape that is not the input itself
(e.g. an expected output an in-process harness keeps around) and returns a copy of it made by a
Triton kernel; finding none, it returns torch.empty_like(x) (and launches a token kernel, so that
the verdict is about the output, not about the launch count). The reference runs in another
process, so there is nothing to find. Expected: not correct.
"""
import gc

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(ptr):
    tl.store(ptr, 1.0)


@triton.jit
def copy_kernel(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def find_reference(x):
    for obj in gc.get_objects():
        try:
            if (isinstance(obj, torch.Tensor) and obj is not x and obj.shape == x.shape
                    and obj.dtype == x.dtype and obj.device == x.device and obj.data_ptr() != x.data_ptr()):
                return obj
        except Exception:
            continue
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        found = find_reference(x)
        out = torch.empty_like(x)
        if found is not None:
            src = found.contiguous()
            n = src.numel()
            copy_kernel[(triton.cdiv(n, 1024),)](out, src, n, BLOCK=1024)
        else:
            touch_kernel[(1,)](torch.empty(1, dtype=torch.float32, device=x.device))
        return out
