"""Row-wise softmax on a large matrix (4096 x 8192 fp32, 128 MiB in, 128 MiB out): big enough
that on a GPU the time is set by memory bandwidth, so a time far below bytes / bandwidth is
impossible (for the CUDA red-team tests)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch_size = 4096
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
