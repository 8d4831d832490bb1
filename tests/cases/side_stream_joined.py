"""Honest (CUDA): a Triton softmax on a side stream, used correctly.

The side stream waits for the caller's stream (where the inputs were written) before the kernel,
and the caller's stream waits for the side stream (an event) before forward returns: a consumer of
the output on the caller's stream reads it finished. Expected: correct, no flag.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stream is None:
            self.stream = torch.cuda.Stream()
        caller = torch.cuda.current_stream()
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        self.stream.wait_stream(caller)
        with torch.cuda.stream(self.stream):
            softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols,
                                      BLOCK_SIZE=triton.next_power_of_2(n_cols), num_warps=8)
        caller.wait_stream(self.stream)
        out.record_stream(caller)
        x.record_stream(self.stream)
        return out
