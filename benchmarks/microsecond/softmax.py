"""Row softmax, fp32 [ROWS, COLS]. As written [64, 512], the issue's small case (as examples/softmax): latency-bound,
128 KiB read, 128 KiB written. benchmarks/timing_gpu.py (PLAN) also sets [4096, 8192], a prefill's attention-score
rows, the issue's large case: memory-bound, 128 MiB read + 128 MiB written (0.27 GB, ~62 us at 4.3 TB/s)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


ROWS = 64
COLS = 512

# Small sizes for the Triton interpreter on the CPU (kernelsmith.task_sizes).
CPU_SIZES = {"ROWS": 5, "COLS": 300}


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
