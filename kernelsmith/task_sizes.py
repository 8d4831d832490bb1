"""CPU-sized versions of full-size tasks.

A suite task declares its sizes as module-level constants (`TOKENS = 16384`) sized for the GPU,
and a `CPU_SIZES = {"TOKENS": 64, ...}` dict of small values for the Triton interpreter.
`shrink` rewrites only those constants' values, with libcst, so that every other byte of the
file (comments, formatting, the CPU_SIZES dict itself) stays as written.
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst

from kernelsmith.errors import TaskError, UserError
from kernelsmith.task import Task, read_source

SIZES_NAME = "CPU_SIZES"
SHAPES_NAME = "SHAPES"  # the other shapes a task is judged at (capture's --shape: docs/capture.md)


def _assigned_name(stmt: cst.BaseSmallStatement) -> str | None:
    """The single plain name `stmt` assigns (`NAME = value`), else None."""
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name):
        return stmt.targets[0].target.value
    if isinstance(stmt, cst.AnnAssign) and stmt.value is not None and isinstance(stmt.target, cst.Name):
        return stmt.target.value
    return None


def _int_value(node: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal (`4096`, `-1`, `1 << 20` is not one), else None."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.evaluated_value)
    return None


def _module_assignments(module: cst.Module) -> dict[str, tuple[int, int, cst.Assign | cst.AnnAssign]]:
    """Module-level `NAME = value` statements: name -> (statement index, index in its line, node)."""
    found: dict[str, tuple[int, int, cst.Assign | cst.AnnAssign]] = {}
    for i, line in enumerate(module.body):
        if isinstance(line, cst.SimpleStatementLine):
            for j, stmt in enumerate(line.body):
                name = _assigned_name(stmt)
                if name is not None and isinstance(stmt, (cst.Assign, cst.AnnAssign)):  # always, given a name
                    found[name] = (i, j, stmt)
    return found


def read_cpu_sizes(source: str) -> dict[str, int] | None:
    """The file's CPU_SIZES dict (read without running the file), or None when it has none."""
    sizes = None
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == SIZES_NAME:
            try:
                sizes = ast.literal_eval(value)
            except ValueError:
                raise ValueError(f"{SIZES_NAME} must be a literal dict of names to ints") from None
    if sizes is None:
        return None
    if not isinstance(sizes, dict) or not all(isinstance(k, str) and type(v) is int for k, v in sizes.items()):
        raise ValueError(f"{SIZES_NAME} must be a literal dict of names to ints")
    return sizes


def shrink(source: str) -> str:
    """`source` with each module-level `NAME = <int>` named in its CPU_SIZES set to the small value, and
    its SHAPES (the other shapes it is judged at: `read_shapes`) less the names --small cut (at --small
    they are the CPU size at every shape).

    A source without CPU_SIZES comes back unchanged; a CPU_SIZES key that is not a module-level
    int assignment is a ValueError naming it.
    """
    sizes = read_cpu_sizes(source)
    if not sizes:
        return source
    module = cst.parse_module(source)
    real = {n: _int_value(a[2].value) for n, a in _module_assignments(module).items()}
    cut = resize(source, sizes, SIZES_NAME)
    shapes = read_shapes(source)
    if not shapes:
        return cut
    kept: list[dict[str, int]] = []
    for shape in shapes:  # a shape that is the main one at --small goes (a kernel is judged there already)
        left = {n: v for n, v in shape.items() if sizes.get(n, real.get(n)) == real.get(n)}
        if any(sizes.get(n, real.get(n)) != v for n, v in left.items()) and left not in kept:
            kept.append(left)
    return _set_shapes(cut, kept)


def resize(source: str, sizes: dict[str, int], what: str = SHAPES_NAME) -> str:
    """`source` with each module-level `NAME = <int>` named in `sizes` set to its value there; a name that is
    not a module-level int assignment is a ValueError naming it (`what`: where the names come from)."""
    module = cst.parse_module(source)
    assignments = _module_assignments(module)
    bad = [name for name in sizes if name not in assignments or _int_value(assignments[name][2].value) is None]
    if bad:
        raise ValueError(
            f"{what} names {', '.join(map(repr, bad))}, which "
            f"{'is' if len(bad) == 1 else 'are'} not a module-level int assignment"
        )
    body = list(module.body)
    for name, small in sizes.items():
        i, j, stmt = assignments[name]
        line = body[i]
        if not isinstance(line, cst.SimpleStatementLine):  # _module_assignments looks at no other
            raise TypeError(f"statement {i} is not a simple statement line")
        value = cst.Integer(str(small)) if small >= 0 else cst.UnaryOperation(cst.Minus(), cst.Integer(str(-small)))
        stmts = list(line.body)
        stmts[j] = stmts[j].with_changes(value=value)
        body[i] = line.with_changes(body=stmts)
    return module.with_changes(body=body).code


def read_shapes(source: str) -> list[dict[str, int]]:
    """The file's SHAPES (read without running it): the values of its named sizes at each shape it is judged
    at beside the one it is written at (capture's `--shape`); [] when it has none."""
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(target, ast.Name) and target.id == SHAPES_NAME:
            try:
                shapes = ast.literal_eval(node.value)  # pyright: ignore[reportAttributeAccessIssue]
            except ValueError:
                shapes = None
            ok = isinstance(shapes, list) and all(
                isinstance(s, dict) and all(isinstance(k, str) and type(v) is int for k, v in s.items()) for s in shapes
            )
            if not ok:
                raise ValueError(f"{SHAPES_NAME} must be a literal list of dicts of names to ints")
            return shapes  # pyright: ignore[reportReturnType]
    return []


def _set_shapes(source: str, shapes: list[dict[str, int]]) -> str:
    """`source` with its SHAPES assignment's value `shapes`."""
    module = cst.parse_module(source)
    i, j, stmt = _module_assignments(module)[SHAPES_NAME]
    body = list(module.body)
    line = body[i]
    assert isinstance(line, cst.SimpleStatementLine)
    stmts = list(line.body)
    stmts[j] = stmt.with_changes(value=cst.parse_expression(repr(shapes)))
    body[i] = line.with_changes(body=stmts)
    return module.with_changes(body=body).code


def shrink_file(path: str | Path) -> str:
    """The CPU-sized source of the task file at `path`."""
    return shrink(read_source(Path(path), "task", TaskError))


def small_source(source: str) -> str:
    """`source` cut to its CPU_SIZES, as `--small` asks; a ValueError says why it cannot be (it
    declares none, or a bad one), so that --small never runs a task at full size unsaid. An empty
    `CPU_SIZES = {}` says the task is CPU-sized as written (a captured task of small tensors)."""
    try:
        shrunk = shrink(source) if read_cpu_sizes(source) is not None else None
    except ValueError as exc:
        raise ValueError(f"cannot shrink it: {exc}") from None
    if shrunk is None:
        raise ValueError(f"declares no {SIZES_NAME}, so --small cannot shrink it")
    return shrunk


def load_task(path: Path, small: bool = False, name: str | None = None) -> Task:
    """A task file, with its sizes cut to its CPU_SIZES when `small` (suite tasks declare them);
    `name` as in `Task.from_file`."""
    task = Task.from_file(path, name)
    if not small:
        return task
    try:
        source = small_source(task.source)
    except ValueError as exc:
        raise UserError(f"{path} {exc}") from None
    return Task.from_source(source, name=task.name, path=str(path))


# What a task that declares CPU_SIZES and is run at full size on the CPU is told: at the start, and
# when its evaluation runs out of time (the interpreter takes minutes a call at GPU sizes).
FULL_SIZE_ON_CPU = "declares CPU_SIZES but runs at full size on the CPU (in Triton's interpreter: up to minutes a call)"
ADD_SMALL = "add --small to cut it to its CPU_SIZES"


def full_size_on_cpu(task: Task, device: str) -> bool:
    """Whether `task` runs on the CPU at sizes its CPU_SIZES would cut (`--small` not given). An
    empty `CPU_SIZES = {}` (CPU-sized as written) or one that cannot be applied does not count."""
    try:
        return device == "cpu" and bool(read_cpu_sizes(task.source)) and shrink(task.source) != task.source
    except (ValueError, SyntaxError):
        return False
