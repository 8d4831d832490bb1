"""Llama decoder's residual add + RMSNorm: h = x + residual; out = rmsnorm(h) * weight; returns (out, h).
bf16 [16384, 8192]. Memory-bound: 2 x 256 MiB read + 2 x 256 MiB written (1.07 GB, ~0.25 ms at 4.3 TB/s)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """The residual add before a LlamaRMSNorm, fused as vLLM's fused_add_rms_norm returns it."""

    def __init__(self, hidden_size: int, eps: float = 1e-5):
        super().__init__()
        # Llama starts the weight at 1: random values make a kernel that skips it fail.
        self.weight = nn.Parameter(torch.empty(hidden_size, dtype=torch.bfloat16).normal_(1.0, 0.1))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        h = x + residual
        hidden_states = h.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(h.dtype), h


TOKENS = 16384
HIDDEN = 8192

# Small sizes for the Triton interpreter on the CPU (kernelsmith.suite.scale.shrink).
CPU_SIZES = {"TOKENS": 8, "HIDDEN": 1500}


def get_inputs():
    x = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    residual = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)
    return [x, residual]


def get_init_inputs():
    return [HIDDEN]
