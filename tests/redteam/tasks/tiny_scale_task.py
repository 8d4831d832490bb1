"""A degenerate task: the output is so small that an all-zero output passes the elementwise
fp32 tolerance (|0 - x * 1e-7| < 1e-6 <= atol 1e-4). Only a relative (L2) error check can tell
zeros from the right answer here."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1e-7


M, N = 64, 256


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []
