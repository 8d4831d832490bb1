"""Causal self-attention, F.scaled_dot_product_attention(q, k, v, is_causal=True): bf16 [8, 32, 2048, 128].
Compute-bound: 4*B*H*S^2*D/2 = 0.27 TFLOP with the causal mask (~0.35 ms at 790 TFLOP/s; 0.55 TFLOP
without it) against 4 x 128 MiB moved (~0.125 ms)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


BATCH = 8
HEADS = 32
SEQ_LEN = 2048
HEAD_DIM = 128

# Small sizes for the Triton interpreter on the CPU (kernelsmith.suite.scale.shrink).
CPU_SIZES = {"BATCH": 1, "HEADS": 2, "SEQ_LEN": 80, "HEAD_DIM": 32}


def get_inputs():
    q = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return []
