"""A record of Inductor's output, made the source of a KernelBench candidate.

The candidate holds: the imports and aliases the kept code uses (Inductor's helpers are imported
from torch, e.g. `triton_helpers`, `libdevice`), Inductor's Triton kernels as plain `@triton.jit`
functions, its `call(args, buffers_device)` with explicit launches and library calls, the task's
own definitions (its Model, so that ModelNew builds the same parameters in the same order), and
`class ModelNew(Model)` whose forward calls `call`.
"""

from __future__ import annotations

from typing import cast

import libcst as cst
import libcst.matchers as m

from kernelsmith.seed.errors import NoOwnKernel, SeedError
from kernelsmith.seed.kernels import SeedKernel, read_kernel
from kernelsmith.seed.parse import parse_output_code
from kernelsmith.seed.record import InductorRecord
from kernelsmith.seed.wrapper import rewrite_call
from kernelsmith.task import Task

PREAMBLE = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
# Triton's interpreter (TRITON_INTERPRET=1, the CPU evaluation) runs no libdevice calls; tl.math has
# the common ones under the same names (torch's triton_compat falls back the same way). On a GPU the
# kernels call libdevice, exactly as Inductor wrote them.
LIBDEVICE_ON_CPU = """
import os

if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter runs no libdevice calls: tl.math's of the same names
    libdevice = tl.math
"""
TASK_ONLY = frozenset({"get_inputs", "get_init_inputs"})  # the task's, not the candidate's
_EMPTY = cst.Module(body=[])

MODEL_NEW = '''
_SEED_STATE = {state!r}  # Model's parameters and buffers, call's first arguments
_SEED_TENSOR_INPUTS = {tensor_inputs!r}  # which forward inputs follow them (the rest were constants)


class ModelNew(Model):
    """Model's construction (the same parameters and buffers); its forward is Inductor's code."""

    def forward(self, *inputs):{mode_check}
        named = {{**dict(self.named_parameters()), **dict(self.named_buffers())}}
        args = [named[n] for n in _SEED_STATE] + [inputs[i] for i in _SEED_TENSOR_INPUTS]
        outputs = call(args, args[0].device if args else torch.device("cuda"))
        return {result}
'''
# Where the Model's graph depends on its mode (BatchNorm, Dropout), Inductor's code is for the mode it was
# compiled in (the evaluator's: as built), running statistics' updates included.
MODE_CHECK = '''
        if {other_mode}:  # Inductor's code is for the Model in {mode} mode; its graph in the other differs
            raise RuntimeError("this seed is Inductor's code for the Model in {mode} mode: call .{method}() first")'''


class _NameUses(cst.CSTVisitor):
    """Names a node reads or binds, leaving out attribute names (`x.device`) and keywords (`f(dtype=...)`)."""

    def __init__(self):
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False


def _names(node: cst.CSTNode) -> set[str]:
    uses = _NameUses()
    node.visit(uses)
    return uses.names


def _binds(stmt: cst.BaseStatement) -> set[str]:
    """Top-level names a statement binds: imports, assignments, defs and classes."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return {stmt.name.value}
    bound: set[str] = set()
    for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
        if isinstance(small, cst.Import):
            bound |= {_EMPTY.code_for_node(a.asname.name if a.asname else a.name).split(".")[0] for a in small.names}
        elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            bound |= {cst.ensure_type(a.asname.name if a.asname else a.name, cst.Name).value for a in small.names}
        elif isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = small.targets if isinstance(small, cst.Assign) else [small]
            bound |= {n for t in targets for n in _names(t.target)}
    return bound


def _trimmed(stmt: cst.BaseStatement, needed: set[str]) -> cst.BaseStatement | None:
    """`stmt` if it binds a needed name (a `from x import a, b` keeps only the needed ones), else None."""
    if not _binds(stmt) & needed:
        return None
    small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
        keep = [a for a in small.names if _binds(cst.SimpleStatementLine([small.with_changes(names=[a])])) & needed]
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return cst.SimpleStatementLine([small.with_changes(names=keep, lpar=None, rpar=None)])
    return stmt


def _needed_definitions(pool: list[cst.BaseStatement], roots: list[cst.CSTNode]) -> list[cst.BaseStatement]:
    """The statements of `pool` the roots need, directly or through each other, in pool order, once each."""
    needed = set().union(*(_names(r) for r in roots))
    kept: dict[int, cst.BaseStatement] = {}
    while True:
        grown = {i: t for i, s in enumerate(pool) if i not in kept and (t := _trimmed(s, needed)) is not None}
        if not grown:
            break
        kept.update(grown)
        needed |= set().union(*(_names(s) for s in grown.values()))
    out, seen = [], set()
    for i in sorted(kept):
        code = _EMPTY.code_for_node(kept[i]).strip()
        if code not in seen:
            seen.add(code)
            out.append(kept[i].with_changes(leading_lines=()))
    return out


def _task_statements(task: Task) -> list[cst.BaseStatement]:
    body = cst.parse_module(task.source).body
    harness = m.If(test=m.Comparison(left=m.Name("__name__")))
    return [s for s in body if not (_binds(s) & TASK_ONLY or m.matches(s, harness))]


def _spaced(stmt: cst.BaseStatement) -> cst.BaseStatement:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        blank = [cst.EmptyLine(), cst.EmptyLine()]
        return stmt.with_changes(leading_lines=blank + [ln for ln in stmt.leading_lines if ln.comment])
    return stmt


def _check_names(seed: list[cst.BaseStatement], task: list[cst.BaseStatement]) -> None:
    """A name both parts bind differently would make one see the other's."""
    seed_code = {_EMPTY.code_for_node(s).strip() for s in seed}
    seed_names = set().union(*(_binds(s) for s in seed))
    for s in task:
        clash = _binds(s) & (seed_names | {"ModelNew", "_SEED_STATE", "_SEED_TENSOR_INPUTS"})
        if clash and _EMPTY.code_for_node(s).strip() not in seed_code:
            raise SeedError(f"the task defines {sorted(clash)[0]}, a name Inductor's code uses too")


def candidate_source(record: InductorRecord, task: Task) -> str:
    """The candidate's source; a SeedError says in one line why there is none."""
    code = parse_output_code(record.output_code)
    kernels: dict[str, SeedKernel] = {n: read_kernel(n, src) for n, src in code.kernels.items()}
    call, launched = rewrite_call(code.call, kernels, record.launches)
    if not launched:
        raise NoOwnKernel(
            "Inductor's code launches no Triton kernel (library calls only): no kernel of its own to seed"
        )
    functions = [s for n in dict.fromkeys(launched) for s in kernels[n].statements if not _binds(s).isdisjoint({n})]
    imports_pool = [s for n in dict.fromkeys(launched) for s in kernels[n].statements if s not in functions]
    result = "outputs[0]" if record.single_output else "tuple(outputs)"
    mode_check = ""
    if record.training is not None:
        mode, method = ("training", "train") if record.training else ("eval", "eval")
        other_mode = "not self.training" if record.training else "self.training"
        mode_check = MODE_CHECK.format(other_mode=other_mode, mode=mode, method=method)
    tail = MODEL_NEW.format(
        state=record.state, tensor_inputs=record.tensor_inputs, result=result, mode_check=mode_check
    )
    pool = list(cst.parse_module(PREAMBLE).body) + imports_pool + list(code.definitions)
    helpers = _needed_definitions(pool, [*functions, call, cst.parse_module(tail)])
    if any("libdevice" in _binds(s) for s in helpers):
        helpers += list(cst.parse_module(LIBDEVICE_ON_CPU).body)
    seed = [*helpers, *functions, call]
    task_part = _task_statements(task)
    _check_names(seed, task_part)
    how = ", ".join(f"{k} {v}" for k, v in record.provenance.items() if k in ("torch", "triton", "device"))
    doc = f'"""Seed for {task.name}: Inductor\'s code ({how}) as a self-contained candidate (kernelsmith seed)."""\n'
    task_part = [task_part[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]), *task_part[1:]]
    body = [_spaced(s) for s in seed] + [_spaced(s) for s in task_part]
    return doc + "\n" + cst.Module(body=cast(list, body)).code.strip() + "\n\n" + tail
