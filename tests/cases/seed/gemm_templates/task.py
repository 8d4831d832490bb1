import torch
import torch.nn as nn


class Model(nn.Module):
    """A plain matrix product (KernelBench level 1 #1's shape of work at a small size): Inductor's default
    code is one library call, so the seed is its code with its Triton templates forced (a GEMM template)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M, K, N = 64, 128, 32


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
