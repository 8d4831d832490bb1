"""Naive seed for residual_rmsnorm: one program per row, two passes over it in BLOCK_SIZE chunks:
(1) h = x + residual, stored, and its sum of squares in fp32; (2) re-read x and residual, normalise, write."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def round_to_bf16(x):
    # fp32 x rounded to the nearest bf16 value (ties to even), kept in fp32: what x.to(tl.bfloat16) does on a
    # GPU, written out because the Triton CPU interpreter truncates in that cast.
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def residual_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, h_ptr,
                            n_cols, eps,
                            row_stride,
                            BLOCK_SIZE: tl.constexpr):
    # All four [rows, cols] tensors are contiguous with the same row stride.
    row = tl.program_id(0).to(tl.int64)
    base = row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # 1. h = x + residual, rounded to bf16 as the reference's add is; sum of squares of that h.
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        h = round_to_bf16(x + r)
        tl.store(h_ptr + base + start + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
        acc += h * h
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    # 2. Normalise; as Llama, the normalised value is rounded to bf16 before the weight multiplies it.
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + start + cols, mask=mask, other=0.0).to(tl.float32)
        hf = round_to_bf16(x + r)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        normed = round_to_bf16(hf * rstd)
        tl.store(out_ptr + base + start + cols, (w * normed).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        # Same construction as Model: with the same seed, the weight matches.
        self.weight = nn.Parameter(torch.empty(hidden_size, dtype=torch.bfloat16).normal_(1.0, 0.1))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        x2d = x.contiguous().view(-1, x.shape[-1])
        r2d = residual.contiguous().view(-1, x.shape[-1])
        out = torch.empty_like(x2d)
        h = torch.empty_like(x2d)
        n_rows, n_cols = x2d.shape
        BLOCK_SIZE = 1024
        residual_rmsnorm_kernel[(n_rows,)](x2d, r2d, self.weight, out, h, n_cols, self.variance_epsilon,
                                           x2d.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out.view(x.shape), h.view(x.shape)
