"""`kernelsmith evolve-suite`: the same search budget for every task of a suite, then one report.

This is the unified protocol of Kernel-Smith (the same number of rounds per task, 40 by
default). Each task's run lives in RUNS_DIR/<task path without .py>, so rerunning resumes every
run where it stopped; the best program of each run is copied to RUNS_DIR/solutions/<task path>
and the suite is then benchmarked on those files with fresh evaluations, like `kernelsmith
bench`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from kernelsmith.candidate import Candidate
from kernelsmith.errors import UserError
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evolve.config import EvolveConfig
from kernelsmith.evolve.run import ReportWriter, run_evolve
from kernelsmith.llm import LLMError
from kernelsmith.progress import LiveProgress
from kernelsmith.suite.bench import BenchReport, run_bench, scan_tasks
from kernelsmith.task import Task
from kernelsmith.task_sizes import load_task, small_source

REPORT_NAME = "suite_report.json"


# (task, its file, its run directory, say) -> the seed to start from, or None
StartFor = Callable[[Task, Path, Path, Callable[[str], None]], str | None]


def task_run_dir(runs_dir: Path, rel_path: str) -> Path:
    """Where the search of the suite's task at `rel_path` lives: RUNS_DIR/<task path without .py>."""
    return Path(runs_dir) / Path(rel_path).with_suffix("")


def evolve_suite(
    suite_dir: Path,
    seeds_dir: Path | None,
    runs_dir: Path,
    cfg: EvolveConfig,
    small: bool,
    backend: EvalBackend,
    say: Callable[[str], None],
    view: LiveProgress | None = None,
    write_report: ReportWriter | None = None,
    start: StartFor | None = None,
) -> BenchReport:
    """Search every task of `suite_dir`, then bench the best programs. `start` gives the seed of a
    task that has none in `seeds_dir` (or None: the search starts as it would without one)."""
    tasks = scan_tasks(suite_dir).tasks
    if seeds_dir is not None and not seeds_dir.is_dir():
        raise UserError(f"--seeds {seeds_dir} is not a folder")
    solutions = runs_dir / "solutions"
    shutil.rmtree(solutions, ignore_errors=True)  # rebuilt from the runs: no stale best of a removed task
    for n, st in enumerate(tasks, 1):
        say(f"[bold]task {n}/{len(tasks)}: {st.rel_path}[/]")
        seed_path = seeds_dir / st.rel_path if seeds_dir is not None else None
        run_dir = task_run_dir(runs_dir, st.rel_path)
        try:
            task = load_task(st.path, small, st.name)
            seed = Candidate.from_file(seed_path).source if seed_path is not None and seed_path.is_file() else None
            if seed is None and start is not None:
                seed = start(task, st.path, run_dir, say)
            run_evolve(task, seed, cfg, run_dir, say, backend, view, write_report)
        except LLMError:
            raise  # the endpoint is down for every task alike
        except UserError as exc:  # this task cannot be searched (no seed for the tuner, a broken task...)
            say(f"[yellow]{st.rel_path}: skipped: {exc}[/]")
            continue
        best = run_dir / "best.py"
        if best.is_file():
            target = solutions / st.rel_path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(best, target)
    solutions.mkdir(parents=True, exist_ok=True)
    say("benchmarking the best program of every task")
    report = run_bench(suite_dir, solutions, backend, transform=small_source if small else None)
    (runs_dir / REPORT_NAME).write_text(report.to_json() + "\n")
    return report
