"""Llama's rotary position embedding (apply_rotary_pos_emb) on q and k, GQA: bf16 q [8, 32, 4096, 128],
k [8, 8, 4096, 128], cos/sin [4096, 128]. Memory-bound: 322 MiB read + 320 MiB written (0.67 GB, ~0.16 ms
at 4.3 TB/s); 3 FLOPs per element."""

import torch
import torch.nn as nn


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    """transformers' apply_rotary_pos_emb, cos and sin shared by the whole batch."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        cos = cos.unsqueeze(0).unsqueeze(0)  # [1, 1, S, D]: broadcast over batch and heads
        sin = sin.unsqueeze(0).unsqueeze(0)
        q_embed = (q * cos) + (rotate_half(q) * sin)
        k_embed = (k * cos) + (rotate_half(k) * sin)
        return q_embed, k_embed


BATCH = 8
HEADS = 32
KV_HEADS = 8
SEQ_LEN = 4096
HEAD_DIM = 128

# Small sizes for the Triton interpreter on the CPU (kernelsmith.suite.scale.shrink).
CPU_SIZES = {"BATCH": 1, "HEADS": 2, "KV_HEADS": 1, "SEQ_LEN": 40, "HEAD_DIM": 32}


def get_inputs():
    q = torch.randn(BATCH, HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, KV_HEADS, SEQ_LEN, HEAD_DIM, dtype=torch.bfloat16)
    # cos and sin as LlamaRotaryEmbedding makes them (rope_theta 500000, Llama 3).
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))
    freqs = torch.outer(torch.arange(SEQ_LEN, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return [q, k, emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)]


def get_init_inputs():
    return []
