"""Candidate for precision_flags_task.py: adds the number that the evaluation's precision flags spell
(kernelsmith.evaluate.runtime.PRECISION), so it is correct exactly when the judge's reference ran under
them; it raises when the flags in force in its own process (the sandbox) are not those."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

from kernelsmith.evaluate.runtime import PRECISION, precision_flags

EXPECTED = (
    float(PRECISION["cudnn.allow_tf32"])
    + 2.0 * float(PRECISION["cuda.matmul.allow_tf32"])
    + 4.0 * float(PRECISION["float32_matmul_precision"] != "highest")
)


@triton.jit
def add_kernel(x_ptr, out_ptr, n, c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + c, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if precision_flags() != PRECISION:
            raise RuntimeError(f"the sandbox runs at {precision_flags()}, not {PRECISION}")
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 1024),)](x, out, n, EXPECTED, BLOCK=1024)
        return out
