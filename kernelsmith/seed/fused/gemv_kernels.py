"""Triton kernels of the fused GEMV seeds (kernelsmith.seed.fused): a seed's source holds this file's text after
its task's, and a ModelNew (gemv_glue.py) that launches them. Written for decode: M (rows) small, N and K up to
tens of thousands; any BLOCK_* or SPLIT_K the tuner tries is correct (K is walked in BLOCK_K chunks, every
edge is masked). Values are rounded to the activation dtype wherever the model's own op rounds (a no-op in
float32), so a kernel that accumulates in float32 meets the reference's rounding.

    _rows_kernel     one program per row: residual add (h = x + r), RMSNorm of it or of x (two passes over the
                     row in BLOCK_SIZE chunks), or SiLU(x) * r: the GEMV's prologue, or the norm after an
                     epilogue's residual add (which needs the whole row, so it is a kernel of its own)
    _gemv_kernel     out[M, N] = a[M, K] @ w[N, K]^T over a (BLOCK_N, BLOCK_M, SPLIT_K) grid, with its epilogue
                     (EPI) in the same kernel when SPLIT_K == 1; GATED: w holds [gate; up] and each program takes
                     the same columns of both (silu(gate) * up, the merged gate + up)
    _combine_kernel  SPLIT_K > 1: the float32 partial sums added in a second pass (no atomics), then the epilogue
"""

import os

import triton
import triton.language as tl

# Triton's interpreter (the CPU evaluation) multiplies bfloat16 tiles in tl.dot wrongly (their bits read as
# integers): there the tiles are widened to float32 first. On a GPU they go to the tensor cores as they are.
_DOT_IN_FP32 = tl.constexpr(os.environ.get("TRITON_INTERPRET") == "1")
EPI_NONE, EPI_SILU_ACC_MUL, EPI_SILU_E_MUL, EPI_ADD = 0, 1, 2, 3


@triton.jit
def _rows_kernel(
    x_ptr,
    r_ptr,
    nw_ptr,
    h_ptr,
    y_ptr,
    K,
    eps,
    HAS_ADD: tl.constexpr,
    NORM: tl.constexpr,
    SILU: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64) * K
    dt = y_ptr.dtype.element_ty
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    if NORM:  # first pass: the row's sum of squares (of h = x + r, rounded as the model's add rounds)
        for start in range(0, K, BLOCK_SIZE):
            mask = start + cols < K
            x = tl.load(x_ptr + row + start + cols, mask=mask, other=0.0).to(tl.float32)
            if HAS_ADD:
                x = (x + tl.load(r_ptr + row + start + cols, mask=mask, other=0.0).to(tl.float32)).to(dt)
                x = x.to(tl.float32)
            acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / K + eps)
    for start in range(0, K, BLOCK_SIZE):
        mask = start + cols < K
        x = tl.load(x_ptr + row + start + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + row + start + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_ADD:
            x = (x + r).to(dt).to(tl.float32)
            tl.store(h_ptr + row + start + cols, x.to(dt), mask=mask)
        if NORM:  # the normalised value rounded before the weight multiplies it (Llama's RMSNorm)
            w = tl.load(nw_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            x = w * (x * rstd).to(dt).to(tl.float32)
        if SILU:  # silu(x) rounded, then times r
            x = (x * tl.sigmoid(x)).to(dt).to(tl.float32) * r
        tl.store(y_ptr + row + start + cols, x.to(dt), mask=mask)


@triton.jit
def _dot_rows(
    a_ptr,
    w_ptr,
    rows,
    cols,
    col_ok,
    k_lo,
    k_hi,
    M,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """sum over k in [k_lo, k_hi) of a[rows, k] * w[cols, k], float32 [BLOCK_M, BLOCK_N]."""
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    ks = tl.arange(0, BLOCK_K)
    row_ok = rows < M
    for k0 in range(k_lo, k_hi, BLOCK_K):
        k = k0 + ks
        k_ok = k < k_hi
        a = tl.load(a_ptr + rows[:, None] * K + k[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_ptr + cols[:, None] * K + k[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        if BLOCK_M >= 16 and BLOCK_N >= 16 and BLOCK_K >= 16:  # tensor cores; float32 stays IEEE (no TF32)
            if _DOT_IN_FP32:
                a, w = a.to(tl.float32), w.to(tl.float32)
            acc += tl.dot(a, tl.trans(w), input_precision="ieee")
        else:  # a few rows: a broadcast product, summed over the chunk
            acc += tl.sum(a[:, None, :].to(tl.float32) * w[None, :, :].to(tl.float32), axis=2)
    return acc


@triton.jit
def _finish(acc, acc2, e_ptr, out_ptr, rows, cols, M, N, EPI: tl.constexpr, GATED: tl.constexpr):
    """The epilogue on the float32 sums, each op's result rounded as the model rounds, stored to out[M, N]."""
    dt = out_ptr.dtype.element_ty
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * N + cols[None, :]
    y = acc.to(dt).to(tl.float32)  # the GEMM's own output
    if GATED:  # silu(gate) * up, both GEMMs' outputs
        y = (y * tl.sigmoid(y)).to(dt).to(tl.float32) * acc2.to(dt).to(tl.float32)
    if EPI == 1:  # silu(this GEMM) * e
        e = tl.load(e_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (y * tl.sigmoid(y)).to(dt).to(tl.float32) * e
    if EPI == 2:  # silu(e) * this GEMM
        e = tl.load(e_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (e * tl.sigmoid(e)).to(dt).to(tl.float32) * y
    if EPI == 3:  # e + this GEMM (a residual add)
        y = tl.load(e_ptr + offs, mask=mask, other=0.0).to(tl.float32) + y
    tl.store(out_ptr + offs, y.to(dt), mask=mask)


@triton.jit
def _gemv_kernel(
    a_ptr,
    w_ptr,
    e_ptr,
    out_ptr,
    part_ptr,
    M,
    N,
    K,
    EPI: tl.constexpr,
    GATED: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    cols = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    pid_k = tl.program_id(2)
    span = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K  # this program's share of K, whole BLOCK_K chunks
    k_lo = pid_k * span
    k_hi = tl.minimum(k_lo + span, K)
    col_ok = cols < N
    acc = _dot_rows(a_ptr, w_ptr, rows, cols, col_ok, k_lo, k_hi, M, K, BLOCK_M, BLOCK_N, BLOCK_K)
    acc2 = acc
    if GATED:  # the up projection's rows follow the gate's in the merged weight
        acc2 = _dot_rows(a_ptr, w_ptr, rows, cols + N, col_ok, k_lo, k_hi, M, K, BLOCK_M, BLOCK_N, BLOCK_K)
    if SPLIT_K == 1:
        _finish(acc, acc2, e_ptr, out_ptr, rows, cols, M, N, EPI, GATED)
    else:  # float32 partials [SPLIT_K, M, N (x2 when GATED)], added by _combine_kernel
        width = 2 * N if GATED else N
        mask = (rows[:, None] < M) & col_ok[None, :]
        base = part_ptr + pid_k * M * width + rows[:, None] * width + cols[None, :]
        tl.store(base, acc, mask=mask)
        if GATED:
            tl.store(base + N, acc2, mask=mask)


@triton.jit
def _combine_kernel(
    part_ptr, e_ptr, out_ptr, M, N, EPI: tl.constexpr, GATED: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_N: tl.constexpr
):
    cols = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.program_id(1) + tl.arange(0, 1)
    width = 2 * N if GATED else N
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    acc = tl.zeros([1, BLOCK_N], dtype=tl.float32)
    acc2 = tl.zeros([1, BLOCK_N], dtype=tl.float32)
    for s in range(SPLIT_K):
        base = part_ptr + s * M * width + rows[:, None] * width + cols[None, :]
        acc += tl.load(base, mask=mask, other=0.0)
        if GATED:
            acc2 += tl.load(base + N, mask=mask, other=0.0)
    _finish(acc, acc2, e_ptr, out_ptr, rows, cols, M, N, EPI, GATED)
