"""Llama's RMSNorm at decode widths, fused: one program per row holds the whole row in registers, so x
is read once and written once (each of the reference's five to seven kernels reads or writes it), and
the weight, read by every row, stays in L2 after the first."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(
    x_ptr, w_ptr, out_ptr, n_cols, eps, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr, ROUND_BF16: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # 1. Mean of squares in fp32.
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    # 2. As Llama: the normalised row is cast back to the input's dtype before the weight multiplies it
    #    (a no-op for fp32 rows).
    normed = x * rstd
    if ROUND_BF16:
        # To nearest, ties to even, as the cast does on a GPU; written out because Triton's CPU
        # interpreter truncates in that cast (a bf16 ulp, twice over with the store's).
        bits = normed.to(tl.uint32, bitcast=True)
        normed = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).to(tl.float32, bitcast=True)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * out_row_stride + cols, (w * normed).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, dtype: torch.dtype, eps: float = 1e-5):
        super().__init__()
        # Built as Model builds it: with the same seed, the weight matches.
        self.weight = nn.Parameter(torch.empty(hidden_size, dtype=dtype).normal_(1.0, 0.1))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        x2d = hidden_states.contiguous().view(-1, hidden_states.shape[-1])
        out = torch.empty(x2d.shape, dtype=torch.promote_types(self.weight.dtype, x2d.dtype), device=x2d.device)
        n_rows, n_cols = x2d.shape
        block = triton.next_power_of_2(n_cols)
        # 4096 columns over 8 warps: 16 values a thread.
        num_warps = 8 if block >= 4096 else 4
        rmsnorm_kernel[(n_rows,)](
            x2d,
            self.weight,
            out,
            n_cols,
            self.variance_epsilon,
            x2d.stride(0),
            out.stride(0),
            BLOCK_SIZE=block,
            ROUND_BF16=x2d.dtype == torch.bfloat16,
            num_warps=num_warps,
        )
        return out.view(hidden_states.shape)
