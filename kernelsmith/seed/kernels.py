"""One Triton kernel of Inductor's, made plain: its `@triton_heuristics.*` decorator read for what a
launch needs (the grid type, the parameters) and replaced by `@triton.jit`."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from kernelsmith.seed.errors import SeedError

_EMPTY = cst.Module(body=[])


@dataclass(frozen=True)
class SeedKernel:
    """A kernel's statements (imports, its `@triton.jit` function, helpers) and its launch facts."""

    name: str
    statements: tuple[cst.BaseStatement, ...]
    params: tuple[str, ...]  # the kernel function's parameters, in order
    grid_type: str
    fixed_grid_args: int  # trailing launch arguments that are the grid (FixedGrid: 3), not kernel arguments


def _literal(node: cst.BaseExpression, what: str):
    try:
        return ast.literal_eval(_EMPTY.code_for_node(node))
    except (ValueError, SyntaxError):
        raise SeedError(f"{what} is not a literal in Inductor's kernel decorator") from None


def _dict_entry(node: cst.BaseExpression | None, key: str) -> cst.BaseExpression | None:
    if not isinstance(node, cst.Dict):
        return None
    for el in node.elements:
        if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) and el.key.evaluated_value == key:
            return el.value
    return None


def _is_heuristics(dec: cst.Decorator) -> bool:
    return m.matches(dec.decorator, m.Call(func=m.Attribute(value=m.Name("triton_heuristics"))))


def _launch_facts(name: str, dec: cst.Decorator) -> tuple[str, int]:
    """(grid type, trailing grid arguments) of a heuristics decorator."""
    call = cst.ensure_type(dec.decorator, cst.Call)
    kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    grid_node = _dict_entry(kw.get("inductor_meta"), "grid_type")
    if grid_node is None:
        raise SeedError(f"kernel {name}: Inductor's decorator names no grid_type (an older Inductor?)")
    grid_type = _literal(grid_node, f"kernel {name}'s grid_type")
    extra = _dict_entry(kw.get("inductor_meta"), "extra_launcher_args")
    extra_args = len(_literal(extra, f"kernel {name}'s extra_launcher_args")) if extra is not None else 0
    if extra_args and grid_type != "FixedGrid":
        raise SeedError(f"kernel {name}: extra launcher arguments beside a {grid_type} grid: not supported")
    return str(grid_type), extra_args


def read_kernel(name: str, source: str) -> SeedKernel:
    """The kernel `name` from its Triton source; a SeedError says what keeps it from being plain."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise SeedError(f"kernel {name}: its Triton source does not parse: {exc.message}") from None
    statements: list[cst.BaseStatement] = []
    facts: tuple[str, int] | None = None
    params: tuple[str, ...] = ()
    for stmt in module.body:
        if m.matches(stmt, m.SimpleStatementLine(body=[m.Expr()])):
            continue  # triton_helpers.set_driver_to_gpu(): the driver is the launching process's own
        if isinstance(stmt, cst.FunctionDef) and any(_is_heuristics(d) for d in stmt.decorators):
            if stmt.name.value not in (name, "triton_"):
                raise SeedError(f"kernel {name}: its source defines {stmt.name.value} instead")
            heuristics = [d for d in stmt.decorators if _is_heuristics(d)]
            facts = _launch_facts(name, heuristics[0])
            params = tuple(p.name.value for p in stmt.params.params)
            jit = [d for d in stmt.decorators if not _is_heuristics(d)]
            if not any(m.matches(d.decorator, m.Attribute(value=m.Name("triton"), attr=m.Name("jit"))) for d in jit):
                raise SeedError(f"kernel {name}: its function is not @triton.jit under Inductor's decorator")
            stmt = stmt.with_changes(name=cst.Name(name), decorators=jit)
        statements.append(stmt)
    if facts is None:
        raise SeedError(f"kernel {name}: no function under a triton_heuristics decorator in its source")
    return SeedKernel(name, tuple(statements), params, facts[0], facts[1])
