"""Read stored searches as steps: each program with its parent and the task it worked on.

A run directory is opened read-only (SQLite `mode=ro`): exporting data never changes a run, and
works while the search is still writing to it (WAL lets a reader see the committed programs).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelsmith.errors import UserError
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import RunStore
from kernelsmith.identity import program_hash

_TASK_META = ("task_name", "task_hash", "task_source")


@dataclass(frozen=True)
class Step:
    """One stored program of a run, with its parent program (None when it has none)."""

    program: Program
    parent: Program | None
    task: str
    task_hash: str
    task_source: str
    run_dir: str
    floors: dict[str, float] = field(default_factory=dict)  # the run's measured noise floors (RunStore)

    @property
    def is_llm(self) -> bool:
        """Made by the LLM: the exact messages sent and the raw reply are stored (not seed or tune)."""
        return self.program.messages is not None and self.program.response is not None

    @property
    def is_first(self) -> bool:
        """No kernel to start from (the translate operator): judged on its own, not against a parent."""
        return self.program.parent_id is None

    @property
    def same_as_parent(self) -> bool:
        """The parent's program again, up to formatting, comments and docstrings: no step at all."""
        if self.parent is None or self.parent.code is None or self.program.code is None:
            return False
        return program_hash(self.program.code) == program_hash(self.parent.code)

    @property
    def parent_speedup(self) -> float | None:
        """The parent's speedup when the parent counts as a success (correct, unflagged); else None."""
        if self.parent is None or not self.parent.ok:
            return None
        return self.parent.speedup

    @property
    def gain(self) -> float | None:
        """child speedup / parent speedup, when both exist (and the parent's is positive)."""
        child, parent = self.program.speedup, self.parent_speedup
        if child is None or parent is None or parent <= 0:
            return None
        return child / parent


@dataclass(frozen=True)
class Run:
    """Everything a run directory stores that the data builders need."""

    run_dir: str
    task: str
    task_hash: str
    task_source: str
    programs: tuple[Program, ...]  # in id order
    best: Program | None  # RunStore.best(): the run's best, faster only beyond timing noise (best_of)
    floors: dict[str, float] = field(default_factory=dict)  # RunStore.noise_floors(): its measured floors

    def steps(self) -> list[Step]:
        by_id = {p.id: p for p in self.programs}
        return [
            Step(
                program=p,
                parent=by_id.get(p.parent_id) if p.parent_id is not None else None,
                task=self.task,
                task_hash=self.task_hash,
                task_source=self.task_source,
                run_dir=self.run_dir,
                floors=self.floors,
            )
            for p in self.programs
        ]

    def lineage(self, program: Program) -> list[Program]:
        """`program` and its ancestors through parent_id, oldest first."""
        by_id = {p.id: p for p in self.programs}
        chain, seen = [program], {program.id}
        while chain[-1].parent_id is not None and chain[-1].parent_id in by_id and chain[-1].parent_id not in seen:
            chain.append(by_id[chain[-1].parent_id])
            seen.add(chain[-1].id)
        return chain[::-1]


def read_run(run_dir: str | Path) -> Run:
    """The programs, best program and task of one run directory (UserError when it is not one)."""
    run_dir = Path(run_dir)
    store = RunStore.open_readonly(run_dir)
    try:
        meta = {key: store.get_meta(key) for key in _TASK_META}
        task, task_hash, task_source = (meta[key] for key in _TASK_META)
        if task is None or task_hash is None or task_source is None:
            missing = [key for key, value in meta.items() if value is None]
            raise UserError(f"{run_dir} records no task ({', '.join(missing)} missing from its meta table)")
        return Run(
            run_dir=str(run_dir),
            task=task,
            task_hash=task_hash,
            task_source=task_source,
            programs=tuple(store.all()),
            best=store.best(),
            floors=store.noise_floors(),
        )
    except sqlite3.DatabaseError as exc:
        raise UserError(f"{store.path} is not a readable run store: {exc}") from None
    finally:
        store.close()


def read_runs(run_dirs: Sequence[str | Path]) -> list[Run]:
    """Each run directory once (the same directory named twice is read once), in the order given."""
    runs, seen = [], set()
    for run_dir in run_dirs:
        key = Path(run_dir).resolve()
        if key not in seen:
            seen.add(key)
            runs.append(read_run(run_dir))
    return runs


def read_steps(run_dirs: Sequence[str | Path]) -> list[Step]:
    """Every stored program of the runs as a Step."""
    return [step for run in read_runs(run_dirs) for step in run.steps()]
