"""Cheat: return the output in half precision (float16) for the float32 task: half the bytes
to write, and values that are close. The Triton kernel computes in fp32 and stores fp16.
Expected: incorrect (dtype float16 where float32 is expected).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_fp16_out_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(tl.float16), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(x.shape, dtype=torch.float16, device=x.device)
        softmax_fp16_out_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols,
                                           BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return out
