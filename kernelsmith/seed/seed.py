"""The seed step: a task -> Inductor's code for it on the GPU -> a self-contained candidate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernelsmith.errors import UserError
from kernelsmith.seed.assemble import candidate_source
from kernelsmith.seed.errors import NoOwnKernel, SeedError
from kernelsmith.seed.record import InductorRecord
from kernelsmith.task import Task

NO_GPU = "seed needs a CUDA GPU (Inductor compiles the task for it), and none is visible here"


@dataclass(frozen=True)
class Seed:
    source: str
    record: InductorRecord
    templates: bool  # Inductor's default code had no Triton kernel; its code with Triton templates forced has


def seed_task(task: Task, record_dir: Path | None = None) -> Seed:
    """A seed candidate for `task`; a UserError (SeedError) says in one line why there is none.

    Where Inductor's default code is library calls only (a plain GEMM or convolution), its code with
    its Triton templates as the only GEMM and convolution backends is tried next (TRITON_TEMPLATES)."""
    from kernelsmith.evaluate.pool import visible_gpus

    if not visible_gpus():
        raise UserError(NO_GPU)
    from kernelsmith.seed.inductor import record_task

    record = record_task(task)
    try:
        seed = Seed(candidate_source(record, task), record, False)
    except NoOwnKernel:
        seed = with_templates(task, lambda: record_task(task, templates=True))
    if record_dir is not None:
        seed.record.save(record_dir)
    return seed


def with_templates(task: Task, record: Callable[[], InductorRecord]) -> Seed:
    """The second try, from `record` (Inductor's code with its Triton templates forced); a SeedError
    names the options tried and why nothing came of them."""
    from kernelsmith.seed.inductor import TEMPLATES_SAID

    default = "Inductor's default code launches no Triton kernel (library calls only)"
    try:
        forced = record()
        return Seed(candidate_source(forced, task), forced, True)
    except NoOwnKernel:
        raise NoOwnKernel(
            f"{default}, nor does its code with its Triton templates forced ({TEMPLATES_SAID}): a library call "
            "it keeps has no template (attention, for one)"
        ) from None
    except SeedError as exc:
        raise SeedError(f"{default}; with its Triton templates forced ({TEMPLATES_SAID}): {exc}") from None
