"""Llama's RMSNorm at decode width: x * rsqrt(mean(x^2) + eps) in fp32, cast back, times the weight; DTYPE
[TOKENS, HIDDEN]. As written bf16 [32, 4096], a decode batch of 32 tokens: latency-bound, 256 KiB read, 256 KiB
written, 4096 weights, a few microseconds. benchmarks/timing_gpu.py (PLAN) also sets one token (8 KiB each way in
bf16) and fp32 (twice the bytes) at either count."""

import torch
import torch.nn as nn

DTYPE = torch.bfloat16


class Model(nn.Module):
    """LlamaRMSNorm (transformers), with the weight in the model's dtype."""

    def __init__(self, hidden_size: int, dtype: torch.dtype, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden_size, dtype=dtype).normal_(1.0, 0.1))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


TOKENS = 32
HIDDEN = 4096

# Small sizes for the Triton interpreter on the CPU (kernelsmith.task_sizes).
CPU_SIZES = {"TOKENS": 3, "HIDDEN": 300}


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=DTYPE)]


def get_init_inputs():
    return [HIDDEN, DTYPE]
