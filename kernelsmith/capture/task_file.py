"""A captured task's name, its header (the docstring above its code) and its identity.

Names: readable and stable, the module class that holds the region, then what runs in it (child modules by
class, its own ops by name): `llamarmsnorm`, `llamamlp_silu_mul`, `llamadecoderlayer_add_llamarmsnorm`,
`linear_mm`.

A task's identity is its region's: the ops with their constants, the shapes, dtypes and strides of
its values (`Rendered.shape_key`), and the module paths that run it. Nothing measured is in it (no
share, no rank, no drawn value), so a re-capture of the same model gives every task the identity it
had, and `kernelsmith apply` matches a run on the `Region:` line of the task it stored.
"""

from __future__ import annotations

import hashlib
import re

from kernelsmith.capture.regions import Region, ancestors, is_glue, is_library, packet
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
    if first.fused:
        held = ", ".join(tape.ops[i].name for i in first.ops if is_library(tape, i))
        lines.append(f"Fused: {first.fused}, across the library boundary: {held} with the ops beside it")
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


# -- names ---------------------------------------------------------------------------------------

MAX_PARTS = 5


def _op_word(name: str) -> str:
    if "scaled_dot_product" in name or "attention" in name:
        return "sdpa"
    return {"_to_copy": "to", "_unsafe_view": "view"}.get(name, name.strip("_"))


def region_name(tape: Tape, region: Region) -> str:
    call = region.call
    while call is not None and not tape.calls[call].in_model:  # a library's wrapper: name by where it ran
        call = tape.calls[call].parent
    head = tape.calls[call].cls.lower() if call is not None else tape.model_class.lower()
    parts: list[str] = [head]
    compute = [i for i in region.ops if region.library or not is_glue(tape, i)]
    children = {c for c in range(len(tape.calls)) if tape.calls[c].parent == call}
    for i in compute:
        chain = ancestors(tape, tape.ops[i].call)
        child = next((c for c in chain if c in children), None)
        if child is None:
            word = _op_word(packet(tape, i))
        else:
            own = [j for j in compute if child in ancestors(tape, tape.ops[j].call)]
            leaf_of_one = not tape.calls[child].has_children and len(own) == 1
            if leaf_of_one or not tape.calls[child].in_model:  # a wrapper's class says less than its ops
                word = _op_word(packet(tape, i))
            else:
                word = tape.calls[child].cls.lower()
        if word not in parts:
            parts.append(word)
    if call is not None and not tape.calls[call].has_children:
        parts = parts[:1]  # all in one leaf module: its class says it (llamarmsnorm)
    if region.fused:  # across the library boundary: its kind first (epilogue_llamamlp_mm_silu_mul)
        parts.insert(0, region.fused.replace("+", "_"))
    return re.sub(r"[^a-z0-9_]", "", "_".join(parts[: MAX_PARTS + bool(region.fused)]))


def unique_names(tape: Tape, regions: list[Region]) -> list[str]:
    """A file name (stem) for each of `regions` (one per task, in tape order): the region's name; a
    second region of that name adds its module's own name (q_proj vs o_proj), then a number in tape
    order. Nothing measured goes in, so a re-capture of the model names each task as before."""
    taken: set[str] = set()
    out = []
    for region in regions:
        name = region_name(tape, region)
        if name in taken and region.call is not None:
            name += "_" + re.sub(r"[^a-z0-9_]", "", tape.calls[region.call].path.rsplit(".", 1)[-1].lower())
        if name.endswith("_seed"):  # not to be taken for a seed's file beside its task (run.SEEDS)
            name += "_region"
        base, k = name, 2
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        out.append(name)
    return out
