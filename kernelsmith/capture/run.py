"""`kernelsmith capture`: ENTRY's model, recorded, timed, cut into regions, ranked, written as tasks.

DIR gets one task file per distinct region (`01_llamarmsnorm.py`, ...) and `capture.json`: the ranked
list of every region with its share of the forward's time and whether (or why not) it was written.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.names import region_name
from kernelsmith.capture.outdir import prepare
from kernelsmith.capture.regions import Region, find_regions
from kernelsmith.capture.tape import Tape, record
from kernelsmith.capture.validate import check_task
from kernelsmith.capture.write_task import Rendered, RenderError, render
from kernelsmith.device import NO_CUDA_GPU
from kernelsmith.errors import UserError

MANIFEST = "capture.json"


@dataclass
class CapturedTask:
    rank: int
    name: str
    file: str | None  # None: not written (see `why`)
    module_paths: list[str]
    module_class: str
    calls: int  # per forward
    share: float  # of the forward's time
    time_us: float  # all calls in one forward
    validated: bool
    why: str | None = None
    ops: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)  # module paths whose calls hold it ("": the model)


@dataclass
class Capture:
    entry: str
    device: str
    measure: str  # "device time" or "CPU time"
    total_us: float
    covered_share: float  # the share of the forward's time in the written tasks
    out_dir: str
    tasks: list[CapturedTask]


def _prepare_out(out: Path) -> None:
    """An empty or new DIR, or one that holds a previous capture (replaced); anything else is refused."""
    manifest = out / MANIFEST
    owned: set[str] = set()
    if manifest.is_file():
        try:
            owned = {t["file"] for t in json.loads(manifest.read_text())["tasks"] if t.get("file")}
        except (ValueError, KeyError, TypeError):
            raise UserError(f"--out {out}: {MANIFEST} is not a capture's; choose another DIR") from None
    prepare(out, MANIFEST, owned, "capture")


def _header(
    entry: str, tape: Tape, group: list[Region], calls: int, share: float, measure: str, device: str, rendered: Rendered
) -> str:
    first = group[0]
    cls = tape.calls[first.call].cls if first.call is not None else tape.model_class
    paths = sorted({tape.calls[r.call].path if r.call is not None else tape.model_class for r in group})
    lines = [
        f"Captured by `kernelsmith capture {entry}`.",
        f"Module: {', '.join(paths)} ({cls}); {calls} call(s) per forward.",
        f"Share of the forward's {measure} ({device}): {share:.1%}.",
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


def _scope(tape: Tape, call: int | None) -> str:
    """The path of the innermost module of the model whose call holds the region ("": the model)."""
    while call is not None and not tape.calls[call].in_model:
        call = tape.calls[call].parent
    if call is None or tape.calls[call].parent is None:  # the outermost call is the model's own forward
        return ""
    return tape.calls[call].path


def capture(
    entry: str, out_dir: str | Path, device: str = "cpu", top: int | None = None, min_share: float = 0.0
) -> Capture:
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(NO_CUDA_GPU)
    out = Path(out_dir)
    _prepare_out(out)
    made = call_entry(entry, device)
    try:
        fresh = lambda: copy.deepcopy((made.args, made.kwargs))
        fresh()
    except Exception as exc:
        raise UserError(
            f"ENTRY {entry}: its inputs cannot be copied ({exc}); capture runs the forward more than once"
        ) from None
    with torch.no_grad():
        try:
            args, kwargs = fresh()
            made.model(*args, **kwargs)  # warm-up: lazy inits and caches happen outside the record
        except Exception as exc:
            raise UserError(f"ENTRY {entry}: the model's forward raised {type(exc).__name__}: {exc}") from None
    tape, times = record(made.model, *fresh(), device)
    groups: dict[str, list[tuple[Region, Rendered | None, str | None]]] = {}
    for k, region in enumerate(find_regions(tape)):
        try:
            rendered = render(tape, region)
            groups.setdefault(rendered.shape_key, []).append((region, rendered, None))
        except RenderError as exc:
            groups.setdefault(f"unrenderable {k}", []).append((region, None, str(exc)))
    ranked = sorted(groups.values(), key=lambda g: -sum(times.per_op_us[i] for r, _, _ in g for i in r.ops))
    tasks: list[CapturedTask] = []
    taken: set[str] = set()
    total = times.total_us or 1.0
    for rank, group in enumerate(ranked, 1):
        region, rendered, why = group[0]
        spent = sum(times.per_op_us[i] for r, _, _ in group for i in r.ops)
        name = region_name(tape, region)
        if name in taken and region.call is not None:  # q_proj vs o_proj: the module's own name tells them apart
            name += "_" + tape.calls[region.call].path.rsplit(".", 1)[-1]
        name = name if name not in taken else f"{name}_{rank}"
        taken.add(name)
        share = spent / total
        file = None
        if why is None and top is not None and len([t for t in tasks if t.file]) >= top:
            why = f"beyond --top {top}"
        elif why is None and share < min_share:
            why = f"below --min-share {min_share:g}"
        elif why is None and rendered is not None:
            source = (
                _header(entry, tape, [g[0] for g in group], len(group), share, times.measure, device, rendered)
                + rendered.body
            )
            why = check_task(source, tape, region, rendered, device)
            if why is None:
                file = f"{rank:02d}_{name}.py"
                (out / file).write_text(source, encoding="utf-8")
        cls = tape.calls[region.call].cls if region.call is not None else tape.model_class
        tasks.append(
            CapturedTask(
                rank,
                name,
                file,
                [tape.calls[r.call].path if r.call is not None else tape.model_class for r, _, _ in group],
                cls,
                len(group),
                share,
                spent,
                file is not None,
                why,
                [tape.ops[i].name for i in region.ops],
                sorted({_scope(tape, r.call) for r, _, _ in group}),
            )
        )
    result = Capture(
        entry, device, times.measure, times.total_us, sum(t.share for t in tasks if t.file), str(out), tasks
    )
    (out / MANIFEST).write_text(json.dumps(asdict(result), indent=1) + "\n", encoding="utf-8")
    return result
