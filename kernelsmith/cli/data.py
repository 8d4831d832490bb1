"""`kernelsmith data sft|rl`: write post-training datasets from run directories as JSONL. Thin."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import typer
from rich.table import Table

from kernelsmith.cli.common import check_paths, console, shown
from kernelsmith.progress import counted

data_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Make post-training data from run directories: SFT steps and RL prompts (JSONL).",
)


def _dropped_text(dropped: dict[str, int]) -> str:
    return ", ".join(f"{reason} {n}" for reason, n in dropped.items()) or "-"


def _per_task(dropped_by_task: Counter, task: str, order: tuple[str, ...]) -> dict[str, int]:
    return {r: dropped_by_task[(task, r)] for r in order if dropped_by_task[(task, r)]}


def sft_table(result, out: Path) -> Table:
    from kernelsmith.data.sft import DROP_REASONS, FIRST, IMPROVEMENT

    tasks = sorted({t for t, _ in result.kept} | {t for t, _ in result.dropped_by_task})
    table = Table(title=f"SFT: {counted(len(result.rows), 'row')} -> {shown(out)}")
    for name in ("task", "first", "improvement", "dropped"):
        table.add_column(name, justify="right" if name in ("first", "improvement") else "left")
    if len(tasks) > 1:
        for task in tasks:
            table.add_row(
                shown(task),
                str(result.kept[(task, FIRST)]),
                str(result.kept[(task, IMPROVEMENT)]),
                _dropped_text(_per_task(result.dropped_by_task, task, DROP_REASONS)),
            )
    first = sum(n for (_, kind), n in result.kept.items() if kind == FIRST)
    label = "all" if len(tasks) > 1 else (tasks[0] if tasks else "-")
    table.add_row(
        shown(label),
        str(first),
        str(len(result.rows) - first),
        _dropped_text(result.dropped),
        style="bold" if len(tasks) > 1 else None,
    )
    return table


def rl_table(result, out: Path) -> Table:
    from kernelsmith.data.rl import DROP_REASONS

    tasks = sorted(set(result.kept) | {t for t, _ in result.dropped_by_task})
    table = Table(title=f"RL: {counted(len(result.rows), 'prompt')} -> {shown(out)}")
    table.add_column("task")
    table.add_column("prompts", justify="right")
    table.add_column("dropped runs")
    if len(tasks) > 1:
        for task in tasks:
            dropped = _per_task(result.dropped_by_task, task, DROP_REASONS)
            table.add_row(shown(task), str(result.kept[task]), _dropped_text(dropped))
    label = "all" if len(tasks) > 1 else (tasks[0] if tasks else "-")
    table.add_row(
        shown(label), str(len(result.rows)), _dropped_text(result.dropped), style="bold" if len(tasks) > 1 else None
    )
    return table


_RUN_DIRS = typer.Argument(
    ..., metavar="RUN_DIR", help="run directories of `kernelsmith evolve` (each holds run.sqlite)"
)
_OUT = typer.Option(..., "--out", help="the JSONL file to write")
_EXCLUDE = typer.Option(
    None,
    "--exclude-tasks",
    help="a task file, or a directory of them (recursive): drop every step of a matching task (decontamination)",
)


def _exclusions(path: Path | None) -> set[str] | None:
    from kernelsmith.data.decontam import suite_hashes

    return suite_hashes(path) if path is not None else None


@data_app.command("sft")
def sft_cmd(
    run_dirs: list[Path] = _RUN_DIRS,
    out: Path = _OUT,
    min_gain: float = typer.Option(
        1.0, help="keep a later step when its speedup over its parent's is strictly above this"
    ),
    max_per_task: int | None = typer.Option(
        None, help="keep at most N rows per task: the highest gains (first steps: their speedups)"
    ),
    exclude_tasks: Path | None = _EXCLUDE,
) -> None:
    """Step-centric SFT rows: correct, unflagged steps faster than their parent, and correct first steps."""
    from kernelsmith.data.jsonl import write_jsonl
    from kernelsmith.data.sft import build_sft

    check_paths("dir", "run directory", *run_dirs)
    result = build_sft(run_dirs, min_gain=min_gain, max_per_task=max_per_task, exclude=_exclusions(exclude_tasks))
    write_jsonl(result.rows, out)
    console.print(sft_table(result, out))


@data_app.command("rl")
def rl_cmd(run_dirs: list[Path] = _RUN_DIRS, out: Path = _OUT, exclude_tasks: Path | None = _EXCLUDE) -> None:
    """RL prompts: every LLM step on the lineage of each run's best program, with its parent for the reward."""
    from kernelsmith.data.jsonl import write_jsonl
    from kernelsmith.data.rl import build_rl

    check_paths("dir", "run directory", *run_dirs)
    result = build_rl(run_dirs, exclude=_exclusions(exclude_tasks))
    write_jsonl(result.rows, out)
    console.print(rl_table(result, out))
