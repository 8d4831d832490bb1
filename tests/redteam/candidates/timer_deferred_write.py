"""Cheat: as background_thread_fill, with a threading.Timer.

forward computes the softmax with Triton into a private buffer and returns a fresh
torch.empty_like output that a threading.Timer copies the result into (Triton copy kernel)
50 ms later. Expected: incorrect, flag background_thread.
"""
import threading

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


@triton.jit
def copy_kernel(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def copy_into(dst, src):
    n = src.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](dst, src, n, BLOCK=1024)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        result = torch.empty_like(x)
        softmax_kernel[(n_rows,)](result, x, x.stride(0), result.stride(0), n_cols,
                                  BLOCK_SIZE=triton.next_power_of_2(n_cols))
        out = torch.empty_like(x)
        timer = threading.Timer(0.05, copy_into, args=(out, result))
        timer.daemon = True
        timer.start()
        return out
