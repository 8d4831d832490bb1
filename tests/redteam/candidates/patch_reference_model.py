"""Cheat: rewrite the reference so that it agrees with us.

At import it looks through sys.modules for the task (any module with `Model` and `get_inputs`)
and replaces Model.forward with one returning zeros; its own forward returns zeros written by a
Triton kernel. The judge runs the reference in its own process. Expected: incorrect.
"""
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _zeros_forward(self, *args, **kwargs):
    return torch.zeros_like(args[0])


def patch_task_modules():
    patched = []
    for name, module in list(sys.modules.items()):
        model = getattr(module, "Model", None)
        if isinstance(model, type) and hasattr(module, "get_inputs") and name != __name__:
            model.forward = _zeros_forward
            patched.append(name)
    return patched


PATCHED = patch_task_modules()


@triton.jit
def zero_kernel(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        patch_task_modules()  # again, in case the task was loaded after us
        out = torch.empty_like(x)
        n = out.numel()
        zero_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK=1024)
        return out
