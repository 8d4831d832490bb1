"""How a task makes one recorded tensor: the Python expression for its value and a note when its
values are not the recorded ones in kind (random where the model had a pattern).

Values are drawn, but keep the structure the model's carry, so that a reference is as well-behaved
on the task's values as on the model's (a BatchNorm's variances stay non-negative): a constant
buffer or activation stays that constant, a two-valued tensor (a mask) keeps its two values at
their frequency, and any other floating tensor is drawn at its recorded mean and spread within its
recorded range (so its sign too). A parameter that is one constant (an initial value: ones, zeros)
is drawn around it instead, so that a kernel must use it.
"""

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


def _num(x: float) -> str:
    """A float at 4 significant digits, written as a float literal."""
    return _number(float(f"{x:.4g}"))


def _float_expr(t: torch.Tensor, what: str, kind: str, shape: str) -> tuple[str, str, str | None]:
    """(expression, how, note) for a floating tensor: its recorded structure kept (a constant, two
    values such as a mask, the sign and range of variances or scales), its values drawn."""
    dtype = t.dtype
    x = t.detach().float()
    if not bool(torch.isfinite(x).all()):
        if t.numel() <= SMALL:
            return _literal(t), "as recorded", None
        made = f"torch.randn({shape}, dtype={dtype})"
        return made, "random", f"{what}: holds inf/nan (a mask?) in {t.numel()} elements; random finite values here"
    lo, hi = float(x.amin()), float(x.amax())
    if lo == hi and kind == "parameter":  # an initial value: a kernel must still use what training makes of it
        if lo == 0.0:
            return f"torch.randn({shape}, dtype={dtype})", "random; the model's are all 0.0", None
        made = f"torch.rand({shape}, dtype={dtype}).add(0.5).mul({_number(lo)})"
        return made, f"random within x0.5..x1.5 of the model's constant {lo:g}", None
    if lo == hi:
        return f"torch.full({shape}, {_number(lo)}, dtype={dtype})", f"constant {lo:g} as recorded", None
    if bool(((x == lo) | (x == hi)).all()):  # a mask: two values, at the recorded frequency
        p = float((x == hi).float().mean())
        made = f"torch.where(torch.rand({shape}) < {_num(p)}, {_number(hi)}, {_number(lo)}).to({dtype})"
        return made, f"{lo:g} or {hi:g} as recorded ({p:.0%} {hi:g})", None
    std, mean = torch.std_mean(x)
    made = (
        f"torch.randn({shape}, dtype={dtype}).mul({_num(float(std))}).add({_num(float(mean))})"
        f".clamp({_num(lo)}, {_num(hi)})"
    )
    return made, f"random: the recorded mean {float(mean):.3g}, spread {float(std):.3g}, range {lo:.3g}..{hi:.3g}", None


def _one_value(t: torch.Tensor) -> bool:
    """An integer tensor that holds one value (a decode step's positions): made with torch.full at any shape."""
    return t.numel() > 0 and bool((t == t.reshape(-1)[0]).all())


def literal(t: torch.Tensor) -> bool:
    """Whether `t` is written out value by value (its shape cannot change: CPU sizes keep it)."""
    if t.numel() > SMALL:
        return False
    if t.dtype == torch.bool:
        return True
    if t.is_floating_point():
        return t.numel() > 0 and not bool(torch.isfinite(t.detach()).all())
    return not t.dtype.is_complex and (not t.numel() or (_arange_of(t) is None and not _one_value(t)))


def value_expr(
    t: torch.Tensor, what: str, kind: str = "activation", shape: str | None = None, stride: str | None = None
) -> tuple[str, str, str | None]:
    """(expression, how, note): the expression makes a tensor of `t`'s shape, dtype and strides with
    values of its kind; `how` says which (for the task's header); the note, where its values are
    not the recorded ones in kind. `kind`: "parameter", "buffer" or "activation"; `shape` and
    `stride`: their text in the task (named sizes: sizes.py), the recorded ones by default."""
    small, note, how = t.numel() <= SMALL, None, "random"
    shape = shape or str(list(t.shape))
    if t.dtype == torch.bool:
        if small:
            made, how = _literal(t), "as recorded"
        else:
            made, note = f"torch.rand({shape}) < 0.5", f"{what}: a bool mask of {t.numel()} elements, random here"
    elif t.is_floating_point() and t.numel():
        made, how, note = _float_expr(t, what, kind, shape)
    elif t.is_floating_point() or t.dtype.is_complex:
        made = f"torch.randn({shape}, dtype={t.dtype})"
    else:
        pattern = _arange_of(t) if t.numel() else None
        if pattern is not None:
            made, how = f"_arange({shape}, {pattern[0]}, {pattern[1]}, {t.dtype})", "an arange as recorded"
        elif t.numel() and _one_value(t):
            v = int(t.reshape(-1)[0])
            made, how = f"torch.full({shape}, {v}, dtype={t.dtype})", f"constant {v} as recorded"
        elif small:
            made, how = _literal(t), "as recorded"
        else:
            lo, hi = int(t.min()), int(t.max())
            made, how = f"torch.randint({lo}, {hi + 1}, {shape}, dtype={t.dtype})", f"random within {lo}..{hi}"
            note = f"{what}: {t.numel()} integers, random within the recorded {lo}..{hi}"
    if t.numel() > 1 and list(t.stride()) != contiguous_stride(list(t.shape)):
        made = f"_strided({made}, {stride or list(t.stride())})"
    return made, how, note
