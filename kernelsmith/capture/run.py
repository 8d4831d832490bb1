"""`kernelsmith capture`: ENTRY's model, recorded, timed, cut into regions, ranked, written as tasks.

DIR gets one task file per distinct region, named by the region (`llamarmsnorm.py`, ...), and
`capture.json`: the ranked list of every region with its share of the forward's time, its speed of light
(floors.py) and whether (or why not) it was written. Names and task files hold nothing measured: a
re-capture keeps them.

At several shapes (`shapes`: `--shape`), the main shape's model runs one forward at each other shape's
inputs too, and each task holds the shapes its region was found and checked at (regions.align, sizes.py,
validate.check_shapes); the times are the main shape's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from kernelsmith.capture import FORWARDS
from kernelsmith.capture.data_dependent import data_dependent, region_note
from kernelsmith.capture.entry import call_entry, forward_failed, shape_text
from kernelsmith.capture.floors import SpeedOfLight, TapeWork, card_of, with_floor
from kernelsmith.capture.fused import all_regions
from kernelsmith.capture.outdir import check as check_out
from kernelsmith.capture.outdir import prepare
from kernelsmith.capture.profile import OpTimes, Spread, profiled_forwards, wall_times_ms
from kernelsmith.capture.regions import Elsewhere, Region, align, common_call, find_regions, is_library
from kernelsmith.capture.tape import Tape, record
from kernelsmith.capture.task_file import header, module_path, region_key, unique_names
from kernelsmith.capture.validate import check_shapes, check_small, check_task
from kernelsmith.capture.write_task import Rendered, RenderError, render
from kernelsmith.device import NO_CUDA_GPU
from kernelsmith.errors import UserError

MANIFEST = "capture.json"
# `kernelsmith seed TASK.py` writes TASK_seed.py beside the task: a re-capture keeps them (names are stable).
SEEDS = "_seed.py"


@dataclass(kw_only=True)
class CapturedTask:
    rank: int
    name: str
    file: str | None  # None: not written (see `why`)
    module_paths: list[str]
    module_class: str
    calls: int  # per forward
    share: float  # of the profiled forward's time, from each op's least time over the forwards (_timed_groups)
    time_us: float  # all calls in one forward (each op's least)
    validated: bool
    why: str | None = None
    ops: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)  # module paths whose calls hold it ("": the model)
    region: str = ""  # the region's identity (task_file.py): what apply matches a run's task on
    share_range: list[float] = field(default_factory=list)  # [share, its upper quartile over the forwards]
    # The module paths whose calls hold each region with the views it borrows from its neighbours (the
    # `view` a 3-D Linear makes of its output): where a patch's eager path looks for it.
    covers: list[str] = field(default_factory=list)
    data_dependent: bool = False  # its shapes hold a count of the data (an MoE's tokens per expert)
    data_dependent_why: str | None = None  # where that count comes from, in one line
    library: bool = False  # a library op (GEMM, attention, convolution, embedding: LIBRARY_OPS)
    # a region across the library boundary (capture/fused): prologue, epilogue, siblings, attention, or two
    # joined by "+"; "" for a split region. `library_ops`: the library ops it holds
    fused: str = ""
    library_ops: list[str] = field(default_factory=list)
    shapes: list[str] = field(default_factory=list)  # the --shape values its task holds (the main first)
    shapes_why: dict[str, str] = field(default_factory=dict)  # a --shape value it does not hold -> why
    # Its speed of light, all its calls in one forward as time_us (floors.py): the least bytes they move, their
    # FLOPs, their floor on the card (None: no card, the CPU) and the fraction of it time_us reaches (floor/time)
    bytes: int = 0
    flops: int = 0
    floor_ms: float | None = None
    of_floor: float | None = None


@dataclass
class Capture:
    entry: str
    device: str
    measure: str  # "device time" or "CPU time": what the shares are of, under the profiler
    total_us: float  # that measure per profiled forward (each op's least, _timed_groups): the shares' whole
    covered_share: float  # the share of the forward's time in the written tasks
    out_dir: str
    tasks: list[CapturedTask]
    forwards: int = 1  # profiled forwards the ranking is made of (each op's least time over them)
    profiled_us: Spread | None = None  # the forward's profiled time over them (OpTimes.forward_us): median, low, high
    wall_ms: Spread | None = None  # the forward's own time without the profiler (wall, per forward)
    switched_to_eval: bool = False  # the model was in training mode: capture ran it in eval() mode
    # --shape: the factory's keyword arguments at each shape captured, the main (timed) first
    shapes: list[dict[str, int]] = field(default_factory=list)
    speed_of_light: SpeedOfLight | None = None  # the forward's: its work, floor, fraction and the card (floors.py)


def _owned(out: Path) -> set[str]:
    """The task files a previous capture wrote in `out` (a re-capture replaces them)."""
    manifest = out / MANIFEST
    if not manifest.is_file():
        return set()
    try:
        return {t["file"] for t in json.loads(manifest.read_text())["tasks"] if t.get("file")}
    except (ValueError, KeyError, TypeError):
        raise UserError(f"--out {out}: {MANIFEST} is not a capture's; choose another DIR") from None


def _nothing_written(tasks: list[CapturedTask], min_share: float) -> str:
    """Why a capture has no task to write (one line)."""
    if tasks and all(t.why == f"below --min-share {min_share:g}" for t in tasks if t.why):
        return f"no region reaches --min-share {min_share:g}: the heaviest takes {tasks[0].share:.1%} of the forward"
    first = next((t for t in tasks if t.why), None)
    return f"no region of the forward could be written as a task ({len(tasks)} regions" + (
        f"; the heaviest, {first.name}: {first.why})" if first else ")"
    )


def _scope(tape: Tape, call: int | None) -> str:
    """The path of the innermost module of the model whose call holds the region ("": the model)."""
    while call is not None and not tape.calls[call].in_model:
        call = tape.calls[call].parent
    if call is None or tape.calls[call].parent is None:  # the outermost call is the model's own forward
        return ""
    return tape.calls[call].path


def _timed_groups(
    groups: dict[str, list[tuple[Region, Rendered | None, str | None]]], samples: list[OpTimes]
) -> tuple[dict[str, tuple[float, Spread]], float]:
    """Per group: its time per forward and its share of the forward's time, both from the least time each op
    took over the profiled forwards (the forward: those and the least time outside the ops): a busy machine
    only adds time. On two loaded cores the median moved a region's share up to 45x between two captures (a
    GEMM's threads waiting on each other), the least 1.6x (issue 55). The share's spread runs from it to the
    group's upper quartile over the forwards (Spread), of the same whole. And that whole."""
    least = [min(s.per_op_us[i] for s in samples) for i in range(len(samples[0].per_op_us))]
    whole = (sum(least) + min(max(s.total_us - sum(s.per_op_us), 0.0) for s in samples)) or 1.0
    out = {}
    for key, group in groups.items():
        ops = [i for r, _, _ in group for i in r.ops]
        spent, each = sum(least[i] for i in ops), Spread.of([sum(s.per_op_us[i] for i in ops) for s in samples])
        out[key] = (spent, Spread(spent / whole, spent / whole, max(spent, each.high) / whole))
    return out, whole


def _covered(groups: dict[str, list], written: list[str], samples: list[OpTimes], whole: float) -> float:
    """The share of the forward's time in the written tasks' ops, each op once (a fused region holds a split
    one's ops), of the whole _timed_groups measures them by (each op's least time over the forwards)."""
    ops = {i for key in written for r, _, _ in groups[key] for i in r.ops}
    return min(1.0, sum(min(s.per_op_us[i] for s in samples) for i in ops) / whole)


def _check_cpu_sizes(tape: Tape, region: Region, rendered: Rendered) -> None:
    """Leaves the task's CPU_SIZES out, with a note, when the task does not hold at them."""
    plan = rendered.sizes
    if plan is None:
        return
    why = check_small(rendered.body, tape, region, plan) if plan.cpu_block() else None
    if why is not None:
        rendered.body = rendered.body.replace(plan.cpu_block(), "")
        rendered.notes.append(f"no CPU_SIZES (--small): {why}")
    elif not plan.cpu_block():
        rendered.notes.append("no CPU_SIZES (--small): every large extent is a parameter's, so none shrinks")


def _checked(entry: str, tape: Tape, group: list, rendered: Rendered, device: str) -> tuple[str, str | None]:
    """The task's source, its CPU sizes and its other shapes checked, and why it is not written (None: it is)."""
    region = group[0][0]
    _check_cpu_sizes(tape, region, rendered)
    _check_shapes(region, rendered, device)
    identity = region_key(rendered.shape_key, [module_path(tape, r) for r, _, _ in group])
    source = header(entry, tape, [r for r, _, _ in group], identity, rendered) + rendered.body
    return source, check_task(source, tape, region, rendered, device)


def _check_shapes(region: Region, rendered: Rendered, device: str) -> None:
    """The task checked at each other shape it names on that shape's recorded values (validate.py); a shape
    it does not hold at leaves its SHAPES, with the reason in `rendered.elsewhere.why`."""
    where, plan = rendered.elsewhere, rendered.sizes
    if where is None or plan is None or not where.at:
        return
    dropped = check_shapes(rendered.body, region, rendered, device)
    if dropped:
        keep = [m for m in range(len(where.at)) if m not in dropped]
        rendered.body = rendered.body.replace(plan.shapes_block(), plan.shapes_block(keep))
        rendered.shape_key = rendered.shape_key.replace(plan.shapes_block(), plan.shapes_block(keep))
        where.drop(dropped)


def _held(rendered: Rendered | None, shapes: list[dict[str, int]]) -> tuple[list[str], dict[str, str]]:
    """The --shape values a written task holds (the main first), and why not each other one."""
    if rendered is None or len(shapes) < 2:
        return [], {}
    texts = [shape_text(s) for s in shapes]
    where = rendered.elsewhere or Elsewhere()
    held = [texts[0]] + [texts[j + 1] for j in where.at]
    return held, {texts[j + 1]: where.why.get(j, "not found") for j in range(len(texts) - 1) if j not in where.at}


def _grouped(
    tape: Tape, others: list[Tape], regions_of: Callable[[Tape], list[Region]]
) -> dict[str, list[tuple[Region, Rendered | None, str | None]]]:
    """The regions (`regions_of` the tape), rendered (at the shapes of `others` too, where they are found),
    grouped by their rendering less its values (the same layer in every block is one task); a region that
    cannot be rendered is a group of its own, with the reason."""
    groups: dict[str, list[tuple[Region, Rendered | None, str | None]]] = {}
    regions = regions_of(tape)
    found = align(tape, regions, [(t, regions_of(t)) for t in others]) if others else [None] * len(regions)
    for k, (region, elsewhere) in enumerate(zip(regions, found)):
        try:
            rendered = render(tape, region, elsewhere)
            groups.setdefault(rendered.shape_key, []).append((region, rendered, None))
        except RenderError as exc:
            groups.setdefault(f"unrenderable {k}", []).append((region, None, str(exc)))
    return groups


def _data_dependent(tape: Tape, groups: dict[str, list[tuple[Region, Rendered | None, str | None]]]) -> dict[str, str]:
    """Per group whose shapes hold a count of the data (an MoE's tokens per expert): why, in one line, also
    noted in its task's header."""
    held = data_dependent(tape)
    out = {}
    for key, group in groups.items():
        why = next((n for r, _, _ in group if (n := region_note(tape, held, r)) is not None), None)
        if why is not None:
            out[key] = why
            if group[0][1] is not None:
                group[0][1].notes.append(f"data-dependent: {why}")
    return out


def _forward(entry: str, device: str, sizes: dict[str, int] | None = None, model: torch.nn.Module | None = None):
    """ENTRY's model and a maker of fresh copies of its inputs (at the --shape `sizes`), after one warm-up
    forward; with `model`, that model runs on them (the one at the main shape: the factory's is dropped)."""
    made = call_entry(entry, device, sizes)
    if model is not None:
        made.model = model
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
            at = f" (--shape {shape_text(sizes)})" if sizes else ""
            raise UserError(forward_failed(made, exc) + at) from None
    return made, fresh


def capture(
    entry: str,
    out_dir: str | Path,
    device: str = "cpu",
    top: int | None = None,
    min_share: float = 0.0,
    forwards: int = FORWARDS,
    shapes: list[dict[str, int]] | None = None,
    fused: bool = True,
) -> Capture:
    """Run a model's forward, rank where its time goes, and write its regions as tasks at their real shapes.

    Args:
        entry: `file.py:factory`, a function returning (model, args) or (model, kwargs dict) (docs/capture.md).
        out_dir: the folder to write (task files and capture.json); a previous capture there is replaced,
            its seeds kept; a folder holding other files is refused.
        device: "cpu" or "cuda" (where the model runs, and what its times are: CPU or device time).
        top: write the N heaviest regions only (the rest are listed); min_share: and none below this share.
        forwards: profiled forwards the regions are ranked on (each op's least time over them).
        shapes: the factory's keyword arguments at each shape to capture at (`--shape`), the main first
            (its forward is the one timed); each task holds the shapes its region holds at.
        fused: also the regions across the library boundary (capture/fused), ranked with the split ones.

    Returns the Capture (what capture.json holds). Raises UserError (one line) for what a user can fix: a
    bad ENTRY, a forward that raises, an output folder of other files. The model runs in eval mode under
    torch.no_grad(); nothing of it is kept (the process keeps only what the forward itself caches)."""
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(NO_CUDA_GPU)
    out = Path(out_dir)
    check_out(out, MANIFEST, _owned(out), "capture", SEEDS)  # refused before the work; made or emptied after
    shapes = list(shapes or [])
    made, fresh = _forward(entry, device, shapes[0] if shapes else None)
    others = [_forward(entry, device, sizes, made.model)[1] for sizes in shapes[1:]]
    wall = wall_times_ms(made.model, fresh, device, forwards)
    tape = record(made.model, *fresh())
    samples = profiled_forwards(made.model, fresh, device, [str(op.func) for op in tape.ops], forwards)
    groups = _grouped(tape, [record(made.model, *f()) for f in others], all_regions if fused else find_regions)
    varying = _data_dependent(tape, groups)
    names = dict(zip(groups, unique_names(tape, [g[0][0] for g in groups.values()])))
    timed, whole = _timed_groups(groups, samples)
    (card, no_card), light = card_of(device), TapeWork(tape)  # the card's ceilings: measured once, after the timing
    tasks: list[CapturedTask] = []
    sources: dict[str, str] = {}
    for rank, key in enumerate(order := sorted(groups, key=lambda k: (-timed[k][1].median, -timed[k][0])), 1):
        group = groups[key]
        _, rendered, why = group[0]
        spent, share = timed[key]
        paths = [module_path(tape, r) for r, _, _ in group]
        why, file = why or _left_out(tasks, top, share.median, min_share), None
        if why is None and rendered is not None:
            source, why = _checked(entry, tape, group, rendered, device)
            if why is None:
                file = f"{names[key]}.py"
                sources[file] = source
        identity = region_key(rendered.shape_key, paths) if rendered is not None else ""
        task = _task(tape, group, rank, names[key], file, why, spent, share, identity, varying.get(key))
        task.shapes, task.shapes_why = _held(rendered, shapes) if file else ([], {})
        with_floor(task, light.regions(r for r, _, _ in group), card)
        tasks.append(task)
    profiled = Spread.of([s.forward_us or s.total_us for s in samples])  # what apply measures too
    result = Capture(
        entry=entry,
        device=device,
        measure=samples[0].measure,
        total_us=whole,
        # Shares of one whole, least times each, sum to at most 1 (medians' did not: 1.0006); rounding aside
        covered_share=_covered(groups, [k for k, t in zip(order, tasks) if t.file], samples, whole),
        out_dir=str(out),
        tasks=tasks,
        forwards=forwards,
        profiled_us=profiled,
        wall_ms=wall,
        switched_to_eval=made.was_training,
        shapes=shapes,
        speed_of_light=SpeedOfLight.of(light.forward(), card, profiled.median / 1e3, no_card),
    )
    if not sources:
        raise UserError(_nothing_written(tasks, min_share))
    _write(out, sources, result)
    return result


def _left_out(tasks: list[CapturedTask], top: int | None, share: float, min_share: float) -> str | None:
    """Why a region is not written though it could be: beyond --top, or below --min-share (None: it is)."""
    if top is not None and len([t for t in tasks if t.file]) >= top:
        return f"beyond --top {top}"
    if share < min_share:
        return f"below --min-share {min_share:g}"
    return None


def _task(
    tape: Tape,
    group: list,
    rank: int,
    name: str,
    file: str | None,
    why: str | None,
    spent: float,
    share: Spread,
    identity: str,
    varies: str | None,
) -> CapturedTask:
    """One group of regions (the same layer in every block) as capture.json records it."""
    region = group[0][0]
    return CapturedTask(
        rank=rank,
        name=name,
        file=file,
        module_paths=[module_path(tape, r) for r, _, _ in group],
        module_class=tape.calls[region.call].cls if region.call is not None else tape.model_class,
        calls=len(group),
        share=share.median,
        time_us=spent,
        validated=file is not None,
        why=why,
        ops=[tape.ops[i].name for i in region.ops],
        scopes=sorted({_scope(tape, r.call) for r, _, _ in group}),
        region=identity,
        share_range=[share.low, share.high],
        covers=sorted({_scope(tape, common_call(tape, r.replay)) for r, _, _ in group}),
        data_dependent=varies is not None,
        data_dependent_why=varies,
        library=region.library,
        fused=region.fused,
        library_ops=[tape.ops[i].name for i in region.ops if region.fused and is_library(tape, i)],
    )


def _write(out: Path, sources: dict[str, str], result: Capture) -> None:
    """The task files and capture.json, in place of a previous capture's (its seeds kept)."""
    prepare(out, MANIFEST, _owned(out), "capture", SEEDS)
    for file, source in sources.items():
        (out / file).write_text(source, encoding="utf-8")
    (out / MANIFEST).write_text(json.dumps(asdict(result), indent=1) + "\n", encoding="utf-8")
