"""Inductor's output code, read as a syntax tree: its kernels, its `call(args)` and what they import.

The output code of a Python-wrapper compilation (torch 2.x) is a module of: imports and aliases
(`aten = torch.ops.aten`, `empty_strided_cuda = ...`), one `NAME = async_compile.triton('NAME',
'''SOURCE''', device_str='cuda')` per Triton kernel, `async_compile.wait(globals())`, the wrapper
(`def call(args)`, or, as torch 2.13 writes it, `class Runner` with a method `call(self, args)` and
`call = runner.call`), and a benchmark harness (`get_args`, `benchmark_compiled_module`,
`if __name__ == "__main__"`). Anything else in it is kept as a definition the wrapper may use.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from kernelsmith.seed.errors import SeedError

# Top-level names of the output code that belong to its machinery, not to the computation.
MACHINERY = frozenset(
    {"async_compile", "runner", "call", "recursively_apply_fns", "get_args", "benchmark_compiled_module", "Runner"}
)


@dataclass(frozen=True)
class OutputCode:
    """The parts of one output code. `definitions` are its other top-level statements, in order."""

    definitions: tuple[cst.BaseStatement, ...]
    kernels: dict[str, str]  # kernel name -> the Triton source Inductor compiles for it
    call: cst.FunctionDef  # the wrapper, as a top-level `def call(args)`


def _async_compile_kind(value: cst.BaseExpression) -> str | None:
    """'triton' for `async_compile.triton(...)` (any other method name likewise), else None."""
    if m.matches(value, m.Call(func=m.Attribute(value=m.Name("async_compile")))):
        return cst.ensure_type(cst.ensure_type(value, cst.Call).func, cst.Attribute).attr.value
    return None


def _kernel(name: str, call: cst.Call) -> str:
    args = [a for a in call.args if a.keyword is None]
    source = args[1].value if len(args) >= 2 else None
    if not isinstance(source, (cst.SimpleString, cst.ConcatenatedString)):
        raise SeedError(f"kernel {name}: its Triton source is not a string literal in Inductor's code")
    text = source.evaluated_value
    if not isinstance(text, str):
        raise SeedError(f"kernel {name}: its Triton source is not a text string in Inductor's code")
    return text


def _bound_names(stmt: cst.BaseStatement) -> set[str]:
    """Names a top-level assignment binds (only plain names: `a = ...`, `a = b = ...`)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return set()
    names: set[str] = set()
    for small in stmt.body:
        if isinstance(small, cst.Assign):
            names |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
    return names


def _method_as_function(runner: cst.ClassDef) -> cst.FunctionDef:
    """Runner.call(self, args) as `def call(args)`; a body that uses `self` is not self-contained."""
    for stmt in runner.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "call":
            params = stmt.params.params
            if not params or params[0].name.value != "self":
                raise SeedError("Inductor's Runner.call does not take self first")
            if m.findall(stmt.body, m.Name("self")):
                raise SeedError("Inductor's wrapper uses its Runner's state (graph partitions): not supported")
            return stmt.with_changes(params=stmt.params.with_changes(params=params[1:]))
    raise SeedError("Inductor's code has a class Runner without a call method")


def _is_harness(stmt: cst.BaseStatement) -> bool:
    if m.matches(stmt, m.If(test=m.Comparison(left=m.Name("__name__")))):
        return True
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value in MACHINERY:
        return True
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    # async_compile.wait(globals()), del async_compile, runner = Runner(...), call = runner.call
    if m.findall(stmt, m.Name("async_compile")) or m.findall(stmt, m.Name("runner")):
        return True
    return bool(_bound_names(stmt) & MACHINERY)


def parse_output_code(code: str) -> OutputCode:
    """The parts of Inductor's output code; a SeedError names what cannot be read."""
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError as exc:
        raise SeedError(f"Inductor's output code does not parse: line {exc.raw_line}: {exc.message}") from None
    kernels: dict[str, str] = {}
    definitions: list[cst.BaseStatement] = []
    call: cst.FunctionDef | None = None
    for stmt in module.body:
        assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(assign, cst.Assign) and (kind := _async_compile_kind(assign.value)) is not None:
            target = assign.targets[0].target
            if not isinstance(target, cst.Name):
                raise SeedError("Inductor's code binds a compiled kernel to something other than a name")
            if kind != "triton":
                raise SeedError(f"kernel {target.value} is a {kind} kernel (async_compile.{kind}): not a Triton one")
            kernels[target.value] = _kernel(target.value, cst.ensure_type(assign.value, cst.Call))
        elif isinstance(stmt, cst.FunctionDef) and stmt.name.value == "call":
            call = stmt
        elif isinstance(stmt, cst.ClassDef) and stmt.name.value == "Runner":
            call = _method_as_function(stmt)
        elif not _is_harness(stmt):
            definitions.append(stmt)
    if call is None:
        raise SeedError("Inductor's code has no call(args) wrapper (not a Python-wrapper compilation)")
    return OutputCode(definitions=tuple(definitions), kernels=kernels, call=call)
