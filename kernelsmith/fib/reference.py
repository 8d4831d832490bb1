"""A Definition's reference from a task: the task's own code (its ops, as written) with `run(...)` after it.

The task's Model becomes TaskModel (and a `run` of its own, _task_run); get_inputs, get_init_inputs,
CPU_SIZES and the constants of the var axes go (run gives those their sizes from the inputs' shapes). run
builds TaskModel once on the meta device, since every tensor it holds is replaced by an input
(shim.py); the reference's results are the task's forward's, bit for bit.
"""

from __future__ import annotations

import libcst as cst

DROPPED = {"get_inputs", "get_init_inputs", "CPU_SIZES"}


class _Rename(cst.CSTTransformer):
    """Renames names (not attributes, not keyword arguments) by a table."""

    def __init__(self, table: dict[str, str]):
        super().__init__()
        self.table = table

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        # a keyword argument's name stays: it names the callee's parameter, not a module name
        return updated.with_changes(keyword=original.keyword) if original.keyword is not None else updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.table[updated.value]) if updated.value in self.table else updated


def _bound(stmt: cst.CSTNode) -> set[str]:
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return {stmt.name.value}
    names: set[str] = set()
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            targets = (
                small.targets if isinstance(small, cst.Assign) else [small] if isinstance(small, cst.AnnAssign) else []
            )
            for t in targets:
                target = t.target
                if isinstance(target, cst.Name):
                    names.add(target.value)
    return names


def top_level(module: cst.Module) -> set[str]:
    """The names a module's statements bind at its top level (defs, classes, plain assignments)."""
    return set().union(*(_bound(s) for s in module.body)) if module.body else set()


def rename(source: str, names: set[str], prefix: str) -> str:
    """`source` with those of `names` it binds at top level renamed `prefix + name` (uses too)."""
    module = cst.parse_module(source)
    table = {n: prefix + n for n in top_level(module) & names}
    return module.visit(_Rename(table)).code if table else source


def task_body(source: str, drop: set[str]) -> tuple[str, dict[str, str]]:
    """The task's code without its docstring, without `drop` (and get_inputs, get_init_inputs, CPU_SIZES),
    and with Model (and a `run`) renamed; returns it and the renames."""
    module = cst.parse_module(source)
    body = list(module.body)
    first = body[0] if body else None
    if isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Expr):
        if isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            body = body[1:]
    gone = DROPPED | drop
    body = [s for s in body if not (_bound(s) and _bound(s) <= gone)]
    taken = top_level(module.with_changes(body=body))
    table = {}
    for old, new in (("Model", "TaskModel"), ("run", "_task_run")):
        if old in taken:
            while new in taken:
                new = "_" + new
            table[old] = new
    renamed = module.with_changes(body=body).visit(_Rename(table))
    return renamed.code, table


def reference_text(task_name: str, source: str, drop: set[str], shim: str) -> str:
    """The reference: a docstring, the task's body (task_body) and the `run` shim."""
    body, table = task_body(source, drop)
    cls = table.get("Model", "Model")
    doc = (
        f'"""The ops of kernelsmith task {task_name}, as written (its Model is {cls} here), called by run() with\n'
        "the Definition's inputs: its parameters and buffers, and the float attributes its ops read, are inputs\n"
        'too, and the constants of its var axes take their sizes from the inputs\' shapes."""\n\n'
    )
    return doc + body.strip("\n") + "\n" + shim
