"""Small pieces of generated code that the imported tasks and candidates share: names made identifiers,
values made literals, and `_as_outputs` (a reference's or a Solution's result as a forward returns it)."""

from __future__ import annotations

import keyword
import math
import re

_NOT_IDENT = re.compile(r"\W")


def ident(name: str, taken: set[str] | None = None) -> str:
    """`name` as a Python identifier (a Definition's names are any non-empty strings), unique in `taken`
    (which it joins)."""
    out = _NOT_IDENT.sub("_", name) or "_"
    if out[0].isdigit():
        out = "_" + out
    if keyword.iskeyword(out):
        out += "_"
    taken = taken if taken is not None else set()
    base, n = out, 1
    while out in taken:
        n += 1
        out = f"{base}_{n}"
    taken.add(out)
    return out


def const_name(axis: str, taken: set[str]) -> str:
    """The module constant that holds an axis's size: `BATCH_SIZE` for batch_size, unique in `taken`."""
    return ident(_NOT_IDENT.sub("_", axis).upper() if not axis[:1].isdigit() else "AXIS_" + axis.upper(), taken)


def literal(value: object) -> str:
    """Code for a plain value (a number, a bool, a string, or a list or tuple of them), non-finite floats
    included (`float('inf')`, which repr does not give)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    return repr(value)


def as_outputs(names: list[str], dtypes: list[str]) -> str:
    """`_as_outputs(result)`: what a Definition's `run` returned, as a forward returns it: a dict in the
    Definition's output order, a Python scalar as a 0-d tensor of its output's dtype, one output alone."""
    return f'''
_OUTPUTS = {literal(names)}
_OUTPUT_DTYPES = [{", ".join(f"torch.{d}" for d in dtypes)}]


def _as_outputs(result):
    """run's result as a forward returns it: a dict in the Definition's output order, a Python scalar as a
    0-d tensor of its output's dtype, one output alone."""
    if isinstance(result, dict):
        result = tuple(result[name] for name in _OUTPUTS)
    values = result if isinstance(result, (tuple, list)) else (result,)
    values = tuple(
        v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=_OUTPUT_DTYPES[i]) for i, v in enumerate(values)
    )
    return values[0] if len(values) == 1 else values
'''
