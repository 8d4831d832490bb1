"""`kernelsmith seed`: a starting candidate for a task from the code torch.compile (Inductor) generates."""

from __future__ import annotations

from pathlib import Path

import typer

from kernelsmith.cli.common import check_paths
from kernelsmith.errors import UserError


def seed_cmd(
    task: Path = typer.Argument(..., help="the task file (KernelBench format)"),
    out: Path | None = typer.Option(None, "--out", help="where to write the candidate \\[default: TASK_seed.py]"),
    record: Path | None = typer.Option(
        None, "--record", help="also keep Inductor's output code and launch configs in this directory"
    ),
) -> None:
    """Compile the task's Model with Inductor on the GPU at the task's shapes and write its code as a
    self-contained candidate: plain @triton.jit kernels with explicit grids and Inductor's launch
    configs, library calls kept (docs/seed.md). Exit 2 with one line when there is no seed."""
    from kernelsmith.seed.seed import seed_task
    from kernelsmith.task import Task

    target = out or task.with_name(f"{task.stem}_seed.py")
    check_paths("file", "task", task, out)
    check_paths("dir", "--record", record)
    if not target.parent.is_dir():  # said before Inductor's minutes of compiling, not after
        raise UserError(f"--out {target}: its directory {target.parent} does not exist")
    found = seed_task(Task.from_file(task), record)
    try:
        target.write_text(found.source, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write the seed to {target}: {exc.strerror or exc}") from None
    launches = found.record.launches
    how = " (its Triton templates forced: the default code had no Triton kernel)" if found.templates else ""
    print(f"{target}: {len(launches)} Triton kernels from Inductor{how}")
