import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x) * y + 1.0 in bfloat16."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * y + 1.0


M, N = 64, 256


def get_inputs():
    return [torch.randn(M, N, dtype=torch.bfloat16), torch.randn(M, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
