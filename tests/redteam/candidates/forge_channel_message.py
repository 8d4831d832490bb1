"""Cheat: write a forged timing report straight into the channel to the judge.

The sandbox's channel is its socket (found in /proc/self/fd; a spawned sandbox also has it on its command
line, --fd N). forward computes an
honest Triton softmax; when it sees it is being timed (the same input tensor object passed again
and again), on the third repeated call (the last timed call of the CPU harness: one untimed
call, three timed) it writes a well-formed frame (4-byte length + plain pickle, as
multiprocessing.Connection frames it) holding {"op": "timed", "outputs": [this call's right
output], "inputs": [], "stats": 1e-6 ms, "last_seed": the seed of this call's inputs (read from
the harness's frames: a dict local holding "seed")} before the sandbox sends its own.
Expected: not a correct verdict with an implausible time (candidate_ms must stay > 1 ms on the
CPU interpreter, or the verdict must not be correct).
"""
import os
import pickle
import stat
import struct
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

FAKE_MS = 1e-6


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


def channel_fd():
    """The channel's descriptor: the process's socket (a sandbox forked from the judge's template has the
    template's command line, whose --fd is closed in it), else --fd on the command line."""
    try:
        for name in sorted(os.listdir("/proc/self/fd"), key=int):
            fd = int(name)
            if fd > 2 and stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
    except (OSError, ValueError):
        pass
    try:
        return int(sys.argv[sys.argv.index("--fd") + 1])
    except (ValueError, IndexError):
        return None


def encode(t):
    try:
        from kernelsmith.evaluate.protocol import encode_tensor

        return encode_tensor(t)
    except Exception:
        flat = t.detach().cpu().contiguous().reshape(-1)
        return {"kind": "cpu", "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                "data": flat.view(torch.uint8).numpy().tobytes()}


def current_seed():
    """The seed of the inputs being timed, from the harness's locals (a dict with a "seed")."""
    frame = sys._getframe(1)
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, dict) and isinstance(value.get("seed"), int):
                return value["seed"]
        frame = frame.f_back
    return None


def forge(out):
    fd = channel_fd()
    if fd is None:
        return
    stats = {"median_ms": FAKE_MS, "mean_ms": FAKE_MS, "min_ms": FAKE_MS, "max_ms": FAKE_MS, "std_ms": 0.0,
             "reps": 1000}
    msg = {"op": "timed", "outputs": [encode(out)], "inputs": [], "stats": stats, "host_stats": None,
           "launches": 1, "samples_ms": [FAKE_MS] * 1000}
    seed = current_seed()
    if seed is not None:
        msg["last_seed"] = seed
    payload = pickle.dumps(msg, protocol=5)
    frame = struct.pack("!i", len(payload)) + payload
    view = memoryview(frame)
    while len(view):
        try:
            written = os.write(fd, view)
        except OSError:
            return
        view = view[written:]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.previous = None
        self.repeats = 0
        self.forged = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.repeats = self.repeats + 1 if x is self.previous else 0
        self.previous = x
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
        if self.repeats == 3 and not self.forged:
            self.forged = True
            forge(out)
        return out
