"""Writing into flashinfer-bench's folder layout: a new folder, or a dataset that holds others' files.

Everything is checked before anything is written, so a conflict leaves the folder as it was: a file that
is there already must say the same (a Definition, a Solution, a blob), a workload of the same uuid must be
the same workload; a Trace of the same solution on the same workload is replaced (a newer verdict). A new
folder is written beside its place and moved there whole; in a dataset each file is replaced whole.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from flashinfer_bench.data import Workload
from pydantic import BaseModel, ValidationError
from safetensors.torch import load_file, save_file

from kernelsmith.errors import UserError
from kernelsmith.fib.layout import FOLDERS


@dataclass
class Staged:
    json: dict[str, BaseModel] = field(default_factory=dict)  # relative path -> a Definition or a Solution
    lines: dict[str, dict[str, str]] = field(default_factory=dict)  # a .jsonl's relative path -> key -> line
    blobs: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)  # relative path -> tensors

    def add_line(self, path: str, key: str, line: str) -> None:
        self.lines.setdefault(path, {})[key] = line


def line_key(line: str) -> str:
    """A jsonl line's identity: a workload by its uuid, a Trace by its solution and workload."""
    d = json.loads(line)
    return f"{d.get('solution')}|{d['workload']['uuid']}"


def _check_out(out: Path) -> bool:
    """Whether `out` is a dataset to add to (else it is new or empty); a UserError when it is neither."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is not a directory")
    if not out.exists() or not any(out.iterdir()):
        return False
    if not any((out / f).is_dir() for f in FOLDERS):
        raise UserError(
            f"--out {out} is neither empty nor a flashinfer-bench dataset (no {', '.join(FOLDERS[:4])}/): "
            "choose another DIR"
        )
    return True


def _same_blob(path: Path, tensors: dict[str, torch.Tensor]) -> bool:
    have = load_file(str(path))
    return set(have) == set(tensors) and all(torch.equal(have[k], tensors[k].cpu()) for k in tensors)


def _same_workload(a: str, b: str) -> bool:
    dump = lambda line: Workload.model_validate(json.loads(line)["workload"]).model_dump(mode="json")
    return dump(a) == dump(b)


def _same_model(path: Path, model: BaseModel) -> bool:
    try:
        have = type(model).model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, OSError, UnicodeDecodeError):
        return False
    return have.model_dump(mode="json") == model.model_dump(mode="json")


def _merged(path: Path, ours: dict[str, str], rel: str) -> str:
    kept: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                kept[line_key(line)] = line
    for key, line in ours.items():
        old = kept.get(key)
        if old is not None and rel.startswith("workloads/"):
            if not _same_workload(old, line):
                raise UserError(f"{rel} holds another workload of uuid {key.split('|')[1]}: nothing written")
            continue  # the dataset's own line, as it wrote it
        kept[key] = line
    return "".join(line + "\n" for line in kept.values())


def _plan(out: Path, staged: Staged) -> dict[str, str | dict]:
    """What to write (relative path -> text, or tensors for a blob), after checking each file that is there."""
    plan: dict[str, str | dict] = {}
    for rel, model in staged.json.items():
        path = out / rel
        if path.is_file():
            if not _same_model(path, model):
                raise UserError(f"{rel} is there already and says something else: nothing written")
            continue
        plan[rel] = model.model_dump_json(indent=2, exclude_unset=True) + "\n"
    for rel, tensors in staged.blobs.items():
        path = out / rel
        if path.is_file():
            if not _same_blob(path, tensors):
                raise UserError(f"{rel} is there already and holds other tensors: nothing written")
            continue
        plan[rel] = tensors
    for rel, ours in staged.lines.items():
        text = _merged(out / rel, ours, rel)
        if not (out / rel).is_file() or (out / rel).read_text(encoding="utf-8") != text:
            plan[rel] = text
    return plan


def _put(root: Path, rel: str, what: str | dict) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    if isinstance(what, str):
        tmp.write_text(what, encoding="utf-8")
    else:
        save_file({k: v.detach().cpu().contiguous() for k, v in what.items()}, str(tmp))
    os.replace(tmp, path)


def write(out: Path, staged: Staged) -> list[str]:
    """Write `staged` into `out`; returns the relative paths written."""
    dataset = _check_out(out)
    plan = _plan(out, staged)
    if dataset:
        for rel, what in plan.items():
            _put(out, rel, what)
        return sorted(plan)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for rel, what in plan.items():
            _put(tmp, rel, what)
        if out.exists():
            out.rmdir()  # empty (checked)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sorted(plan)
