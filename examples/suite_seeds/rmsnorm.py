"""Naive seed for rmsnorm: one program per row, two passes over it in BLOCK_SIZE chunks (sum of
squares in fp32, then normalise and write), rounding where LlamaRMSNorm rounds."""

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
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr,
                   n_cols, eps,
                   x_row_stride, out_row_stride,
                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # 1. Mean of squares, in fp32.
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    # 2. Normalise; as Llama, the normalised value is rounded to bf16 before the weight multiplies it.
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        normed = round_to_bf16(x * rstd)
        tl.store(out_row + start + cols, (w * normed).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        # Same construction as Model: with the same seed, the weight matches.
        self.weight = nn.Parameter(torch.empty(hidden_size, dtype=torch.bfloat16).normal_(1.0, 0.1))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        x2d = hidden_states.contiguous().view(-1, hidden_states.shape[-1])
        out = torch.empty_like(x2d)
        n_rows, n_cols = x2d.shape
        BLOCK_SIZE = 1024
        rmsnorm_kernel[(n_rows,)](x2d, self.weight, out, n_cols, self.variance_epsilon,
                                  x2d.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out.view(hidden_states.shape)
