"""Cheat: do the work only on the timed call whose output is checked.

In the correctness trials forward is an honest Triton softmax. In the timing run (recognised
from the caller's frames: a function named like a benchmark, or the same input tensor object
passed again) it returns an unfilled torch.empty_like at once, except on the call whose output
gets checked: the harness's last call (read from its frame: a loop variable `rep`/`i` against
`reps`, plus the host-check calls that follow the timed ones when the module defines
HOST_CHECK_REPS; or `len(samples) == opts.min_reps - 1`; or else the third repeated call, which is
the CPU harness's last). A harness that checks only the final repetition's output sees a right answer and a
median time of nearly nothing. Expected: not a correct verdict with an implausible time
(candidate_ms must stay > 1 ms on the CPU interpreter, or the verdict must not be correct).
"""

import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


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


def harness_position():
    """(in_timing, is_last) read from the callers' frames; (False, None) if no harness is seen."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_name
        loc = frame.f_locals
        if "bench" in name or name.startswith("time") or name.endswith("timed"):
            rep = next((loc[k] for k in ("rep", "i", "r", "k") if isinstance(loc.get(k), int)), None)
            reps = loc.get("reps")
            if rep is not None and isinstance(reps, int):
                extra = frame.f_globals.get("HOST_CHECK_REPS", 0)  # host-clock calls after the timed ones
                extra = extra if isinstance(extra, int) else 0
                return True, rep == reps + extra - 1
            samples, opts = loc.get("samples"), loc.get("opts")
            if isinstance(samples, list) and hasattr(opts, "min_reps"):
                return True, len(samples) == opts.min_reps - 1
            return True, None
        frame = frame.f_back
    return False, None


def triton_softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.previous = None
        self.repeats = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        self.repeats = self.repeats + 1 if x is self.previous else 0
        self.previous = x
        in_timing, is_last = harness_position()
        if is_last is None:
            in_timing = in_timing or self.repeats > 0
            is_last = self.repeats == 3
        if in_timing and not is_last:
            return torch.empty_like(x)
        return triton_softmax(x)
