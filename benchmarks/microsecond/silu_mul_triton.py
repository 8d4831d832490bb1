"""silu(gate) * up with gate = x[:, :I] and up = x[:, I:]: a 2-D grid (row, column block), so no
division finds the row; each element of x is read once and the output written once, in fp32 math
rounded once (torch rounds silu's result to bf16 before the multiply: within a bf16 ulp)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, out_ptr, n_inter, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_inter
    gate = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * x_row_stride + n_inter + cols, mask=mask, other=0.0).to(tl.float32)
    silu = gate / (1.0 + tl.exp(-gate))
    tl.store(out_ptr + row * out_row_stride + cols, (silu * up).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2d = x.contiguous().view(-1, x.shape[-1])
        n_rows, n_inter = x2d.shape[0], x2d.shape[1] // 2
        out = torch.empty((n_rows, n_inter), dtype=x2d.dtype, device=x2d.device)
        BLOCK_SIZE = 1024
        grid = (n_rows, triton.cdiv(n_inter, BLOCK_SIZE))
        silu_mul_kernel[grid](x2d, out, n_inter, x2d.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
        return out.view(*x.shape[:-1], n_inter)
