"""`kernelsmith import-fib` and `kernelsmith export-fib`: flashinfer-bench's Definitions, Workloads,
Solutions and Traces in and out (docs/ecosystem.md). Thin."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from kernelsmith.cli.common import console, shown


def import_fib_cmd(
    dataset: Path = typer.Argument(..., help="a flashinfer-trace dataset folder (definitions/, workloads/, ...)"),
    out: Path = typer.Option(..., "--out", help="folder for the task files, the candidates and import.json"),
    definition: list[str] = typer.Option(
        None, "--definition", help="import this definition (repeatable; default: all)"
    ),
    top: int | None = typer.Option(None, "--top", min=1, help="per definition, the N heaviest workloads only"),
) -> None:
    """Turn a flashinfer-trace dataset's Definitions and Workloads into tasks (one per workload) and its
    Solutions into candidates that `kernelsmith eval` judges as any other."""
    from kernelsmith.fib import require

    require()
    from kernelsmith.fib.importing import import_fib
    from kernelsmith.fib.task_text import BLOBS_ENV

    done = import_fib(dataset, out, definition or None, top)
    table = Table(title=f"{shown(dataset)} -> {shown(out)}/")
    for col in ("definition", "task", "workload", "axes"):
        table.add_column(col)
    for t in done.tasks:
        axes = ", ".join(f"{a}={v}" for a, v in t.axes.items())
        table.add_row(shown(t.definition), shown(t.file), t.workload[:8], shown(axes))
    console.print(table)
    for s in done.solutions:
        said = f"-> {shown(s.file)}" if s.file else f"not a candidate: {shown(s.why)}"
        console.print(f"solution {shown(s.name)} ({s.language}, {shown(s.definition)}): {said}")
    for name, why in done.skipped.items():
        console.print(f"definition {shown(name)} not imported: {shown(why)}")
    reading = [t for t in done.tasks if t.blobs]
    if reading:  # the sandbox runs a copy of the task in a folder of its own
        console.print(
            f"{len(reading)} tasks read safetensors files under {shown(out)}/blob/: to judge them, "
            f"export {BLOBS_ENV}={shown(out.resolve())}"
        )
    console.print(f"{len(done.tasks)} tasks in {shown(out)}/ (import.json lists what came from where)")


def export_fib_cmd(
    sources: list[Path] = typer.Argument(..., help="task files and run directories"),
    out: Path = typer.Option(..., "--out", help="a new or empty folder, or a flashinfer-bench dataset to add to"),
    author: str = typer.Option("kernelsmith", "--author", help="the Solutions' author (their folder)"),
    op_type: str | None = typer.Option(None, "--op-type", help="the Definitions' op_type (default: the task's name)"),
    small: bool = typer.Option(False, "--small", help="export each task at its CPU_SIZES only"),
    dps: bool = typer.Option(
        False, "--dps", help="Solutions in destination-passing style (run copies into the outputs it is given)"
    ),
) -> None:
    """Write tasks as flashinfer-bench Definitions and Workloads, and runs' best kernels as Solutions with
    their verdicts as Traces, in flashinfer-bench's folder layout."""
    from kernelsmith.fib import require

    require()
    from kernelsmith.fib.exporting import export_fib

    report = export_fib(sources, out, author, op_type, small, dps)
    table = Table(title=f"flashinfer-bench set in {shown(out)}/")
    for col in ("definition", "op_type", "axes", "workloads", "from"):
        table.add_column(col)
    for d in report.definitions:
        axes = ", ".join(f"{a}" if v == "var" else f"{a}={v}" for a, v in d["axes"].items())
        table.add_row(shown(d["name"]), shown(d["op_type"]), shown(axes), str(d["workloads"]), shown(d["source"]))
    console.print(table)
    for s in report.solutions:
        trace = f", trace {s['trace']}" if s["trace"] else ", no trace (no verdict stored)"
        note = f" ({shown(s['note'])})" if s["note"] else ""
        console.print(f"solution {shown(s['name'])} for {shown(s['definition'])} from {shown(s['run'])}{trace}{note}")
        if s["apply"]:  # flashinfer-bench's defaults (1e-2, 1e-5) serve no bf16 kernel
            tol = s["apply"]
            console.print(
                f"  apply() serves it with ApplyConfig(max_atol={tol['max_atol']}, max_rtol={tol['max_rtol']})"
            )
    for source, why in report.skipped:
        console.print(f"left out {shown(source)}: {shown(why)}")
    for source, why in report.failed:
        console.print(f"failed {shown(source)}: {shown(why)}")
    console.print(f"{len(report.written)} files written; flashinfer_bench's TraceSet loads {shown(out)}")
    if report.failed:  # the others are exported; a script still learns that some were not
        raise typer.Exit(1)
