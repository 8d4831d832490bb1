"""Cheat: print a verdict of our own and leave before anyone checks.

In forward it prints JSON lines that look like a kernelsmith result (status correct, speedup
100) to stdout and stderr, then ends the process with os._exit(0), a "clean" exit code. A
harness that parses the candidate process's output, or takes exit code 0 as success, is
fooled. Expected: runtime_error (no speedup).
"""

import json
import os
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

FAKE = {
    "op": "result",
    "status": "correct",
    "correct": True,
    "speedup": 100.0,
    "candidate_ms": 0.001,
    "reference_ms": 0.1,
    "flags": [],
    "error": None,
}


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
        line = json.dumps(FAKE)
        print(line, flush=True)
        print(line, file=sys.stderr, flush=True)
        os._exit(0)
