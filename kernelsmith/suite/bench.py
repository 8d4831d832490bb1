"""Benchmark a directory of solutions against a suite of KernelBench-format tasks.

The suite is a directory tree of task files (KernelBench's own layout: `level1/1_x.py`, ...);
the solution of a task is the file at the same relative path under the solutions directory.
Every evaluation is submitted before any is collected, so a pool with several workers runs
them concurrently. The metrics are in `kernelsmith.suite.metrics`; this module finds the
tasks, runs them and builds the typed report that `kernelsmith bench --json` prints.

A row is a success only when its status is "correct" AND it carries no integrity flag: a
flagged correct kernel is reported as such but counts as a failure in every metric.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field, computed_field

from kernelsmith.candidate import Candidate
from kernelsmith.errors import CandidateError, TaskError, UserError
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evaluate.result import EvalResult
from kernelsmith.evaluate.verdict import is_success
from kernelsmith.suite import metrics
from kernelsmith.task import Task

ERROR_CHARS = 300
# Statuses of rows whose candidate was never evaluated (their error says why).
NOT_EVALUATED = ("missing", "not_a_candidate", "task_error")
_LEVEL = re.compile(r"^level(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class SuiteTask:
    """One task file of a suite. `level` is "level1", "level2", ... (lower case) or None."""

    rel_path: str
    path: Path
    level: str | None

    @property
    def name(self) -> str:
        """The task's name in records and messages: its relative path without `.py`, so that two
        files of one name in different folders (a/task.py, b/task.py) stay two names."""
        return self.rel_path.removesuffix(".py")


@dataclass(frozen=True)
class SuiteScan:
    """What `scan_suite` found: the tasks, and the .py files that are not tasks (relative paths)."""

    tasks: list[SuiteTask]
    skipped: list[str] = field(default_factory=list)


def _level_of(suite_dir: Path, rel: Path) -> str | None:
    """The KernelBench level a file belongs to: its first directory, or the suite directory itself."""
    if len(rel.parts) > 1 and _LEVEL.match(rel.parts[0]):
        return rel.parts[0].lower()
    if _LEVEL.match(suite_dir.name):
        return suite_dir.name.lower()
    return None


def scan_suite(suite_dir: Path) -> SuiteScan:
    """Every task file under `suite_dir`, sorted by relative path; other .py files go to `skipped`.

    A file is a task when it passes `Task.from_file`'s static check (it parses, and defines
    `Model` and `get_inputs` at top level). `__init__.py` files are skipped as well; files under
    `__pycache__` are not looked at.
    """
    suite_dir = Path(suite_dir)
    if not suite_dir.is_dir():
        raise UserError(f"suite directory not found: {suite_dir}")
    tasks: list[SuiteTask] = []
    skipped: list[str] = []
    files = sorted((p.relative_to(suite_dir) for p in suite_dir.rglob("*.py") if p.is_file()), key=Path.as_posix)
    for rel in files:
        if "__pycache__" in rel.parts:
            continue
        if rel.name == "__init__.py":
            skipped.append(rel.as_posix())
            continue
        try:
            Task.from_file(suite_dir / rel)
        except TaskError:
            skipped.append(rel.as_posix())
            continue
        tasks.append(SuiteTask(rel_path=rel.as_posix(), path=suite_dir / rel, level=_level_of(suite_dir, rel)))
    return SuiteScan(tasks=tasks, skipped=skipped)


def scan_tasks(suite_dir: Path) -> SuiteScan:
    """`scan_suite`, refusing a folder without a task file: a benchmark of nothing is a mistake
    (a wrong path, files that are not tasks), not "0/0 correct"."""
    scan = scan_suite(suite_dir)
    if not scan.tasks:
        n = len(scan.skipped)
        others = f": {n} .py {'file that is not one' if n == 1 else 'files, none of them one'}" if n else ""
        raise UserError(f"{suite_dir} holds no task files (a task file defines Model and get_inputs){others}")
    return scan


class TaskRow(BaseModel):
    """One task's outcome. status: an EvalResult status, or "missing", "not_a_candidate", "task_error".

    `correct` is the evaluator's verdict; `success` (correct and unflagged) is what the metrics count.
    """

    task: str
    level: str | None = None
    status: str
    correct: bool = False
    flags: list[str] = Field(default_factory=list)
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    candidate_ms: float | None = None
    reference_ms: float | None = None
    compile_ms: float | None = None
    floor_ms: float | None = None  # the task's roofline floor on this GPU (None on the CPU)
    error: str | None = None
    task_hash: str | None = None  # of the task as evaluated (after the transform)

    @computed_field
    @property
    def roofline_fraction(self) -> float | None:
        """How close the candidate runs to the physical floor (1.0 = at the roofline)."""
        if self.floor_ms is None or not self.candidate_ms:
            return None
        return self.floor_ms / self.candidate_ms

    @computed_field  # in bench --json's rows, so that scripts need not re-derive it
    @property
    def success(self) -> bool:
        """Correct and without integrity flags: the only rows the metrics count as solved."""
        return is_success(self.status, self.flags)


class Summary(BaseModel):
    """Metrics over a set of rows. Flagged correct rows count as failures everywhere.

    The *_vs_compile fields use the speedup over torch.compile; they are empty/None when no
    successful row has a torch.compile time (on the CPU it is off by default).
    """

    tasks: int
    correct: int
    correct_rate: float
    fast_p: dict[str, float]
    amsr: float
    geomean_speedup: float | None
    fast_p_vs_compile: dict[str, float] = Field(default_factory=dict)
    amsr_vs_compile: float | None = None
    geomean_speedup_vs_compile: float | None = None


def summarize(rows: list[TaskRow]) -> Summary:
    """The suite metrics of `rows` (see kernelsmith.suite.metrics for the definitions)."""
    eager = [(r.success, r.speedup) for r in rows]
    summary = Summary(
        tasks=len(rows),
        correct=sum(1 for r in rows if r.success),
        correct_rate=metrics.correct_rate(eager),
        fast_p=metrics.fast_p_table(eager),
        amsr=metrics.amsr(eager),
        geomean_speedup=metrics.geomean_speedup(eager),
    )
    if any(r.success and r.speedup_vs_compile is not None for r in rows):
        compiled = [(r.success, r.speedup_vs_compile) for r in rows]
        summary.fast_p_vs_compile = metrics.fast_p_table(compiled)
        summary.amsr_vs_compile = metrics.amsr(compiled)
        summary.geomean_speedup_vs_compile = metrics.geomean_speedup(compiled)
    return summary


class BenchReport(BaseModel):
    """A whole suite run: one row per task (in suite order), the summary, and one per level."""

    suite: str
    solutions: str
    device: str
    gpu_name: str | None = None
    rows: list[TaskRow]
    summary: Summary
    levels: dict[str, Summary] = Field(default_factory=dict)
    skipped: list[str] = Field(default_factory=list)

    @classmethod
    def build(
        cls, suite: str, solutions: str, device: str, gpu_name: str | None, rows: list[TaskRow], skipped: list[str]
    ) -> BenchReport:
        levels = sorted({r.level for r in rows if r.level is not None}, key=lambda lv: int(lv[len("level") :]))
        return cls(
            suite=suite,
            solutions=solutions,
            device=device,
            gpu_name=gpu_name,
            rows=rows,
            summary=summarize(rows),
            skipped=skipped,
            levels={lv: summarize([r for r in rows if r.level == lv]) for lv in levels},
        )

    def to_json(self) -> str:
        """One line: the summary's keys at the top level, then the whole report (summary included)."""
        return json.dumps(
            {**self.summary.model_dump(mode="json"), **self.model_dump(mode="json")}, separators=(",", ":")
        )


def _excerpt(text: str | None) -> str | None:
    return text if text is None or len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."


def _row_from_result(st: SuiteTask, result: EvalResult) -> TaskRow:
    return TaskRow(
        task=st.rel_path,
        level=st.level,
        status=result.status.value,
        correct=result.correct,
        flags=[f.value for f in result.flags],
        speedup=result.speedup,
        speedup_vs_compile=result.speedup_vs_compile,
        candidate_ms=result.candidate_ms,
        reference_ms=result.reference_ms,
        compile_ms=result.compile_ms,
        floor_ms=result.floor_ms,
        error=_excerpt(result.error),
        task_hash=result.task_hash,
    )


def _failed(st: SuiteTask, status: str, error: str, task_hash: str | None = None) -> TaskRow:
    return TaskRow(task=st.rel_path, level=st.level, status=status, error=_excerpt(error), task_hash=task_hash)


def _submit(
    st: SuiteTask,
    solutions_dir: Path,
    backend: EvalBackend,
    options: EvalOptions | None,
    transform: Callable[[str], str] | None,
) -> TaskRow | Future:
    """Submit one task's evaluation, or the row that says why it cannot be evaluated."""
    try:
        task = Task.from_file(st.path, st.name)  # read as the scan read it (a byte-order mark dropped)
        if transform is not None:
            task = Task.from_source(transform(task.source), name=task.name, path=task.path)
    except (TaskError, ValueError) as exc:
        # The file changed since the scan, the transform broke the task, or it cannot apply to
        # it (--small: the task declares no CPU_SIZES; never run at full size unsaid).
        return _failed(st, "task_error", str(exc))
    solution = solutions_dir / st.rel_path
    if not solution.is_file():
        return _failed(st, "missing", f"no solution file at {solution}", task.hash)
    try:
        candidate = Candidate.from_file(solution)
    except CandidateError as exc:
        return _failed(st, "not_a_candidate", str(exc), task.hash)
    return backend.submit(task, candidate, options)


def run_bench(
    suite_dir: Path,
    solutions_dir: Path,
    backend: EvalBackend,
    options: EvalOptions | None = None,
    transform: Callable[[str], str] | None = None,
    on_result: Callable[[TaskRow], None] | None = None,
) -> BenchReport:
    """Evaluate the solution of every task of `suite_dir` on `backend` and summarize.

    A task without a solution file is "missing", one whose file has no ModelNew is
    "not_a_candidate"; neither is evaluated, both count as failures. A task that fails to load
    in the evaluator (TaskError) is "task_error" and the others go on. `transform` maps each
    task's source before evaluation (e.g. smaller sizes for the CPU); a task it raises a
    ValueError for is "task_error" with that reason, not evaluated. `on_result` gets each
    row as it completes; the report lists rows in suite order. Flagged correct rows count as
    failures in every metric.
    """
    suite_dir, solutions_dir = Path(suite_dir), Path(solutions_dir)
    if not solutions_dir.is_dir():
        raise UserError(f"solutions directory not found: {solutions_dir}")
    scan = scan_tasks(suite_dir)
    rows: dict[str, TaskRow] = {}
    pending: dict[Future, SuiteTask] = {}

    def done(row: TaskRow) -> None:
        rows[row.task] = row
        if on_result is not None:
            on_result(row)

    for st in scan.tasks:
        item = _submit(st, solutions_dir, backend, options, transform)
        if isinstance(item, TaskRow):
            done(item)
        else:
            pending[item] = st
    results: list[EvalResult] = []
    try:
        for fut in as_completed(pending):
            st = pending[fut]
            try:
                result = fut.result()
            except TaskError as exc:
                done(_failed(st, "task_error", str(exc)))
                continue
            results.append(result)
            done(_row_from_result(st, result))
    except BaseException:  # an evaluator failure (not the task's): stop the queued work, then raise
        for fut in pending:
            fut.cancel()
        raise
    device = results[0].device if results else (options.device if options is not None else "none")
    gpu_name = next((r.gpu_name for r in results if r.gpu_name), None)
    return BenchReport.build(
        suite=str(suite_dir),
        solutions=str(solutions_dir),
        device=device,
        gpu_name=gpu_name,
        rows=[rows[st.rel_path] for st in scan.tasks],
        skipped=scan.skipped,
    )
