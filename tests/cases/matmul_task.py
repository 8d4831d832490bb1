import torch
import torch.nn as nn


class Model(nn.Module):
    """fp32 matrix product (M, K) @ (K, N) with sizes that are not multiples of the blocks."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M, K, N = 64, 96, 80


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
