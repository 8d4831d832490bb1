"""`kernelsmith capture` and `kernelsmith apply`: a model's forward cut into tasks at its real shapes, and
the runs' best kernels back into it as a patch, checked end to end (docs/capture.md). Thin."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from kernelsmith.apply.options import ApplyOptions
from kernelsmith.capture import FORWARDS
from kernelsmith.cli.common import check_paths, console, shown
from kernelsmith.device import Device
from kernelsmith.progress import counted

_APPLY = ApplyOptions.model_fields  # apply's defaults, defined once there

if TYPE_CHECKING:
    from kernelsmith.apply.e2e import E2E
    from kernelsmith.apply.run import Applied


class Mode(str, Enum):
    """--mode: how the check runs the model, the original and the patched alike"""

    eager = "eager"
    compile = "compile"
    graphs = "graphs"


class Slower(str, Enum):
    """--accept-slower: which slower patched forward passes, named (kernelsmith/apply/gains.py)"""

    none = "none"
    eager = "eager"
    all = "all"


def capture_cmd(
    entry: str = typer.Argument(
        ..., help="package.module:factory or path/to/file.py:factory, returning (model, inputs)"
    ),
    out: Path = typer.Option(..., "--out", help="directory for the task files and capture.json"),
    device: Device = typer.Option(Device.cpu, help="where the model runs: cpu, or cuda"),
    top: int | None = typer.Option(None, "--top", min=1, help="write at most this many tasks, the heaviest first"),
    min_share: float = typer.Option(0.0, "--min-share", min=0.0, max=1.0, help="skip regions below this share"),
    forwards: int = typer.Option(
        FORWARDS, "--forwards", min=1, help="profiled forwards to rank on (each op's least; the table gives the spread)"
    ),
    shape: list[str] = typer.Option(
        [],
        "--shape",
        help="NAME=VALUE[,NAME=VALUE]: a shape to capture at, the factory called with those keyword arguments; "
        "repeat for several (the first is the main one, timed); each task holds every shape its region holds at",
    ),
    fused: bool = typer.Option(
        True,
        "--fused/--no-fused",
        help="also write regions across the library boundary: a GEMM with its prologue, epilogue or sibling GEMMs, "
        "attention with its rotary and KV-cache append",
    ),
) -> None:
    """Run a model's forward, rank the regions a kernel would fuse by their share of its time (each op's
    least over several profiled forwards) and write each as a task at its real shapes (docs/capture.md)."""
    from kernelsmith.capture.entry import parse_shape
    from kernelsmith.capture.run import capture

    done = capture(entry, out, device.value, top, min_share, forwards, [parse_shape(s) for s in shape], fused)
    wall, profiled = done.wall_ms, done.profiled_us
    assert wall is not None and profiled is not None
    table = Table(
        title=f"{shown(entry)}: {wall.median:.3g} ms per forward ({done.device}, wall time without the profiler; "
        f"{wall.low:.3g}-{wall.high:.3g} over {done.forwards})"
    )
    for col in ("rank", "task", "calls", "share", "spread", "moves", "FLOPs", "of SoL", "origin"):
        table.add_column(col)
    for t in done.tasks:
        origin = f"{t.module_paths[0]} ({t.module_class})" + (f" +{len(t.module_paths) - 1}" if t.calls > 1 else "")
        low, high = t.share_range
        task = shown(t.file) if t.file else f"[dim]{shown(t.name)}: {shown(t.why)}[/]"
        task += " [yellow](data-dependent)[/]" if t.data_dependent else ""
        task += f" [cyan](fused: {t.fused})[/]" if t.fused else ""
        cells = (str(t.rank), task, str(t.calls), f"{t.share:.1%}", f"{low:.1%}-{high:.1%}")
        table.add_row(*cells, *_work_cells(t.bytes, t.flops, t.of_floor), shown(origin))
    sol = done.speed_of_light
    if sol is not None:  # the whole forward, of its profiled time (the shares' measure)
        table.add_section()
        table.add_row("", "the whole forward", "", "", "", *_work_cells(sol.bytes, sol.flops, sol.of_floor), "")
    console.print(table)
    if sol is not None:
        console.print(shown(sol.said()))
    console.print(
        f"shares: of the forward's {done.measure} under the profiler, each op's least over "
        f"{counted(done.forwards, 'profiled forward')} ({done.total_us / 1000:.3g} ms; the forward's median "
        f"{profiled.median / 1000:.3g} ms, {profiled.low / 1000:.3g}-{profiled.high / 1000:.3g})"
    )
    varies = [t for t in done.tasks if t.data_dependent]
    if varies:  # an MoE's tokens per expert: each task holds this forward's count
        first = varies[0]
        console.print(
            f"data-dependent: {counted(len(varies), 'task')} hold a count of the data in their shapes; another input "
            f"may route another count. {shown(first.file or first.name)}: {shown(first.data_dependent_why or '')} "
            "(capture.json: data_dependent_why, for each)"
        )
    if done.switched_to_eval:
        console.print(
            "mode: the model was in training mode; capture ran it in eval() mode (dropout off, BatchNorm on its "
            "running statistics), as a served model runs"
        )
    _say_shapes(done)
    written = counted(sum(1 for t in done.tasks if t.file), "task")
    console.print(
        f"{written} covering {done.covered_share:.1%} of the forward in {shown(out)}/ (capture.json lists all)"
    )


def _work_cells(moved: int, flops: int, of_floor: float | None) -> tuple[str, str, str]:
    """A region's (or the forward's) least bytes, FLOPs and fraction of its floor, as the table writes them."""
    from kernelsmith.evaluate.measuring.roofline import amount, fraction

    return amount(moved, "B"), amount(flops, ""), fraction(of_floor)


def _say_shapes(done) -> None:
    """At several --shape: the shapes, and the tasks that hold fewer (once, with the first one's reason)."""
    if len(done.shapes) < 2:
        return
    from kernelsmith.capture.entry import shape_text

    tasks = [t for t in done.tasks if t.file]
    fewer = [t for t in tasks if t.shapes_why]
    said = f"shapes: {', '.join(shape_text(s) for s in done.shapes)} (the first timed); "
    if not fewer:
        console.print(said + "every task holds them all, and a kernel is judged at each")
        return
    first = fewer[0]
    text, why = next(iter(first.shapes_why.items()))
    console.print(
        said + f"{counted(len(fewer), 'task')} of {len(tasks)} hold fewer ({shown(first.file or first.name)} not "
        f"{text}: {shown(why)}; capture.json: shapes_why, for each)"
    )


def apply_cmd(
    run_dirs: list[Path] = typer.Argument(..., help="run directories of searches on the capture's task files"),
    capture_dir: Path = typer.Option(..., "--capture", help="the folder `kernelsmith capture` wrote"),
    out: Path = typer.Option(..., "--out", help="the patch folder to write (an importable package)"),
    device: Device | None = typer.Option(None, help="where the check runs the model (default: the capture's)"),
    check: bool = typer.Option(True, "--check/--no-check", help="run the end-to-end check (outputs and time)"),
    reps: int = typer.Option(_APPLY["reps"].default, "--reps", min=2, help="forwards timed before and after, each"),
    atol: float | None = typer.Option(None, help="absolute tolerance (default: the verdict's for the dtype)"),
    rtol: float | None = typer.Option(None, help="relative tolerance (default: the verdict's for the dtype)"),
    min_speedup: float | None = typer.Option(
        None,
        "--min-speedup",
        min=0.0,
        help="leave out kernels whose verdict speedup is below this (default 1; 0 for a CPU capture, whose runs time "
        "Triton's interpreter); below it against torch.compile, a kernel serves eager mode only",
    ),
    accept_slower: Slower = typer.Option(
        Slower.none,
        "--accept-slower",
        help="keep, as measured, a patched forward slower than the original, named (by default its kernels are "
        "left out of that mode): eager (in eager time only: the patch's dispatch, which a CUDA-graph replay does "
        "not pay) or all",
    ),
    modes: list[Mode] = typer.Option(
        [],
        "--mode",
        help="how the check runs the model, original and patched alike; repeat for several: eager, compile "
        "(torch.compile), graphs (torch.compile with CUDA graphs, mode='reduce-overhead'; CUDA only) [default: "
        "all three on cuda, eager on the cpu]",
    ),
) -> None:
    """Write the best kernel of each run as a drop-in patch for the captured model and check it end to
    end in each --mode: outputs against the original on fresh inputs, each kernel seen to do its regions'
    work, the forward's time before and after. Each mode is served only by the kernels that make it faster:
    one whose taking slows a mode is left out of it, and a mode no kernel makes faster (or not checked) runs
    the model as it was, said per mode (docs/capture.md). Exit 1 when the check fails (outputs, a kernel that
    never took its regions), 0 when no mode is slower for the patch, a patch that serves no mode included."""
    from kernelsmith.apply.options import ApplyOptions
    from kernelsmith.apply.run import apply_runs
    from kernelsmith.capture.outdir import importable

    check_paths("dir", "RUN_DIR", *run_dirs)
    check_paths("dir", "--capture", capture_dir)
    importable(out)  # the patch is a package: `import NAME`
    options = ApplyOptions(
        device=device.value if device else None,
        check=check,
        reps=reps,
        atol=atol,
        rtol=rtol,
        min_speedup=min_speedup,
        accept_slower=accept_slower.value,
        modes=tuple(dict.fromkeys(m.value for m in modes)) or None,
    )
    done = apply_runs(run_dirs, capture_dir, out, options)
    console.print(_kernels_table(done))
    if not done.modes:
        console.print("end-to-end check skipped (--no-check): each kernel serves the modes its verdicts give it")
        raise typer.Exit(0)
    _say_check(done)
    raise typer.Exit(0 if done.ok else 1)


def _kernels_table(done: Applied) -> Table:
    e2e = done.e2e
    table = Table(title=f"{shown(done.entry)}: patch in {shown(done.out_dir)}/ ({done.device})")
    mode = f" in {e2e.mode} mode" if e2e is not None and e2e.mode != "eager" else ""
    for col in ("task", "share", "kernel speedup", "calls", f"taken per forward{mode}", "status", "serves"):
        table.add_column(col)
    for c in done.kernels:
        merged = e2e.merged.get(c.name) if e2e is not None else None
        taken = "-" if e2e is None or c.why or merged else f"{e2e.fired.get(c.name, 0):g}"
        status = shown(c.why) if c.why else ("applied" if done.took(c) else "[red]never took its region[/]")
        inside = e2e.within.get(c.name) if e2e is not None and not e2e.fired.get(c.name) else None
        if merged and not c.why:
            status = f"same ops as {shown(merged)}: that kernel takes its regions"
        elif inside and not c.why:
            status = f"its regions lie inside {shown(inside)}'s larger ones: that kernel takes them"
        elif e2e is not None and not c.why and e2e.fired.get(c.name, 0) > c.calls:
            status += f" ({_others(done, e2e, c.name)})"
        first = next((m.mode for m in done.modes if m.checked), None)  # the table's mode: the first checked
        if e2e is not None and c.name in e2e.unserved:
            status, taken = f"not in {e2e.mode} mode: {shown(e2e.unserved[c.name])}", "-"
        elif e2e is not None and c.name in e2e.skipped:
            status, taken = f"not substituted: {shown(e2e.skipped[c.name])}", "-"
        elif first is not None and first in c.left_out and (e2e is None or e2e.mode != first):
            status = f"not in {first} mode: {shown(c.left_out[first])}"
        speed = f"{c.speedup:.3g}x" if c.speedup is not None else "-"
        serves = ", ".join(c.modes) if c.why is None and done.modes else "-"
        table.add_row(shown(c.name), f"{c.share:.1%}", speed, str(c.calls), taken, status, serves or "no mode")
    return table


def _others(done: Applied, e2e: E2E, name: str) -> str:
    """Why a kernel takes more regions per forward than its task's captured calls: it serves the tasks
    whose regions have its ops too."""
    calls = {c.name: c.calls for c in done.kernels}
    merged = [n for n, keeper in e2e.merged.items() if keeper == name and n != name]
    if not merged:
        return f"more than its {calls.get(name, 0)} captured calls"
    said = ", ".join(f"{shown(n)}'s {calls.get(n, 0)}" for n in merged)
    return f"its {calls.get(name, 0)} captured calls and {said}: same ops, served by this kernel"


def _agreement(kind: str, subject: str = "") -> str:
    """gains.agreement() in words: a spread too wide to compare says "cannot tell", never "agrees"."""
    from kernelsmith.apply.gains import AGREES, DISAGREES, TELL_SPREAD

    if kind == AGREES:
        return f"{subject}agree{'' if subject else 's'} within the spreads"
    if kind == DISAGREES:
        return f"[yellow]{subject}disagree{'' if subject else 's'} beyond the spreads[/]"
    return f"cannot tell: a spread's high is over {TELL_SPREAD:g}x its low, too wide to compare"


def _say_check(done: Applied) -> None:
    """The end-to-end check's lines: how each kernel serves, each mode's outputs and times, and the
    verdict last."""
    served = done.checks[0].served if done.checks else {}
    for name, how in served.items():
        console.print(f"{shown(name)} serves: {shown(how)}")
    for e2e in done.checks:
        _say_mode(done, e2e, len(done.checks) > 1 or e2e.mode != "eager")
    if done.capture_times:  # the same quantities capture measured, on the original forward
        said = [
            f"{c.measure} {c.capture_ms.median:.4g} ms ({c.capture_ms.low:.4g}-{c.capture_ms.high:.4g}): "
            + _agreement(c.agreement)
            for c in done.capture_times
        ]
        console.print(f"capture's original forward against the original here: {'; '.join(said)}")
    _say_modes(done)
    if not done.ok:
        console.print(f"-> [red]check failed[/]: {shown(done.failure or '')}")
    elif done.slower:  # a slower forward is never passed without saying so
        said = "; ".join(f"{s.line} ({s.accepted})" for s in done.slower)
        console.print(f"-> check passed, but [yellow]the patched forward is slower[/]: {shown(said)}")
    else:
        console.print("-> check passed")


def _say_modes(done: Applied) -> None:
    """Each mode as the patch serves it, in one line, and each kernel its times left out of a mode."""
    for m in done.modes:
        for tried in m.tried:
            for name, why in tried.left_out.items():
                console.print(f"{m.mode}: left out {shown(name)}: {shown(why)}")
    said = "; ".join(m.said for m in done.modes)
    nothing = "" if any(m.kernels for m in done.modes) else " (the patch serves no mode: the model runs as it was)"
    console.print(f"served: {shown(said)}{nothing}")


def _say_mode(done: Applied, e2e: E2E, named: bool) -> None:
    """One mode's lines: outputs, graph breaks and regions taken (compiled modes), times."""
    label = f"[bold]{e2e.mode}[/]: " if named else ""
    model = "the model's" if e2e.mode == "eager" else "the compiled model's"
    if not e2e.trials:  # the patched forward raised: the message says how
        console.print(f"{label}[red]{shown(e2e.mismatch)}[/]")
    elif e2e.outputs_match:
        console.print(f"{label}outputs match {model} on {e2e.trials} inputs {shown(e2e.outputs_said)}")
    else:
        console.print(f"{label}[red]outputs differ from {model}[/]: {shown(e2e.mismatch)}")
    if e2e.graph_breaks:
        reasons = f": {shown('; '.join(e2e.break_reasons))}" if e2e.break_reasons else ""
        console.print(
            f"{label}torch.compile: {e2e.graph_breaks[1]} graph breaks with the patch, {e2e.graph_breaks[0]} "
            f"without{reasons}"
        )
    if e2e.mode != "eager" and e2e.trials:
        taken = ", ".join(f"{shown(n)} {f:g}" for n, f in e2e.fired.items() if n not in e2e.unserved)
        console.print(f"{label}regions taken in one forward: {taken or 'none'}")
    p = done.prediction if e2e.mode == "eager" else None
    for t in e2e.timings:
        b, a = t.before_ms, t.after_ms
        note = " [dim](within noise)[/]" if t.within_noise else ""
        note += " [dim](relative only: CPU)[/]" if t.measure.startswith("CPU") else ""
        if p is not None and p.measure == t.measure:  # the prediction beside the measurement
            note += f"; predicted {p.speedup:.3g}x ({p.low:.3g}-{p.high:.3g})"
            note += f" from the verdicts over {p.covered:.1%} of the forward"
            note += f" ({_agreement(p.agreement, 'they ')})"
        console.print(
            f"{label}{t.measure} per forward: {b.median:.4g} ms ({b.low:.4g}-{b.high:.4g}) -> {a.median:.4g} ms "
            f"({a.low:.4g}-{a.high:.4g}): [bold]{t.speedup:.3g}x[/]{note}"
        )
    if e2e.forged:
        console.print(f"{label}[red]not trusted[/]: {shown(e2e.forged)}")
