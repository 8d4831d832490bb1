"""Find run directories below a folder and say what each holds (`kernelsmith runs`)."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelsmith.errors import UserError
from kernelsmith.evolve.store import STORE_NAME


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


def _read(store: Path) -> RunInfo:
    con = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)
    try:
        meta = dict(con.execute("SELECT key, value FROM meta"))
        done, programs = con.execute("SELECT COUNT(CASE WHEN iteration > 0 THEN 1 END), COUNT(*) FROM programs").fetchone()
        best = con.execute("SELECT speedup, id FROM programs WHERE status = 'correct' AND flags = '[]' "
                           "ORDER BY score DESC, id ASC LIMIT 1").fetchone()
    finally:
        con.close()
    created = json.loads(meta["created_at"]) if "created_at" in meta else None
    fmt = "%Y-%m-%d %H:%M"
    return RunInfo(run_dir=str(store.parent), task=json.loads(meta["task_name"]) if "task_name" in meta else None,
                   iterations_done=done, programs=programs, best_speedup=best[0] if best else None,
                   best_program=best[1] if best else None,
                   created=time.strftime(fmt, time.localtime(created)) if created else None,
                   updated=time.strftime(fmt, time.localtime(store.stat().st_mtime)))


def find_runs(root: Path, max_depth: int = 4) -> list[RunInfo]:
    """Every run directory at most `max_depth` levels below `root` (root itself included), by path."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"{root} is not a folder")
    stores = [p for depth in range(max_depth + 1) for p in root.glob("/".join(["*"] * depth + [STORE_NAME]))]
    runs = []
    for store in sorted(stores):
        try:
            runs.append(_read(store))
        except (sqlite3.DatabaseError, KeyError, ValueError):
            continue  # not a kernelsmith store, or one being created right now
    return runs
