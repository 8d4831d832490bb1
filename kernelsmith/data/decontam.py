"""Decontamination: keep the tasks of a benchmark suite out of training data.

A task is matched by its normalised source (`kernelsmith.identity`: the syntax tree without
docstrings), so a copy that was reformatted, re-indented, commented or given other line endings
still matches; a task whose code differs (another operator, other sizes) does not.
"""

from __future__ import annotations

from pathlib import Path

from kernelsmith.errors import TaskError, UserError
from kernelsmith.identity import program_hash
from kernelsmith.task import Task


def _task_source(path: Path) -> str | None:
    """The text of a task file (defines Model and get_inputs), None for another .py file."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    try:
        Task.from_source(text, path=str(path))
    except TaskError:
        return None
    return text


def suite_hashes(path: str | Path) -> set[str]:
    """Normalised source hashes of a task file, or of every task file under a directory (recursive
    *.py; files that are not tasks are ignored). UserError when there is nothing to exclude."""
    path = Path(path)
    if path.is_file():
        source = _task_source(path)
        if source is None:
            raise UserError(f"{path} is not a task file (it must define Model and get_inputs)")
        return {program_hash(source)}
    if not path.is_dir():
        raise UserError(f"task file or directory not found: {path}")
    files = sorted(p for p in path.rglob("*.py") if p.is_file() and "__pycache__" not in p.parts)
    hashes = {program_hash(source) for source in map(_task_source, files) if source is not None}
    if not hashes:
        raise UserError(f"no task files under {path} (a task file defines Model and get_inputs)")
    return hashes


def is_contaminated(task_source: str, hashes: set[str]) -> bool:
    """Whether the task's normalised source is one of `hashes`."""
    return program_hash(task_source) in hashes
