"""Fault/escape: leave processes behind that outlive the evaluation.

On its first forward it starts `sleep 3137` in a new session (subprocess.Popen with
start_new_session=True), and `sleep 3137.2` through a double fork (the middle process calls
setsid and exits at once, so the grandchild is orphaned and belongs to no candidate process
group or session). Then it returns an honest softmax. Expected: whatever the verdict, no process
whose command line contains "sleep 3137" is left after the evaluation (KS_REDTEAM_SLEEP, when set,
replaces 3137: the escape set uses its own marker).
"""
import os
import subprocess

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


def double_fork(argv):
    pid = os.fork()
    if pid == 0:  # middle process
        try:
            os.setsid()
            if os.fork() == 0:  # grandchild
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.execvp(argv[0], argv)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


class ModelNew(nn.Module):
    spawned = False

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not ModelNew.spawned:
            ModelNew.spawned = True
            seconds = os.environ.get("KS_REDTEAM_SLEEP", "3137")  # the marker: another test may run this too
            subprocess.Popen(["sleep", seconds], start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            double_fork(["sleep", seconds + ".2"])
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return out
