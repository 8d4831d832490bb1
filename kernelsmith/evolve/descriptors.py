"""Kernel-aware descriptors: the axes of the MAP-Elites grid.

Two programs in different cells differ in a way that matters for a kernel (how many launches a
forward takes, how much code it is, whether it uses tensor cores), so keeping the best of each
cell keeps structurally different ideas alive, not only the current leader.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass


def _calls(tree: ast.AST, dotted: str) -> bool:
    mod, attr = dotted.rsplit(".", 1)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == attr:
            base = node.value
            if isinstance(base, ast.Name) and base.id == mod:
                return True
            if isinstance(base, ast.Attribute) and base.attr == mod:  # triton.language.dot
                return True
    return False


def _kernels_defined(tree: ast.AST) -> int:
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name == "jit":
                    n += 1
    return n


def _code_lines(code: str) -> int:
    return sum(1 for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#"))


@dataclass(frozen=True)
class Feature:
    """One descriptor: its raw value, and how a value falls into one of `bins` cells."""

    value: Callable[[ast.AST, str, dict], float]
    bin: Callable[[float, int], int]


def _log2_bin(v: float, bins: int) -> int:  # 0 | 1 | 2-3 | 4-7 | ...
    return min(bins - 1, 0 if v <= 0 else 1 + int(math.log2(v)))


def _lines_bin(v: float, bins: int) -> int:  # <40 | 40-79 | 80-159 | 160-319 | ...
    return min(bins - 1, 0 if v < 40 else 1 + int(math.log2(v / 40)))


def _flag_bin(v: float, bins: int) -> int:
    return 1 if v else 0


FEATURES: dict[str, Feature] = {
    # kernel launches per forward, as counted by the evaluator at run time
    "launches": Feature(lambda tree, code, ev: float(ev.get("launches_per_call") or 0), _log2_bin),
    # Triton/CUDA kernels defined in the file
    "kernels": Feature(lambda tree, code, ev: float(_kernels_defined(tree)), _log2_bin),
    # non-blank, non-comment lines
    "complexity": Feature(lambda tree, code, ev: float(_code_lines(code)), _lines_bin),
    # tensor cores through tl.dot
    "uses_dot": Feature(
        lambda tree, code, ev: float(_calls(tree, "tl.dot") or _calls(tree, "language.dot")), _flag_bin
    ),
    # the launch configuration is searched by triton.autotune
    "autotune": Feature(lambda tree, code, ev: float(_calls(tree, "triton.autotune")), _flag_bin),
}


def describe(code: str, eval_record: dict | None, features: list[str]) -> dict[str, float]:
    """Raw descriptor values of a program (its eval record supplies run-time counts)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    ev = {}
    if eval_record and eval_record.get("kernel_launches"):
        # the evaluator counts launches over the correctness trials that answered, one forward each
        trials = sum(1 for t in eval_record.get("trials") or [] if t.get("answered", True)) or 1
        ev["launches_per_call"] = round(eval_record["kernel_launches"] / trials, 2)
    return {name: FEATURES[name].value(tree, code, ev) for name in features}


def cell_of(descriptors: dict[str, float], features: list[str], bins: int) -> tuple[int, ...]:
    return tuple(FEATURES[f].bin(descriptors.get(f, 0.0), bins) for f in features)
