import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr)
    row = tl.program_id(0)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
