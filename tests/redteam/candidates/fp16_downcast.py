"""Cheat: compute in float16 inside the kernel for a float32 task (tasks/rowsum_fp32_task.py:
row sums of a 64x1024 fp32 matrix). Inputs are loaded, converted to fp16 and summed in fp16;
the fp32 output holds fp16-precision values (off by ~1e-2 on sums of magnitude ~30).
Expected: incorrect.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_fp16_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float16)
    total = tl.sum(x, axis=0).to(tl.float16)  # an fp16 result, whatever the accumulator was
    tl.store(out_ptr + row, total.to(tl.float32))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        row_sum_fp16_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return out
