"""What a region's run directory holds, read without changing it: its start, best, iterations, time and pace."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kernelsmith.evolve.pace import Pace, pace_of
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import RunStore, holds_run


@dataclass
class RunInfo:
    exists: bool = False
    iterations: int = 0  # stored after the start
    elapsed_s: float = 0.0  # over every session of the search, a killed one's too (to its last program)
    start: Program | None = None
    best: Program | None = None  # the run's best (a success), as apply takes it
    pace: Pace = field(default_factory=Pace)  # its evaluations over every session (evolve/pace.py)


def run_info(run_dir: Path) -> RunInfo:
    if not holds_run(run_dir):
        return RunInfo()
    store = RunStore.open_readonly(run_dir)
    try:
        elapsed_s = float(store.get_meta("elapsed_s") or 0.0)
        return RunInfo(
            exists=True,
            iterations=len(store.iterations() - {0}),
            elapsed_s=elapsed_s,
            start=store.at_iteration(0),
            best=store.best(),
            pace=pace_of(store.eval_records(), elapsed_s),
        )
    finally:
        store.close()
