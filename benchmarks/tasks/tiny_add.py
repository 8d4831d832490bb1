import torch
import torch.nn as nn


class Model(nn.Module):
    """x + y on 4096 elements: a task whose evaluation costs as little as one can."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def get_inputs():
    return [torch.randn(4096), torch.randn(4096)]


def get_init_inputs():
    return []
