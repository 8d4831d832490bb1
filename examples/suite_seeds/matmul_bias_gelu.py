"""Naive seed for matmul_bias_gelu: one program per BLOCK_M x BLOCK_N output tile, a K loop of tl.dot
accumulating in fp32, then bias and exact GELU in the
epilogue; x and W tiles are re-read by every tile that needs them."""

import os

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
def linear_gelu_kernel(x_ptr, w_ptr, bias_ptr, out_ptr,
                       M, N, K,
                       stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       DOT_IN_FP32: tl.constexpr):
    # out = gelu(x @ W^T + bias); W is [N, K] as nn.Linear stores it.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        x = tl.load(x_ptr + rm[:, None] * stride_xm + ks[None, :] * stride_xk,
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        wt = tl.load(w_ptr + rn[None, :] * stride_wn + ks[:, None] * stride_wk,
                     mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        if DOT_IN_FP32:  # the CPU interpreter's tl.dot mishandles bf16 operands (exact: bf16 fits in fp32)
            x, wt = x.to(tl.float32), wt.to(tl.float32)
        acc += tl.dot(x, wt)
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    # The reference rounds the linear's output to bf16 before GELU: so does this.
    y = round_to_bf16(acc + bias[None, :])
    y = 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, y.to(out_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Same construction as Model: with the same seed, the weights match.
        self.linear = nn.Linear(in_features, out_features, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, bias = self.linear.weight, self.linear.bias
        x2d = x.contiguous().view(-1, x.shape[-1])
        M, K = x2d.shape
        N = w.shape[0]
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        BLOCK_M = 64
        BLOCK_N = 64
        BLOCK_K = 32
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        linear_gelu_kernel[grid](x2d, w, bias, out, M, N, K,
                                 x2d.stride(0), x2d.stride(1), w.stride(0), w.stride(1), out.stride(0), out.stride(1),
                                 BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4,
                                 DOT_IN_FP32=os.environ.get("TRITON_INTERPRET") == "1")
        return out.view(*x.shape[:-1], N)
