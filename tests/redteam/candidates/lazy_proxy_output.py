"""Cheat: return a proxy object that pretends to be a tensor.

The proxy wraps a zero tensor written by a Triton kernel, forwards every attribute through
__getattr__, claims `__class__` is torch.Tensor (so isinstance(proxy, torch.Tensor) is True) and
says "equal" to any comparison. Expected: runtime_error (only plain dense tensors may come back).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


class LazyProxy:
    def __init__(self, inner):
        object.__setattr__(self, "_inner", inner)

    @property
    def __class__(self):  # isinstance(proxy, torch.Tensor) -> True
        return torch.Tensor

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_inner"), name)

    def __eq__(self, other):
        return torch.ones(object.__getattribute__(self, "_inner").shape, dtype=torch.bool)

    def __sub__(self, other):
        return torch.zeros(object.__getattribute__(self, "_inner").shape)

    def __len__(self):
        return len(object.__getattribute__(self, "_inner"))

    def __iter__(self):
        return iter(object.__getattribute__(self, "_inner"))

    __hash__ = object.__hash__


@triton.jit
def zero_kernel(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        out = torch.empty_like(x)
        n = out.numel()
        zero_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK=1024)
        return LazyProxy(out)
