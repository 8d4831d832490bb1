"""What a region's run directory holds, read without changing it: its start, best, iterations and time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import RunStore, holds_run


@dataclass
class RunInfo:
    exists: bool = False
    iterations: int = 0  # stored after the start
    elapsed_s: float = 0.0  # over every session of the search, a killed one's too (to its last program)
    start: Program | None = None
    best: Program | None = None  # the run's best (a success), as apply takes it


def run_info(run_dir: Path) -> RunInfo:
    if not holds_run(run_dir):
        return RunInfo()
    store = RunStore.open_readonly(run_dir)
    try:
        return RunInfo(
            exists=True,
            iterations=len(store.iterations() - {0}),
            elapsed_s=float(store.get_meta("elapsed_s") or 0.0),
            start=store.at_iteration(0),
            best=store.best(),
        )
    finally:
        store.close()
