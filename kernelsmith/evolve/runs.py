"""Find run directories below a folder and say what each holds (`kernelsmith runs`)."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelsmith.errors import UserError
from kernelsmith.evolve.store import STORE_NAME, RunStore


@dataclass
class RunInfo:
    run_dir: str
    task: str | None
    iterations_done: int
    programs: int
    best_speedup: float | None
    best_program: int | None
    created: str | None  # local date and time the run started
    updated: str  # when its store last changed

    def as_dict(self) -> dict:
        return asdict(self)


def _read(path: Path) -> RunInfo:
    store = RunStore.open_readonly(path.parent)
    try:
        task, created = store.get_meta("task_name"), store.get_meta("created_at")
        done = len([i for i in store.iterations() if i > 0])
        programs, best = store.count(), store.best()
    finally:
        store.close()
    fmt = "%Y-%m-%d %H:%M"
    return RunInfo(
        run_dir=str(path.parent),
        task=task,
        iterations_done=done,
        programs=programs,
        best_speedup=best.speedup if best else None,
        best_program=best.id if best else None,
        created=time.strftime(fmt, time.localtime(created)) if created else None,
        updated=time.strftime(fmt, time.localtime(path.stat().st_mtime)),
    )


def find_runs(root: Path, max_depth: int = 4, skipped: list[tuple[str, str]] | None = None) -> list[RunInfo]:
    """Every run directory at most `max_depth` levels below `root` (root itself included), by path;
    none when `root` does not exist (no run has been made there yet). Folders with a store that
    cannot be read are appended to `skipped` as (folder, why)."""
    root = Path(root)
    if not root.exists():
        return []
    if not root.is_dir():
        raise UserError(f"{root} is a file, not a folder of run directories")
    stores = [p for depth in range(max_depth + 1) for p in root.glob("/".join(["*"] * depth + [STORE_NAME]))]
    runs = []
    for store in sorted(stores):
        try:
            runs.append(_read(store))
        except (UserError, sqlite3.DatabaseError) as exc:  # not a kernelsmith store, or one being created now
            if skipped is not None:
                skipped.append((str(store.parent), str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    return runs
