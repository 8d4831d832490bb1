"""A task: a KernelBench-format PyTorch operator (Model, get_inputs, get_init_inputs).

The file is read as-is. Static checks (parse, find the names) happen here, in whatever
process asks; executing the file happens only in evaluation processes (see `load_module`).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from kernelsmith.errors import TaskError
from kernelsmith.identity import program_hash


def read_source(path: Path, what: str, error: type[Exception]) -> str:
    """A source file's text, or `error` with one line saying why not.

    UTF-8 with its byte-order mark dropped, as Python reads a file saved with one (Windows
    editors write it); the text handed on never starts with U+FEFF, which `ast.parse` rejects.
    """
    if not path.is_file():
        raise error(f"{what} file not found: {path}")
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} file {path}: {exc}") from None


def top_level_names(tree: ast.Module) -> dict[str, str]:
    """Names bound at module level, mapped to 'class', 'def' or 'assign'."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = "def"
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = "assign"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = "import"
    return names


@dataclass(frozen=True)
class Task:
    """A KernelBench-format task file's source, with a stable identity."""

    source: str
    name: str
    path: str | None = None

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> Task:
        """The task file at `path`, named `name` (default: the file's stem)."""
        p = Path(path)
        return cls.from_source(read_source(p, "task", TaskError), name=name or p.stem, path=str(p))

    @classmethod
    def from_source(cls, source: str, name: str = "task", path: str | None = None) -> Task:
        where = path or name
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise TaskError(f"{where} is not a task: syntax error at line {exc.lineno}: {exc.msg}") from None
        names = top_level_names(tree)
        missing = [n for n, kind in (("Model", "class"), ("get_inputs", "def")) if names.get(n) is None]
        if missing:
            raise TaskError(f"{where} is not a task: no {' and no '.join(missing)} defined at top level")
        return cls(source=source, name=name, path=path)

    @property
    def hash(self) -> str:
        """The program identity (kernelsmith.identity): the same operator, however formatted or
        commented and wherever the file lives, gives the same hash."""
        return program_hash(self.source)


def load_module(source: str, filename: Path, module_name: str) -> types.ModuleType:
    """Execute `source` as a module whose file is `filename` (written first).

    A real file is needed: Triton's @jit reads kernel source with `inspect`.
    """
    filename.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(module_name, filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
