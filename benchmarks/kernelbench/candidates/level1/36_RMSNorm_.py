"""Candidate for KernelBench level1 36_RMSNorm_: x / sqrt(mean(x**2, dim=1) + eps) on [B, C, *spatial]
(contiguous, so the C values of one (b, position) lie H*W apart). One program per (BLOCK_SIZE spatial
positions, batch index): pass 1 loops over the C channels accumulating the sum of squares per position in
fp32, pass 2 loops again and writes x / rms. Every load is coalesced along the spatial axis; reads x
twice, writes once."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_dim1_kernel(x_ptr, out_ptr,
                        n_channels, n_spatial, eps,
                        BLOCK_SIZE: tl.constexpr):
    pid_s = tl.program_id(0).to(tl.int64)
    b = tl.program_id(1).to(tl.int64)
    pos = pid_s * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = pos < n_spatial
    base = b * n_channels * n_spatial + pos
    # 1. Sum of squares over the channel axis, per spatial position.
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for c in range(0, n_channels):
        x = tl.load(x_ptr + base + c * n_spatial, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rms = tl.sqrt(acc / n_channels + eps)
    # 2. Normalise and write.
    for c in range(0, n_channels):
        x = tl.load(x_ptr + base + c * n_spatial, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + c * n_spatial, (x / rms).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_batch, n_channels = x.shape[0], x.shape[1]
        n_spatial = x.numel() // (n_batch * n_channels)
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(n_spatial, BLOCK_SIZE), n_batch)
        rmsnorm_dim1_kernel[grid](x, out, n_channels, n_spatial, float(self.eps),
                                  BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out
