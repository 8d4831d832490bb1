"""Row sum, a reduction over the last dim: fp32 [32768, 8192] -> [32768].
Memory-bound: 1 GiB read, 128 KiB written (1.07 GB, ~0.25 ms at 4.3 TB/s); 1 FLOP per element."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


ROWS = 32768
COLS = 8192

# Small sizes for the Triton interpreter on the CPU (kernelsmith.suite.scale.shrink).
CPU_SIZES = {"ROWS": 8, "COLS": 1500}


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
