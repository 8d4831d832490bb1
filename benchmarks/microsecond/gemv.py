"""A decode step's projection: x [BATCH, 4096] @ W^T, W [4096, 4096] bf16 (nn.Linear, no bias). As written a batch
of 8 tokens; benchmarks/timing_gpu.py (PLAN) also sets one. Memory-bound on the weight: 32 MiB read per call (~8 us
at 4.3 TB/s); x and the output are 8 KiB a token each."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


BATCH = 8
IN_FEATURES = 4096
OUT_FEATURES = 4096

# Small sizes for the Triton interpreter on the CPU (kernelsmith.task_sizes).
CPU_SIZES = {"BATCH": 3, "IN_FEATURES": 320, "OUT_FEATURES": 80}


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES, dtype=torch.bfloat16)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
