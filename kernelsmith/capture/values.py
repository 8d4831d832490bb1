"""How a task makes one recorded tensor: the Python expression for its value and a note when its
values are not the recorded ones in kind (random where the model had a pattern)."""

from __future__ import annotations

import math

import torch

SMALL = 4096  # elements: integer and mask tensors up to this size are written out as literals

# Helpers a task carries when its values need them (a task imports torch only), by name.
HELPERS = {
    "_strided": '''
def _strided(values, stride):
    """`values` laid out with the recorded strides (a dimension of stride 0 is expanded)."""
    shape = values.shape
    keep = [slice(None) if s != 0 else slice(0, 1) for s in stride]
    base = values[tuple(keep)]
    out = torch.empty_strided(base.shape, [s if s != 0 else 1 for s in stride], dtype=values.dtype)
    return out.copy_(base).expand(shape)
''',
    "_arange": '''
def _arange(shape, start, step, dtype):
    n = 1
    for d in shape:
        n *= d
    return torch.arange(start, start + step * n, step, dtype=torch.int64)[:n].to(dtype).reshape(shape)
''',
}


def helpers_for(code: str) -> str:
    """The helpers `code` calls, in a fixed order, as source (empty when it calls none)."""
    used = [src.strip("\n") for name, src in HELPERS.items() if f"{name}(" in code]
    return "\n\n\n".join(used)


def contiguous_stride(shape: list[int]) -> list[int]:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return out[::-1]


def _number(x) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return "float('nan')" if math.isnan(x) else ("float('inf')" if x > 0 else "-float('inf')")
    return repr(x)


def _literal(t: torch.Tensor) -> str:
    flat = t.detach().reshape(-1).cpu()
    if t.is_floating_point():
        flat = flat.double()
    items = ", ".join(_number(v) for v in flat.tolist())
    return f"torch.tensor([{items}], dtype={t.dtype}).reshape({list(t.shape)})"


def _arange_of(t: torch.Tensor) -> tuple[int, int] | None:
    flat = t.detach().reshape(-1).cpu().long()
    if flat.numel() < 2:
        return None
    start, step = int(flat[0]), int(flat[1] - flat[0])
    if step == 0:
        return None
    expect = torch.arange(flat.numel(), dtype=torch.int64) * step + start
    return (start, step) if torch.equal(flat, expect) else None


def value_expr(t: torch.Tensor, what: str) -> tuple[str, str | None]:
    """(expression, note): the expression makes a tensor of `t`'s shape, dtype and strides."""
    shape, small, note = list(t.shape), t.numel() <= SMALL, None
    if t.dtype == torch.bool:
        if small:
            made = _literal(t)
        else:
            made, note = f"torch.rand({shape}) < 0.5", f"{what}: a bool mask of {t.numel()} elements, random here"
    elif t.is_floating_point():
        finite = bool(torch.isfinite(t).all()) if t.numel() else True
        if not finite and small:
            made = _literal(t)
        else:
            made = f"torch.randn({shape}, dtype={t.dtype})"
            if not finite:
                note = f"{what}: holds inf/nan (a mask?) in {t.numel()} elements; random finite values here"
    elif t.dtype.is_complex:
        made = f"torch.randn({shape}, dtype={t.dtype})"
    else:
        pattern = _arange_of(t) if t.numel() else None
        if pattern is not None:
            made = f"_arange({shape}, {pattern[0]}, {pattern[1]}, {t.dtype})"
        elif small:
            made = _literal(t)
        else:
            lo, hi = int(t.min()), int(t.max())
            made = f"torch.randint({lo}, {hi + 1}, {shape}, dtype={t.dtype})"
            note = f"{what}: {t.numel()} integers, random within the recorded {lo}..{hi}"
    if t.numel() > 1 and list(t.stride()) != contiguous_stride(shape):
        made = f"_strided({made}, {list(t.stride())})"
    return made, note
