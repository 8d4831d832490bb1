"""A residual add at decode, a batch of 32 tokens: x + y, bf16 [32, 4096].
Latency-bound: 256 KiB read twice, 256 KiB written: about the smallest kernel a model launches."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


TOKENS = 32
HIDDEN = 4096

# Small sizes for the Triton interpreter on the CPU (kernelsmith.task_sizes).
CPU_SIZES = {"TOKENS": 3, "HIDDEN": 500}


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16), torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
