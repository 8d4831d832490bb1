"""What the tuner can tune at a Triton launch beyond the literals written there (tuner.py uses it):

* launch options a launch leaves out: `num_warps` and `num_stages` (Triton's defaults, 4 and
  3 on NVIDIA, are their values until a tuned child writes another one), and on Hopper
  (compute capability 9+), where the installed Triton has them, `num_ctas` for kernels that
  call `tl.dot` and `maxnreg` (no cap, or 32 / 64 / 128 registers per thread);
* block sizes computed at the launch: `BLOCK=triton.next_power_of_2(n)` (inline, or bound once
  in the launching function), `min(...)` / `max(...)` of such calls and power-of-two literals,
  scaled by a power of two (`E * 2`, `max(E // 2, 16)`). A kernel that does not loop over
  the block (no `range(...)` mentions it, and the grid does not divide by it) needs the whole
  row in one block: its block is never scaled below what the code computes, and its
  `min(...)` caps never lowered;
* the configs of `@triton.autotune(configs=[triton.Config({...}, num_warps=..., ...), ...])`:
  each config's literals, so the autotuner chooses among tuned configs.
"""

from __future__ import annotations

import functools
from typing import cast

import libcst as cst
import libcst.matchers as m

OPTION_DEFAULTS = {"num_warps": 4, "num_stages": 3}
NUM_CTAS = (1, 2)
# maxnreg caps a thread's registers; "no cap" has no value, so the tuner calls it NO_REG_CAP
# (above the hardware's 255) and never writes it. Caps trade spills for occupancy: 32 registers
# let an SM hold its 2048 threads, 64 half of them, 128 a quarter.
NO_REG_CAP = 256
MAXNREG = (32, 64, 128)
HOPPER_ONLY = ("num_ctas", "maxnreg")  # options the tuner sets only on compute capability 9+
SCALE_ONE = 16  # a computed block's scale is SCALE_ONE * factor: 16 leaves it as computed
SCALES_LOOPING = (2, 4, 8, 16, 32)  # /8 .. x2
SCALES_WHOLE_ROW = (16, 32)  # never below the computed value
SCALED_FLOOR = 16  # a scaled-down block is at least this (tl.arange needs >= 1; tiny blocks waste warps)


def dotted(expr: cst.BaseExpression) -> str:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return f"{dotted(expr.value)}.{expr.attr.value}"
    return ""


@functools.lru_cache(maxsize=1)
def triton_options() -> frozenset[str]:
    """Launch options the installed Triton's CUDA backend accepts (empty when it cannot tell)."""
    try:
        import dataclasses

        from triton.backends.nvidia.compiler import CUDAOptions

        return frozenset(f.name for f in dataclasses.fields(CUDAOptions))
    except Exception:  # no Triton, or another layout of its backends
        return frozenset()


def absent_options(call: cst.Call, autotuned: bool, preset: frozenset[str], uses_dot: bool, hopper: bool) -> dict:
    """Options this launch leaves out that the tuner may add: name -> the value they have now."""
    if autotuned or any(a.star for a in call.args):  # autotune owns them; **kw may carry them
        return {}
    present = {a.keyword.value for a in call.args if a.keyword is not None}
    wanted = dict(OPTION_DEFAULTS)
    if hopper and uses_dot and "num_ctas" in triton_options():
        wanted["num_ctas"] = 1
    if hopper and "maxnreg" in triton_options():
        wanted["maxnreg"] = NO_REG_CAP
    return {k: v for k, v in wanted.items() if k not in present and k not in preset}


def is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def pow2_int(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer) and is_pow2(int(node.evaluated_value))


def _is_next_pow2(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and dotted(node.func).rsplit(".", 1)[-1] == "next_power_of_2"


def _computed(node: cst.BaseExpression) -> bool:
    """A power of two computed at run time: next_power_of_2(...), or min/max of those and pow2 literals."""
    if _is_next_pow2(node):
        return True
    if isinstance(node, cst.Call) and dotted(node.func) in ("min", "max") and len(node.args) >= 2:
        inner = [a.value for a in node.args]
        return all(_is_next_pow2(x) or pow2_int(x) for x in inner) and any(_is_next_pow2(x) for x in inner)
    return False


def split_scale(node: cst.BaseExpression) -> tuple[cst.BaseExpression, int] | None:
    """(E, scale) when `node` is a computed block E, E * 2**k or max(E // 2**k, FLOOR); else None."""
    if _computed(node):
        return node, SCALE_ONE
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply) and pow2_int(node.right):
        if _computed(node.left):
            return node.left, SCALE_ONE * int(cast(cst.Integer, node.right).evaluated_value)
    if isinstance(node, cst.Call) and dotted(node.func) == "max" and len(node.args) == 2:
        inner, floor = node.args[0].value, node.args[1].value
        if (
            isinstance(inner, cst.BinaryOperation)
            and isinstance(inner.operator, cst.FloorDivide)
            and pow2_int(inner.right)
            and isinstance(floor, cst.Integer)
            and _computed(inner.left)
        ):
            k = int(cast(cst.Integer, inner.right).evaluated_value)
            if SCALE_ONE % k == 0:
                return inner.left, SCALE_ONE // k
    return None


def render_scaled(expr: cst.BaseExpression, scale: int) -> cst.BaseExpression:
    if scale == SCALE_ONE:
        return expr
    if scale > SCALE_ONE:
        return cst.BinaryOperation(expr, cst.Multiply(), cst.Integer(str(scale // SCALE_ONE)))
    down = cst.BinaryOperation(expr, cst.FloorDivide(), cst.Integer(str(SCALE_ONE // scale)))
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return cst.Call(cst.Name("max"), [cst.Arg(down, comma=comma), cst.Arg(cst.Integer(str(SCALED_FLOOR)))])


def looped_names(fn: cst.FunctionDef) -> frozenset[str]:
    """Names a kernel mentions inside a `range(...)` (or tl.range / tl.static_range) call: the
    block sizes it loops over."""
    names: set[str] = set()
    for call in m.findall(fn.body, m.Call()):
        call = cast(cst.Call, call)
        if dotted(call.func).rsplit(".", 1)[-1] in ("range", "static_range"):
            names |= {cast(cst.Name, n).value for a in call.args for n in m.findall(a, m.Name())}
    return frozenset(names)


def grid_names(call: cst.Call) -> frozenset[str]:
    """Names the launch's grid mentions (a grid that divides by a block covers the rest with programs)."""
    grid = cast(cst.Subscript, call.func).slice
    return frozenset(cast(cst.Name, n).value for e in grid for n in m.findall(e, m.Name()))


def autotune_configs(dec: cst.Decorator, module: cst.Module) -> list[list[tuple[str, cst.Integer]]]:
    """Per `triton.Config(...)` of an autotune decorator: (name, literal) of its meta-parameters
    (the dict) and its num_warps / num_stages keywords. `configs=` inline or a module-level name."""
    if not isinstance(dec.decorator, cst.Call):
        return []
    listed = next((a.value for a in dec.decorator.args if a.keyword is not None and a.keyword.value == "configs"), None)
    if isinstance(listed, cst.Name):
        bound = [
            s.value
            for stmt in module.body
            if isinstance(stmt, cst.SimpleStatementLine)
            for s in stmt.body
            if isinstance(s, cst.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0].target, cst.Name)
            and s.targets[0].target.value == listed.value
        ]
        listed = bound[0] if len(bound) == 1 else None
    if not isinstance(listed, (cst.List, cst.Tuple)):
        return []
    out = []
    for element in listed.elements:
        cfg = element.value
        if not (isinstance(cfg, cst.Call) and dotted(cfg.func).rsplit(".", 1)[-1] == "Config"):
            continue
        entries: list[tuple[str, cst.Integer]] = []
        meta = cfg.args[0].value if cfg.args and cfg.args[0].keyword is None else None
        if isinstance(meta, cst.Dict):
            for el in meta.elements:
                if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString):
                    if isinstance(el.value, cst.Integer):
                        entries.append((str(el.key.evaluated_value), el.value))
        for a in cfg.args:
            kw = a.keyword.value if a.keyword is not None else None
            if kw in ("num_warps", "num_stages") and isinstance(a.value, cst.Integer):
                entries.append((kw, a.value))
        out.append(entries)
    return out
