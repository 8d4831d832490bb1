"""A run's starting program (iteration 0): a --seed that differs from the stored one, a start the
tuner cannot work from, and what a run that failed at start-up leaves behind (nothing).

A run whose start failed must be fixable by fixing the seed file and running the same command
again: while no iteration after the start is stored, a --seed other than the stored start (up to
formatting: `kernelsmith.identity`) replaces it. Once iterations are stored, a different --seed
is refused in one line, never silently ignored.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelsmith.errors import UserError, one_line
from kernelsmith.evaluate.result import Status
from kernelsmith.evolve.program import NO_PROGRAM, Program
from kernelsmith.evolve.store import STORE_NAME, RunStore, holds_run
from kernelsmith.identity import program_hash
from kernelsmith.progress import counted
from kernelsmith.task import Task
from kernelsmith.task_sizes import ADD_SMALL, FULL_SIZE_ON_CPU, full_size_on_cpu

# What a run directory holds besides user files: removed with the store of a run that never started.
RUN_FILES = (STORE_NAME, STORE_NAME + "-wal", STORE_NAME + "-shm", "best.py", "summary.json", "report.html")

_WENT_WRONG = {
    Status.compile_error.value: "does not compile",
    Status.runtime_error.value: "raises an error when run",
    Status.incorrect.value: "gives wrong outputs",
    Status.timeout.value: "ran out of time",
    Status.rejected.value: "was rejected before it ran",
    NO_PROGRAM: "holds no program",
}
REASON_CHARS = 400


def _start_words(start: Program) -> str:
    return f"the seed (program #{start.id})" if start.operator == "seed" else f"the start (program #{start.id})"


def use_seed(store: RunStore, seed_code: str) -> bool:
    """Whether the stored start is replaced by `seed_code` (deleted here; the caller evaluates the
    seed as iteration 0). A UserError when iterations after a different start are stored."""
    start = store.at_iteration(0)
    if start is None or (start.code is not None and program_hash(start.code) == program_hash(seed_code)):
        return False
    after = len(store.iterations() - {0})
    if after:
        raise UserError(
            f"{store.run_dir} started from {_start_words(start)} and holds {counted(after, 'iteration')} after it; "
            "this --seed is another program: resume the run with the same --seed or none, "
            "or choose another --run-dir to start from this seed"
        )
    store.remove_start()
    (store.run_dir / "best.py").unlink(missing_ok=True)  # it may be the replaced start
    return True


def error_reason(error: str | None) -> str:
    """The line of an evaluator's error that says what went wrong, as one line: a traceback's
    exception (its last line that is not indented), else the first line; an exception's module
    path dropped (`InterpreterError`, not `triton.runtime.errors.InterpreterError`)."""
    lines = [ln.rstrip() for ln in (error or "").splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[0]
    if line.startswith("Traceback"):
        raised = [ln for ln in lines if not ln[0].isspace() and not ln.startswith(("Traceback", "The above", "During"))]
        line = raised[-1] if raised else lines[-1]
    return one_line(re.sub(r"^(?:\w+\.)+(\w+:)", r"\1", " ".join(line.split())), REASON_CHARS)


def tuner_start_failure(start: Program | None, task: Task | None = None, on_cpu: bool = False) -> str:
    """Why the tuner alone cannot go on from this start, and what to do: one sentence. A start that ran
    out of time `on_cpu` on a task run at full size (it declares CPU_SIZES) is told to add --small: the
    size, not the seed, is what to fix."""
    if start is None:
        return "the tuner alone needs a correct starting program and none is stored: give --seed"
    if start.status == Status.correct.value:
        what = f"is correct but flagged ({', '.join(start.flags)}), which is not a success"
    else:
        what = _WENT_WRONG.get(start.status, f"ended {start.status}")
    reason = error_reason(start.error)
    fix = "fix the seed file" if start.operator == "seed" else "give a correct --seed"
    fix += " and run the same command again"
    if (
        start.status == Status.timeout.value
        and task is not None
        and full_size_on_cpu(task, "cpu" if on_cpu else "cuda")
    ):
        fix = f"the task {FULL_SIZE_ON_CPU}: {ADD_SMALL} and run the command again"
    return (
        f"the tuner alone needs a correct starting program, and {_start_words(start)} {what}"
        + (f": {reason}" if reason else "")
        + f"; {fix}"
    )


class StartFiles:
    """Which run files existed before this run, so that a run that never started removes only its own."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.dir_existed = run_dir.is_dir()
        self.store_existed = holds_run(run_dir)
        self.existed = {name for name in RUN_FILES if (run_dir / name).exists()}

    def never_started(self, store: RunStore) -> bool:
        """No iteration after the start is stored, and no start worth keeping: none, or a seed that
        is not a success (the user's file makes it again; an LLM's translation cost tokens)."""
        if store.iterations() - {0}:
            return False
        start = store.at_iteration(0)
        return start is None or (start.operator == "seed" and not start.ok)

    def discard(self, store: RunStore) -> bool:
        """Remove the store (and the run files it made) of a run that never started; True if removed."""
        if not self.never_started(store):
            return False
        store.close()
        for name in RUN_FILES:  # a file of this run: the store was there before, or the file was not
            if self.store_existed or name not in self.existed:
                (self.run_dir / name).unlink(missing_ok=True)
        if not self.dir_existed or self.store_existed:
            try:
                self.run_dir.rmdir()  # only when empty: other files are the user's
            except OSError:
                pass
        return True
