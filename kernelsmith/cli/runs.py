"""`kernelsmith runs`, `report` and `export`: what run directories hold, as a listing, an HTML page
or every program as JSONL."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.table import Table

from kernelsmith.cli.common import check_paths, console, fail, shown
from kernelsmith.errors import UserError


def runs_cmd(
    root: Path = typer.Argument(Path("runs"), help="folder to search for run directories"),
    json_out: bool = typer.Option(False, "--json", help="one JSON list on the last line"),
) -> None:
    """List run directories: task, iterations, best speedup, dates."""
    import json

    from kernelsmith.evolve.runs import find_runs

    skipped: list[tuple[str, str]] = []
    runs = find_runs(root, skipped=skipped)
    for folder, why in skipped:  # on stderr: --json's last line stays the list
        print(f"skipped {folder}: {why}", file=sys.stderr)
    if json_out:
        sys.stdout.write(json.dumps([r.as_dict() for r in runs]) + "\n")
        return
    if not runs:
        if not root.exists():  # before the first run: an empty listing, not an error
            console.print(
                f"no runs yet: there is no folder {shown(root)} "
                "(evolve puts each run in runs/TASK, or where --run-dir says)",
                highlight=False,
                soft_wrap=True,
            )
        else:
            console.print(f"no run directories below {shown(root)}", highlight=False, soft_wrap=True)
        return
    table = Table(title=f"runs below {shown(root)}")
    for col in ("run", "task", "iterations", "programs", "best", "started"):
        table.add_column(col, justify="right" if col in ("iterations", "programs", "best") else "left", overflow="fold")
    for r in runs:
        best = f"{r.best_speedup:.3g}x (#{r.best_program})" if r.best_speedup is not None else "-"
        where = str(Path(r.run_dir).relative_to(root)) if Path(r.run_dir).is_relative_to(root) else r.run_dir
        cells = (str(r.iterations_done), str(r.programs), best, r.created or "-")
        table.add_row(shown(where), shown(r.task or "?"), *cells)
    console.print(table)


def report_cmd(
    run_dir: Path = typer.Argument(..., help="a run directory made by `kernelsmith evolve`"),
    out: Path | None = typer.Option(
        None, help="where the page goes: a file, or a directory for its report.html \\[default: RUN_DIR/report.html]"
    ),
) -> None:
    """Write a self-contained HTML report of a run (opens with no network)."""
    from kernelsmith.report import write_run_report

    check_paths("dir", "run directory", run_dir)
    path = write_run_report(run_dir, out)
    console.print(f"report: {shown(path)}", highlight=False, soft_wrap=True)


def export_cmd(
    run_dir: Path = typer.Argument(..., help="a run directory made by `kernelsmith evolve`"),
    fmt: str = typer.Option("jsonl", "--format", help="jsonl: one JSON object per program"),
) -> None:
    """Print every program of a run, oldest first."""
    import json
    import sqlite3

    from kernelsmith.evolve.outputs import export_rows
    from kernelsmith.evolve.store import RunStore

    if fmt != "jsonl":
        fail(f"--format {fmt}: the only format is jsonl")
    check_paths("dir", "run directory", run_dir)
    store = RunStore.open_readonly(run_dir)  # reading never writes: not even the schema
    try:
        rows = list(export_rows(store))  # all read before any is printed: a damaged store prints nothing
    except sqlite3.DatabaseError as exc:
        raise UserError(f"{store.path} is not a readable run store: {exc}") from None
    finally:
        store.close()
    out = sys.stdout
    for row in rows:
        out.write(json.dumps(row) + "\n")
