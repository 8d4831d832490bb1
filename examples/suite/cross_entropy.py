"""Per-token cross-entropy of LM logits: bf16 [8192, 128256] (Llama 3's vocabulary), int64 targets -> bf16 [8192].
Memory-bound: 2.1 GB of logits read once (~0.49 ms at 4.3 TB/s); ~4 FLOPs per logit."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    # Per-token losses, not their mean: a scalar output passes any check as a constant (the
    # evaluator flags such a task as degenerate), while a loss per token pins down every row.
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, reduction="none")


TOKENS = 8192
VOCAB = 128256

# Small sizes for the Triton interpreter on the CPU (kernelsmith.suite.scale.shrink).
CPU_SIZES = {"TOKENS": 16, "VOCAB": 1500}


def get_inputs():
    logits = torch.randn(TOKENS, VOCAB, dtype=torch.bfloat16)
    targets = torch.randint(0, VOCAB, (TOKENS,), dtype=torch.int64)
    return [logits, targets]


def get_init_inputs():
    return []
