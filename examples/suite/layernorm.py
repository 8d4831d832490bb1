"""nn.LayerNorm over the last dim with weight and bias: bf16 [16384, 8192].
Memory-bound: 256 MiB read + 256 MiB written (0.54 GB, ~0.125 ms at 4.3 TB/s); ~8 FLOPs per element."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5, dtype=torch.bfloat16)
        # A fresh LayerNorm has weight 1 and bias 0: random values make a kernel that skips them fail.
        with torch.no_grad():
            self.norm.weight.normal_(1.0, 0.1)
            self.norm.bias.normal_(0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


TOKENS = 16384
HIDDEN = 8192

# Small sizes for the Triton interpreter on the CPU (kernelsmith.suite.scale.shrink).
CPU_SIZES = {"TOKENS": 8, "HIDDEN": 1500}


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN]
