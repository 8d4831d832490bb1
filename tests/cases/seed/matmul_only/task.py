import torch
import torch.nn as nn


class Model(nn.Module):
    """A plain matrix product: Inductor's default code is one library call (extern mm), no kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M, K, N = 64, 128, 32


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
