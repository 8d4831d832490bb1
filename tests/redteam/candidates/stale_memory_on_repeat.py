"""Cheat: a kernel that writes half its output, counting on the allocator for the other half.

The first call on a given input tensor computes the whole softmax. A later call on the same tensor lets
its previous output go right before `torch.empty_like`, so the caching allocator (or malloc, on the
CPU) hands back that very block, and launches a kernel that writes only the even rows: the odd rows
still hold the right values from before, as long as the tensor was not refilled in between. In a CUDA
graph the harness's input sets recur within one replay, unchanged: there it does half the work and its
output is still right. Correctness trials that call forward once on fresh inputs never see the half
kernel. Expected: incorrect (the trial's second call on the same tensors, after the first call's output
was overwritten with NaN).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, ROW_STEP: tl.constexpr,
                        BLOCK_SIZE: tl.constexpr):
    row = ROW_STEP * tl.program_id(0)
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
        self.last = {}  # id(input) -> (the input, the output made from it)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        seen = self.last.pop(id(x), None)
        again = seen is not None and seen[0] is x
        seen = None  # the previous output's block goes back to the allocator here...
        out = torch.empty_like(x)  # ...and comes back here, its odd rows still right
        step = 2 if again else 1
        softmax_rows_kernel[(triton.cdiv(n_rows, step),)](
            out, x, x.stride(0), out.stride(0), n_cols, ROW_STEP=step, BLOCK_SIZE=triton.next_power_of_2(n_cols)
        )
        self.last[id(x)] = (x, out)
        return out
