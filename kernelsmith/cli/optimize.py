"""`kernelsmith optimize`: from a model to a checked patch in one command (capture, starts, searches within
a budget, apply), resumable in its work directory (docs/optimize.md). Thin: kernelsmith/optimize does it."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from kernelsmith.cli.capture import Mode, Slower
from kernelsmith.cli.common import (
    EVAL_BACKEND,
    EVAL_URL,
    RAY_ADDRESS,
    EvalBackendKind,
    check_paths,
    console,
    fail,
    shown,
)
from kernelsmith.device import Device
from kernelsmith.optimize.budget import shown_time
from kernelsmith.optimize.options import DEFAULT_BUDGET, default
from kernelsmith.progress import LiveProgress

if TYPE_CHECKING:
    from kernelsmith.optimize.result import Optimized


def optimize_cmd(
    entry: str = typer.Argument(
        ..., help="package.module:factory or path/to/file.py:factory, returning (model, inputs)"
    ),
    out: Path = typer.Option(
        ..., "--out", help="the work directory: capture, seeds, runs, patch, page; rerun to resume"
    ),
    budget: str = typer.Option(
        DEFAULT_BUDGET, "--budget", help="search time in all (90s, 20m, 1h30m), split by each region's share"
    ),
    top: int = typer.Option(default("top"), "--top", min=1, help="search the N heaviest regions outside library ops"),
    min_share: float = typer.Option(
        default("min_share"), "--min-share", min=0.0, max=1.0, help="leave regions below this share out of the capture"
    ),
    forwards: int = typer.Option(default("forwards"), "--forwards", min=1, help="profiled forwards capture ranks on"),
    shape: list[str] = typer.Option(
        [], "--shape", help="NAME=VALUE[,...]: a shape to capture at and judge each kernel at, as capture's; repeat"
    ),
    fused: bool = typer.Option(
        default("fused"),
        "--fused",
        help="also capture and search regions across the library boundary (GEMM + norm, epilogue or siblings; "
        "decode attention with its cache): each needs a start (--seeds, an LLM)",
    ),
    modes: list[Mode] = typer.Option(
        [],
        "--mode",
        help="how the patch is checked; repeat for several: eager, compile, graphs (CUDA) [default: all three "
        "on cuda, eager on the cpu]; the patch serves only the modes checked",
    ),
    device: Device = typer.Option(Device.cuda, help="where the model and the searches run: cuda, or cpu (interpreter)"),
    seeds: str | None = typer.Option(
        None, "--seeds", help="starting kernels: a folder of NAME.py by task name, or file.py:function(task_path)"
    ),
    llm_base_url: str | None = typer.Option(None, help="OpenAI-compatible endpoint: the evolutionary search"),
    model: str | None = typer.Option(
        None, help="model name at that endpoint (without one: the launch-parameter tuner)"
    ),
    config: Path | None = typer.Option(None, help="evolve config file (TOML or YAML) for every search"),
    iterations: int | None = typer.Option(
        None, min=0, help="at most N iterations per region \\[default: as many as its time allows]"
    ),
    workers: int | None = typer.Option(
        None, min=1, help="evaluation workers, one region searching on each \\[default: one per GPU; 1 on the CPU]"
    ),
    small: bool = typer.Option(False, "--small", help="search each task at its CPU_SIZES"),
    reps: int = typer.Option(default("reps"), "--reps", min=2, help="forwards timed before and after in the check"),
    min_speedup: float | None = typer.Option(
        None, "--min-speedup", min=0.0, help="leave out kernels slower than this \\[default: 1; 0 on the CPU]"
    ),
    accept_slower: Slower = typer.Option(Slower.none, "--accept-slower", help="as apply's: none, eager or all"),
    eval_backend: EvalBackendKind | None = EVAL_BACKEND,
    ray_address: str | None = RAY_ADDRESS,
    eval_url: str | None = EVAL_URL,
    quiet: bool = typer.Option(False, "--quiet", help="no live progress: the lines and the table at the end"),
) -> None:
    """Make a model faster in one command: capture where its time goes, search a kernel for each heavy region
    within the budget (the tuner, or an LLM's search), write the patch and check it end to end. Rerunning
    resumes; a larger --budget goes on with the searches (docs/optimize.md). Exit 1 when no patch passed."""
    flags = dict(locals())  # every flag by its name: OptimizeOptions' names, but for a few
    from kernelsmith.optimize.run import optimize

    try:
        check_paths("file", "config file", config)
        opts = _options(flags)
        if quiet:
            done = optimize(opts, lambda text: console.print(escape(text), highlight=False, soft_wrap=True))
        else:
            with LiveProgress(console, "regions searched", 0) as view:
                done = optimize(opts, lambda text: view.say(escape(text)), view)
    except KeyboardInterrupt:
        fail("interrupted; every finished step and evaluated program is kept: run the same command to resume", 130)
    _say_outcome(done)
    raise typer.Exit(0 if done.passed else 1)


def _options(flags: dict):
    """The flags as OptimizeOptions (its defaults are theirs)."""
    from kernelsmith.capture.entry import parse_shape
    from kernelsmith.optimize.budget import parse_budget
    from kernelsmith.optimize.options import OptimizeOptions

    enums = {k: v.value for k, v in flags.items() if isinstance(v, Enum)}
    named = {k: v for k, v in {**flags, **enums}.items() if k not in ("budget", "modes", "quiet", "shape")}
    modes = tuple(dict.fromkeys(m.value for m in flags["modes"])) or None
    shapes = [parse_shape(s) for s in flags["shape"]]
    return OptimizeOptions(**named, budget_s=parse_budget(flags["budget"]), modes=modes, shapes=shapes)


def _region_table(done: Optimized) -> Table:
    from kernelsmith.optimize.outcome import search_said

    searched = f"searched {shown_time(done.search_total_s)} over every run"  # the regions' times, as each row's
    where = f"{done.device}, budget {shown_time(done.budget_s)}, {searched}, work directory {shown(done.out)}"
    table = Table(title=f"{shown(done.entry)}: {where}")
    for col in ("rank", "region", "share", "of SoL", "start", "search", "kernel", "in the patch"):
        table.add_column(col)
    for r in done.regions:
        if not r.searched:
            continue
        search = search_said(r) or "-"
        kernel = f"{r.speedup:.3g}x" if r.speedup is not None else (r.verdict or "-")
        k = r.kernel
        taken = ", ".join(f"{m} {n:g}" for m, n in k.taken.items()) if k is not None and k.in_patch else ""
        where = f"taken per forward: {taken}" if taken else ""
        if k is not None and k.served_by:
            where = f"served by {k.served_by}"
        said = "no starting kernel (below)" if r.name in done.startless else r.note  # the advice: once, under it
        note = f"[yellow]{shown(said)}[/]" if said else ""
        cells = (str(r.rank), shown(r.name), f"{r.share:.1%}", _of_floor(r.of_floor, r.of_floor_after))
        cells += (shown(r.start or "-"), search, kernel)
        table.add_row(*cells, "; ".join(x for x in (shown(where), note) if x) or "-")
    return table


def _of_floor(before: float | None, after: float | None) -> str:
    """The fraction of a floor a time reached, before and after the patch where both were measured ("-": no card)."""
    from kernelsmith.evaluate.measuring.roofline import fraction

    return fraction(before) + (f" -> {fraction(after)}" if after is not None else "")


def _say_outcome(done: Optimized) -> None:
    console.print(_region_table(done))
    if done.evaluations is not None:  # the searches' pace, every run of them (evolve/pace.py)
        console.print(shown(done.evaluations.line()))
    if done.start_advice:  # once, not in every row without a start
        console.print(f"[yellow]{shown(done.start_advice)}[/]")
    others = [r.note or "" for r in done.regions if not r.searched]
    if others:
        kinds = {"a library op": "library ops", "beyond --top": "beyond --top", "not captured": "not captured as tasks"}
        parts = [f"{sum(n.startswith(k) for n in others)} {said}" for k, said in kinds.items()]
        shown_parts = ", ".join(p for p in parts if not p.startswith("0 "))
        console.print(f"not searched: {len(others)} regions ({shown_parts}; the page lists each)")
    if done.speed_of_light is not None:  # the floor every "of SoL" is of
        console.print(shown(done.speed_of_light.said))
    patch = done.patch
    for t in patch.times if patch is not None else []:
        noise = " (within noise)" if t.within_noise else ""
        b, a = t.before_ms, t.after_ms
        light = f"; {_of_floor(t.of_floor_before, t.of_floor_after)} of its speed of light"
        console.print(
            f"{t.mode}: {t.measure} per forward {b.median:.4g} ms ({b.low:.4g}-{b.high:.4g}) "
            f"-> {a.median:.4g} ms ({a.low:.4g}-{a.high:.4g}): [bold]{t.speedup:.3g}x[/]{noise}"
            + (light if t.of_floor_before is not None else "")
        )
    p = patch.prediction if patch is not None else None
    if p:  # as optimize.json stores it: an infinite bound is "Infinity" there, "inf" here and on the page
        x = lambda key: f"{p[key]:.3g}" if isinstance(p.get(key), (int, float)) else "inf"
        console.print(
            f"predicted {x('speedup')}x ({x('low')}-{x('high')}) from the verdicts over {p['covered']:.1%} of the "
            f"forward, measured {x('measured')}x in eager {shown(p['measure'])}: {p['agreement']}"
        )
    if patch is not None and patch.modes:  # each mode as the patch serves it
        console.print(f"served: {shown('; '.join(m.said for m in patch.modes))}")
    if done.too_small:
        console.print(f"[yellow]{shown(done.too_small)}[/]")
    mark = "[green]" if done.passed else "[red]"
    console.print(f"-> {mark}{shown(done.reason)}[/]")
    if patch is not None and patch.path:
        name = shown(Path(patch.path).name)
        console.print(f"patch: {shown(patch.path)} (import {name}; {name}.apply(model))")
    console.print(f"page: {shown(done.report or '')}")
