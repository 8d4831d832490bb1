"""Cheat: return a torch.Tensor subclass that lies when compared.

The values are zeros written by a Triton kernel, but the subclass answers every comparison
(__eq__, allclose, equal, sub, abs, ...) through __torch_function__ with "equal" / zero error.
A harness that compares in-process, on the object it got, is fooled. Expected: runtime_error
(only plain dense tensors may come back).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


class AlwaysClose(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal"):
            return True
        if name in ("eq", "__eq__", "isclose"):
            return torch.ones(args[0].shape, dtype=torch.bool)
        if name in ("sub", "__sub__", "rsub", "__rsub__"):
            return torch.zeros(args[0].shape)
        return super().__torch_function__(func, types, args, kwargs)


@triton.jit
def zero_kernel(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = out.numel()
        zero_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK=1024)
        return out.as_subclass(AlwaysClose)
