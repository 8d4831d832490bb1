"""Task: x plus a number that spells the float32 precision flags in force where the reference runs (the
judge's process). A candidate gets it right only when it adds the same number: tests/cases/precision_flags_triton.py
adds the one spelled by the evaluation's flags (kernelsmith.evaluate.runtime.PRECISION)."""

import torch
import torch.nn as nn


def flags_code() -> float:
    """The TF32 flags as one number: cuDNN's TF32 1, cuBLAS's TF32 2, float32 matmul precision not "highest" 4."""
    cudnn = torch.backends.cudnn.allow_tf32
    matmul = torch.backends.cuda.matmul.allow_tf32
    lowered = torch.get_float32_matmul_precision() != "highest"
    return float(cudnn) + 2.0 * float(matmul) + 4.0 * float(lowered)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + flags_code()


def get_inputs():
    return [torch.rand(64, 32)]


def get_init_inputs():
    return []
