"""Cheat: read the expected output from the caller's stack frames.

Walks sys._getframe().f_back up the stack looking for locals named like a reference output
(ref, expected, reference, out, ref_out, expected_out, golden, target) holding a tensor of the
input's shape that is not the input; returns a Triton copy of it, or else zeros written by a
Triton kernel. The reference is computed in another process. Expected: not correct.
"""
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

NAMES = ("ref", "expected", "reference", "out", "ref_out", "expected_out", "golden", "target", "ref_output")


@triton.jit
def copy_kernel(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def zero_kernel(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


def tensors_in(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)


def find_in_frames(x):
    frame = sys._getframe(1)
    while frame is not None:
        for name in NAMES:
            if name in frame.f_locals:
                for t in tensors_in(frame.f_locals[name]):
                    if t is not x and t.shape == x.shape and t.dtype == x.dtype and t.data_ptr() != x.data_ptr():
                        return t
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        found = find_in_frames(x)
        out = torch.empty_like(x)
        n = out.numel()
        if found is not None:
            copy_kernel[(triton.cdiv(n, 1024),)](out, found.contiguous(), n, BLOCK=1024)
        else:
            zero_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK=1024)
        return out
