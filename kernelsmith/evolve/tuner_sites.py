"""What the tuner reads in a candidate before it decides anything (tuner_analysis.py decides): the
`@triton.jit` kernels of the file, their launch sites `K[grid](...)`, and the names bound in the
scope a launch sits in.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import cast

import libcst as cst
import libcst.matchers as m

from kernelsmith.evolve import tuner_launch as launch


@dataclass(frozen=True)
class Kernel:
    constexprs: frozenset[str]
    preset: frozenset[str]  # names that autotune/heuristics decorators mention: theirs, not ours
    autotuned: bool
    uses_dot: bool
    loops: frozenset[str] = frozenset()  # names inside a range(...) in its body: blocks it loops over
    configs: tuple = ()  # @triton.autotune: per Config, ((name, literal), ...)


def params_of(fn: cst.FunctionDef) -> list[cst.Param]:
    ps = fn.params
    stars = [s for s in (ps.star_arg, ps.star_kwarg) if isinstance(s, cst.Param)]
    return [*ps.posonly_params, *ps.params, *ps.kwonly_params, *stars]


def find_kernels(module: cst.Module) -> dict[str, Kernel]:
    found: dict[str, tuple] = {}
    extra: dict[str, tuple] = {}
    for fn in (s for s in module.body if isinstance(s, cst.FunctionDef)):
        jit, autotuned, preset, configs = False, False, set(), []
        for dec in fn.decorators:
            name = launch.dotted(dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator)
            jit |= name in ("jit", "triton.jit")
            if name in ("autotune", "triton.autotune", "heuristics", "triton.heuristics"):
                autotuned |= name.endswith("autotune")
                preset |= {cast(cst.SimpleString, s).evaluated_value for s in m.findall(dec, m.SimpleString())}
                if name.endswith("autotune"):
                    configs += launch.autotune_configs(dec, module)
        if not jit:
            continue
        constexprs = frozenset(
            p.name.value
            for p in params_of(fn)
            if p.annotation is not None and launch.dotted(p.annotation.annotation).endswith("constexpr")
        )
        calls = [cast(cst.Call, c).func for c in m.findall(fn.body, m.Call())]
        dot = any(launch.dotted(f).rsplit(".", 1)[-1] == "dot" for f in calls)
        callees = {f.value for f in calls if isinstance(f, cst.Name)}
        found[fn.name.value] = (constexprs, frozenset(preset), autotuned, dot, callees)
        extra[fn.name.value] = (launch.looped_names(fn), tuple(tuple(c) for c in configs))
    # tl.dot reached through same-file jit helpers counts too
    dot = {name for name, f in found.items() if f[3]}
    while grown := {n for n, f in found.items() if n not in dot and f[4] & dot}:
        dot |= grown
    return {n: Kernel(f[0], f[1], f[2], n in dot, *extra[n]) for n, f in found.items()}


class LaunchSites(cst.CSTVisitor):
    """Launch sites `K[grid](...)` in source order, each with its innermost enclosing function."""

    def __init__(self, module: cst.Module, kernels: dict[str, Kernel]) -> None:
        self.kernels = kernels
        self.scopes: list[cst.Module | cst.FunctionDef] = [module]
        self.sites: list[tuple[str, cst.Call, cst.Module | cst.FunctionDef]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.scopes.append(node)
        return node.name.value not in self.kernels  # kernels launch nothing; skipping them saves time

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Subscript) and isinstance(f.value, cst.Name) and f.value.value in self.kernels:
            self.sites.append((f.value.value, node, self.scopes[-1]))


class _Bindings(cst.CSTVisitor):
    """Every binding of each name in one scope: the int literal bound, or None for anything else."""

    def __init__(self) -> None:
        # an int literal, or a computed block (tuner_launch.split_scale), bound to the name
        self.found: dict[str, list[cst.BaseExpression | None]] = defaultdict(list)

    def bind(self, target: cst.CSTNode, value: cst.CSTNode | None) -> None:
        if isinstance(target, cst.Name):
            keep = isinstance(value, cst.Integer) or (
                isinstance(value, cst.BaseExpression) and launch.split_scale(value) is not None
            )
            self.found[target.value].append(cast(cst.BaseExpression, value) if keep else None)
        elif isinstance(target, (cst.Tuple, cst.List)):  # `BLOCK_M, BLOCK_N = 64, 32`
            values = None
            if (
                isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == len(target.elements)
                and not any(isinstance(e, cst.StarredElement) for e in (*value.elements, *target.elements))
            ):
                values = [e.value for e in value.elements]
            for i, element in enumerate(target.elements):
                self.bind(element.value, values[i] if values else None)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):  # a nested scope: only its name binds here
            self.bind(node.name, None)
            return False
        if isinstance(node, cst.Assign):  # `a = b = 1024` binds two names to one literal: not tunable
            for t in node.targets:
                self.bind(t.target, node.value if len(node.targets) == 1 else None)
        elif isinstance(node, cst.AnnAssign):
            self.bind(node.target, node.value)
        elif isinstance(node, (cst.AugAssign, cst.For, cst.NamedExpr)):
            self.bind(node.target, None)
        elif isinstance(node, cst.AsName):  # with-as, except-as, import-as
            self.bind(node.name, None)
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            for item in node.names:
                self.bind(item.name, None)
        return not isinstance(node, cst.Lambda)


def scope_bindings(scope: cst.Module | cst.FunctionDef) -> dict[str, list[cst.BaseExpression | None]]:
    b = _Bindings()
    if isinstance(scope, cst.FunctionDef):
        for p in params_of(scope):
            b.bind(p.name, None)
        scope.body.visit(b)
    else:
        for stmt in scope.body:
            stmt.visit(b)
    return b.found
