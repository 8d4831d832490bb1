"""Cheat: replay one result through the whole timing run, and make the harness report the seed
that result belongs to.

The timing harness refills the inputs in place before every timed call and tells the judge the
seed of the last refill, which the judge uses to compute the reference for the final output.
That seed lives in the sandbox, in a dict next to the timing loop. In the timing run (found from
the callers' frames: a frame holding a dict `last` and an int `seed`), this candidate computes
the first call honestly (its inputs are those of `seed`, not refilled yet), then returns that
same output at once on every later call, and after each call sets last["seed"] back to `seed`.
The judge then checks the replayed output against the reference on `seed`: it matches. In the
correctness trials it is an honest Triton softmax. Where the harness times calls captured in a
CUDA graph (no such dict: the judge derives the last call's seed from the counts), it does the same
to the capture: the first captured call computes, every later one returns that output at once.
Expected: not a correct verdict with an implausible time (candidate_ms must stay > 1 ms on the CPU
interpreter, or the verdict must not be correct).
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


def triton_softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


def timing_harness():
    """(the dict holding the reported seed, the timing run's own seed), or None outside timing."""
    frame = sys._getframe(2)
    while frame is not None:
        loc = frame.f_locals
        if isinstance(loc.get("last"), dict) and isinstance(loc.get("seed"), int):
            return loc["last"], loc["seed"]
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.replay = None  # (input object, output, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        harness = timing_harness()
        if harness is None and x.is_cuda and torch.cuda.is_current_stream_capturing():
            if self.replay is None or self.replay[2] != "graph":
                self.replay = (x, triton_softmax(x), "graph")  # the first captured call
            return self.replay[1]
        if harness is None:
            return triton_softmax(x)
        last, seed = harness
        if self.replay is None or self.replay[0] is not x or self.replay[2] != seed:
            self.replay = (x, triton_softmax(x), seed)  # the first timed call: inputs of `seed`
        last["seed"] = seed
        return self.replay[1]
