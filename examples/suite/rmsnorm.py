"""Llama's RMSNorm, x * rsqrt(mean(x^2) + eps) * weight, computed in fp32 and cast back: bf16 [16384, 8192].
Memory-bound: 256 MiB read + 256 MiB written (0.54 GB, ~0.125 ms at 4.3 TB/s); ~4 FLOPs per element."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """LlamaRMSNorm (transformers), with the weight in the model's dtype."""

    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        # Llama starts the weight at 1: random values make a kernel that skips it fail.
        self.weight = nn.Parameter(torch.empty(hidden_size, dtype=torch.bfloat16).normal_(1.0, 0.1))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


TOKENS = 16384
HIDDEN = 8192

# Small sizes for the Triton interpreter on the CPU (kernelsmith.suite.scale.shrink).
CPU_SIZES = {"TOKENS": 8, "HIDDEN": 1500}


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN]
