"""Row softmax, fp32 [64, 512] (the issue's small case, as examples/softmax).
Latency-bound: 128 KiB read, 128 KiB written."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


ROWS = 64
COLS = 512

# Small sizes for the Triton interpreter on the CPU (kernelsmith.task_sizes).
CPU_SIZES = {"ROWS": 5, "COLS": 300}


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
