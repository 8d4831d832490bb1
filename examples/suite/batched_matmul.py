"""Batched matmul, torch.bmm: bf16 [32, 2048, 2048] x [32, 2048, 2048].
Compute-bound: 2*B*M*N*K = 0.55 TFLOP (~0.70 ms at 790 TFLOP/s) against 3 x 256 MiB moved (~0.19 ms)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


BATCH = 32
M = 2048
K = 2048
N = 2048

# Small sizes for the Triton interpreter on the CPU (kernelsmith.suite.scale.shrink).
CPU_SIZES = {"BATCH": 2, "M": 72, "K": 80, "N": 72}


def get_inputs():
    a = torch.randn(BATCH, M, K, dtype=torch.bfloat16)
    b = torch.randn(BATCH, K, N, dtype=torch.bfloat16)
    return [a, b]


def get_init_inputs():
    return []
