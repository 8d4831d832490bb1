"""Where a search starts when no seed is given: on a CUDA GPU, the seed step's candidate (torch.compile's
own code for the task, `kernelsmith seed`), judged like any candidate.

`evolve` and `evolve-suite` call `inductor_start` for a task without a seed, on CUDA, at full size, in
a run directory that holds no run yet (a resumed run keeps its stored start). The seed step runs in
a process of its own (Inductor compiles and autotunes on the GPU there; the search's process stays
free of it). The tuner starts from the seed; an LLM search starts from it only when its verdict is a
success faster than the reference, and otherwise writes the first version itself, as without a seed.
Whatever the seed step cannot do is said in one line and the search goes on as it would without it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from kernelsmith.errors import one_line
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evolve.store import holds_run
from kernelsmith.task import Task

SEED_TIMEOUT_S = 1200.0  # Inductor's compile and autotuning of one task, max-autotune included
SEED_COMMAND = (sys.executable, "-m", "kernelsmith", "seed")


def derive(task_path: Path, command: Sequence[str] = SEED_COMMAND) -> tuple[str | None, str]:
    """(the seed's source, or None; one line saying what happened), from `kernelsmith seed` in its
    own process."""
    with tempfile.TemporaryDirectory(prefix="ks_seed_") as tmp:
        out = Path(tmp) / "seed.py"
        try:
            done = subprocess.run(
                [*command, str(task_path), "--out", str(out)], capture_output=True, text=True, timeout=SEED_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return None, f"no seed from torch.compile: the seed step ran past {SEED_TIMEOUT_S:g} s"
        if done.returncode != 0 or not out.is_file():
            lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
            why = lines[-1].removeprefix("error: ") if lines else f"the seed step exited {done.returncode}"
            return None, one_line(f"no seed from torch.compile: {why}", 300)
        return out.read_text(encoding="utf-8"), "a seed from torch.compile's code (kernelsmith seed)"


def inductor_start(
    task: Task,
    task_path: Path,
    run_dir: Path,
    mutator: str,
    backend: EvalBackend,
    say: Callable[[str], None],
    command: Sequence[str] = SEED_COMMAND,
) -> str | None:
    """The seed a search without one starts from, or None (the search then starts as it would). A run
    directory that holds a run already keeps its stored start: nothing is derived for it."""
    if holds_run(run_dir):
        return None
    code, what = derive(task_path, command)
    if code is None:
        fallback = "the LLM writes the first version" if mutator == "llm" else "the tuner needs --seed"
        say(f"{what}; {fallback}")
        return None
    code, said = llm_judged(task, code, what, mutator, backend)
    say(said)
    return code


def llm_judged(task: Task, code: str, what: str, mutator: str, backend: EvalBackend) -> tuple[str | None, str]:
    """(the seed, or None; one line): the tuner starts from any seed; an LLM search only from one whose
    verdict is a success faster than the reference (else the LLM writes the first version)."""
    if mutator == "llm":
        verdict = backend.submit(task, code).result()
        speedup = verdict.speedup or 0.0
        if not (verdict.success and speedup > 1.0):
            got = f"{speedup:.3g}x the reference" if verdict.success else f"not a success ({verdict.status.value})"
            return None, f"{what} is {got}: the LLM writes the first version"
    return code, f"starting from {what}"
