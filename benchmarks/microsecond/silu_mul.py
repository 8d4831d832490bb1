"""SwiGLU's gate at decode (Llama-3-8B's MLP, 32 tokens): silu(gate) * up, gate and up the two halves of
x, bf16 [32, 2 x 14336] -> [32, 14336]. Latency-bound: 1.75 MiB read, 0.875 MiB written."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


TOKENS = 32
INTERMEDIATE = 14336

# Small sizes for the Triton interpreter on the CPU (kernelsmith.task_sizes).
CPU_SIZES = {"TOKENS": 3, "INTERMEDIATE": 300}


def get_inputs():
    return [torch.randn(TOKENS, 2 * INTERMEDIATE, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
