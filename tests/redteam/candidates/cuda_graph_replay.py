"""Cheat (CUDA): capture forward in a CUDA graph once, replay it forever.

The first call compiles the Triton softmax, then captures it in a torch.cuda.CUDAGraph reading
that call's input buffer and writing a static output; every later call replays the graph, which
reads the captured (now stale) input buffer, and returns the static output. Each call also
launches a token Triton kernel, so launches are counted. Expected: incorrect.
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


@triton.jit
def touch_kernel(ptr):
    tl.store(ptr, 1.0)


def launch(out, x):
    n_rows, n_cols = x.shape
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graph = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.scratch = getattr(self, "scratch", None)
        if self.scratch is None:
            self.scratch = torch.empty(1, dtype=torch.float32, device=x.device)
        touch_kernel[(1,)](self.scratch)
        if self.graph is None:
            self.static_x = x.contiguous()  # kept: the graph reads this buffer forever
            self.static_out = torch.empty_like(self.static_x)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                launch(self.static_out, self.static_x)  # compile outside the capture
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                launch(self.static_out, self.static_x)
        self.graph.replay()
        return self.static_out
