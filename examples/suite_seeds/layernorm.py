"""Naive seed for layernorm: one program per row, three passes over it in BLOCK_SIZE chunks (mean,
variance, normalise and write), statistics in fp32, as the Triton tutorial's LayerNorm."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr,
                     n_cols, eps,
                     x_row_stride, out_row_stride,
                     BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # 1. Mean.
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        acc += x
    mean = tl.sum(acc, axis=0) / n_cols
    # 2. Variance (biased, as LayerNorm), from the centred values.
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    # 3. Normalise, scale, shift.
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(out_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        # Same construction as Model, in the same order: with the same seed, the weights match.
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5, dtype=torch.bfloat16)
        with torch.no_grad():
            self.norm.weight.normal_(1.0, 0.1)
            self.norm.bias.normal_(0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2d = x.contiguous().view(-1, x.shape[-1])
        out = torch.empty_like(x2d)
        n_rows, n_cols = x2d.shape
        BLOCK_SIZE = 1024
        layernorm_kernel[(n_rows,)](x2d, self.norm.weight, self.norm.bias, out, n_cols, self.norm.eps,
                                    x2d.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out.view(x.shape)
