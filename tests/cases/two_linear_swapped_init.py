"""A right forward on wrong weights: ModelNew creates its layers in the other order than Model, so
under the same seed each draws other random numbers (issue 29: the verdict gave no hint why)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.fc2 = nn.Linear(hidden, out_features)  # created first: Model creates fc1 first
        self.fc1 = nn.Linear(in_features, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x).contiguous()
        y = torch.empty_like(h)
        n = h.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](h, y, n, BLOCK=1024)
        return self.fc2(y)
