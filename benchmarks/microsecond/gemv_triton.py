"""Decode-time projection out = x @ W^T for a few rows of x (W as nn.Linear holds it, [N, K]). The
weight is all the traffic (N * K * 2 bytes), so each program streams BLOCK_N rows of it, K-contiguous,
once, and multiplies every row of x by each tile: x is padded to BLOCK_M >= 16 rows for tl.dot (the
padding rows are masked loads, never stored). N / BLOCK_N = 256 programs at N = 4096, about two per
SM of an H100/H200, each with a 16 KiB tile of W in flight: a GEMV is bound by how many bytes are in
flight, so small tiles over many programs beat big tiles over few."""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Triton's CPU interpreter gets tl.dot of bf16 tiles wrong (errors of 1e10 with triton 3.9): there the
# tiles go to fp32 first, which is exact (every bf16 value is a tf32 value). On a GPU the dot is bf16's.
UPCAST = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def gemv_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_wn,
    stride_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    pid_n = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        x = tl.load(
            x_ptr + offs_m[:, None] * stride_xm + k[None, :], mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0
        )
        w = tl.load(
            w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + k[None, :],
            mask=(offs_n[:, None] < N) & (k[None, :] < K),
            other=0.0,
        )
        if UPCAST:
            x = x.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(x, tl.trans(w), acc)
    tl.store(
        out_ptr + offs_m[:, None] * stride_om + offs_n[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=(offs_m[:, None] < M) & (offs_n[None, :] < N),
    )


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Built as Model builds it (the weight's storage only: forward never calls it), so the same
        # seed gives the same weight.
        self.proj = nn.Linear(in_features, out_features, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.proj.weight
        x2d = x.contiguous().view(-1, x.shape[-1])
        m, k = x2d.shape
        n = w.shape[0]
        out = torch.empty((m, n), dtype=x2d.dtype, device=x2d.device)
        block_m = max(16, triton.next_power_of_2(m))
        block_n, block_k = 16, 512
        gemv_kernel[(triton.cdiv(n, block_n),)](
            x2d,
            w,
            out,
            m,
            n,
            k,
            x2d.stride(0),
            w.stride(0),
            out.stride(0),
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            UPCAST=UPCAST,
            num_warps=4,
        )
        return out.view(*x.shape[:-1], n)
