"""flashinfer-bench's folder layout (its dataset, flashinfer-trace), read with its own pydantic models.

    definitions/<op_type>/<definition>.json
    workloads/<op_type>/<definition>.jsonl           one workload-only Trace a line
    solutions/<author>/<op_type>/<definition>/<solution>.json
    traces/<author>/<op_type>/<definition>.jsonl      one Trace a line
    blob/workloads/<op_type>/<definition>/<definition>_<uuid>.safetensors

Its TraceSet.from_path reads each folder recursively, so any depth loads. The paths are written out here
because flashinfer-bench makes them only while it writes each file in place (TraceSet's
add_workload_traces, add_workload_blob_tensor), and an export checks everything before it writes anything
(writer.py); a test holds workloads/ and blob/ to the paths its writers make (traces/ here adds the
Solution's author, as solutions/ has it). A file that its models reject is a UserError naming the file and
the first error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from flashinfer_bench.data import Definition, Solution, Trace, Workload
from pydantic import BaseModel, ValidationError

from kernelsmith.errors import UserError, one_line

M = TypeVar("M", bound=BaseModel)


class NoWorkloads(Exception):
    """A definition without a workload to make a task of: no workload file, an empty one, or a safetensors
    file its workload reads missing (flashinfer-trace's git checkout holds none: they are on Hugging Face).
    The message says which file."""


FOLDERS = ("definitions", "workloads", "solutions", "traces", "blob")


def definition_path(op_type: str, name: str) -> str:
    return f"definitions/{op_type}/{name}.json"


def workloads_path(op_type: str, name: str) -> str:
    return f"workloads/{op_type}/{name}.jsonl"


def solution_path(author: str, op_type: str, definition: str, name: str) -> str:
    return f"solutions/{author}/{op_type}/{definition}/{name}.json"


def traces_path(author: str, op_type: str, definition: str) -> str:
    return f"traces/{author}/{op_type}/{definition}.jsonl"


def blob_path(op_type: str, definition: str, uuid: str) -> str:
    return f"blob/workloads/{op_type}/{definition}/{definition}_{uuid}.safetensors"


def why_invalid(exc: ValidationError) -> str:
    """A pydantic error in one line: where, what, and the value that was given."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    got = first.get("input")
    shown = f" (got {got!r})" if isinstance(got, (str, int, float, bool)) else ""
    return one_line(f"{where + ': ' if where else ''}{first['msg']}{shown}", 300)


def load_model(cls: type[M], text: str, where: str) -> M:
    try:
        return cls.model_validate_json(text)
    except ValidationError as exc:
        raise UserError(f"{where}: not a flashinfer-bench {cls.__name__}: {why_invalid(exc)}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None


@dataclass
class Dataset:
    """A flashinfer-trace folder's Definitions and Solutions (Workloads are read per definition)."""

    root: Path
    definitions: dict[str, Definition] = field(default_factory=dict)
    solutions: dict[str, list[Solution]] = field(default_factory=dict)  # by definition name

    @classmethod
    def read(cls, root: Path) -> Dataset:
        if not root.is_dir():
            raise UserError(f"dataset folder not found: {root}")
        if not (root / "definitions").is_dir():
            raise UserError(f"{root} is not a flashinfer-trace dataset (no definitions/ folder)")
        found = cls(root)
        for path in sorted((root / "definitions").rglob("*.json")):
            d = load_model(Definition, _read(path), str(path))
            if d.name in found.definitions:
                raise UserError(f"{path}: a second Definition named {d.name}")
            found.definitions[d.name] = d
        names: set[str] = set()
        for path in sorted((root / "solutions").rglob("*.json")) if (root / "solutions").is_dir() else []:
            s = load_model(Solution, _read(path), str(path))
            if s.name in names:
                raise UserError(f"{path}: a second Solution named {s.name}")
            names.add(s.name)
            found.solutions.setdefault(s.definition, []).append(s)
        return found

    def workloads(self, definition: Definition) -> list[Workload]:
        """The definition's workloads, in file order; NoWorkloads when it has no workload file or an empty
        one (flashinfer-trace ships definitions without workloads), a UserError for a line that is not one."""
        expected = self.root / workloads_path(definition.op_type, definition.name)
        files = (
            [expected] if expected.is_file() else sorted((self.root / "workloads").rglob(f"{definition.name}.jsonl"))
        )
        if not files:
            raise NoWorkloads(f"no workload file ({expected.relative_to(self.root)})")
        out = []
        for path in files:
            for n, line in enumerate(_read(path).splitlines(), 1):
                if not line.strip():
                    continue
                trace = load_model(Trace, line, f"{path}:{n}")
                if trace.definition != definition.name:
                    raise UserError(f"{path}:{n}: a workload of {trace.definition}, not of {definition.name}")
                out.append(trace.workload)
        if not out:
            raise NoWorkloads(f"its workload file {files[0].relative_to(self.root)} holds no workload")
        return out
