import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension (KernelBench level 1 #23 at a small size)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 16
dim = 300


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
