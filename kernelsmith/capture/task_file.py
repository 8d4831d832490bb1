"""A captured task's header (the docstring above its code) and its identity.

A task's identity is its region's: the ops with their constants, the shapes, dtypes and strides of
its values (`Rendered.shape_key`), and the module paths that run it. Nothing measured is in it (no
share, no rank, no drawn value), so a re-capture of the same model gives every task the identity it
had, and `kernelsmith apply` matches a run on the `Region:` line of the task it stored.
"""

from __future__ import annotations

import hashlib
import re

from kernelsmith.capture.regions import Region
from kernelsmith.capture.tape import Tape
from kernelsmith.capture.write_task import Rendered

_REGION = re.compile(r"^Region: ([0-9a-f]{16})\b", re.MULTILINE)


def module_path(tape: Tape, region: Region) -> str:
    return tape.calls[region.call].path if region.call is not None else tape.model_class


def region_key(shape_key: str, paths: list[str]) -> str:
    """16 hex digits that name the region: its rendering less its values, and where it runs."""
    text = shape_key + "\n" + "\n".join(sorted(set(paths)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def region_of(source: str) -> str | None:
    """The region a task file was captured from (its `Region:` line), or None for another task."""
    found = _REGION.search(source)
    return found.group(1) if found else None


def header(entry: str, tape: Tape, group: list[Region], key: str, rendered: Rendered) -> str:
    first = group[0]
    cls = tape.calls[first.call].cls if first.call is not None else tape.model_class
    paths = sorted({module_path(tape, r) for r in group})
    lines = [
        f"Captured by `kernelsmith capture {entry}`.",
        f"Module: {', '.join(paths)} ({cls}); {len(group)} call(s) per forward.",
        f"Region: {key} (its ops, shapes, dtypes and module paths: what `kernelsmith apply` matches a run on)",
    ]
    kind_of = lambda m: f"{str(m.dtype).removeprefix('torch.')}{list(m.shape)}"
    for k, (tid, _) in enumerate(rendered.inputs):
        m = tape.meta[tid]
        kind, name = tape.origin.get(tid, ("activation", ""))
        if tid in tape.creator:
            op = tape.ops[tape.creator[tid]]
            where = tape.calls[op.call].path if op.call is not None else tape.model_class
            kind, name = "activation", f"from {op.name} in {where}"
        lines.append(f"x{k}: {kind_of(m)} stride {list(m.stride)}, {kind} {name}".rstrip())
        lines.append(f"    values: {rendered.values[f'x{k}']}")
    for attr, (tid, _) in rendered.params.items():
        m = tape.meta[tid]
        lines.append(f"self.{attr}: {kind_of(m)} from {tape.origin[tid][1]} ({rendered.values[attr]})")
    lines += [f"Note: {n}" for n in rendered.notes]
    return '"""' + "\n".join(lines) + '\n"""\n\n'
