"""The seed step: a task -> Inductor's code for it on the GPU -> a self-contained candidate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelsmith.errors import UserError
from kernelsmith.seed.assemble import candidate_source
from kernelsmith.seed.errors import NoOwnKernel
from kernelsmith.seed.record import InductorRecord
from kernelsmith.task import Task

NO_GPU = "seed needs a CUDA GPU (Inductor compiles the task for it), and none is visible here"


@dataclass(frozen=True)
class Seed:
    source: str
    record: InductorRecord
    max_autotune: bool  # Inductor's default code had no Triton kernel; its max-autotune code has


def seed_task(task: Task, record_dir: Path | None = None) -> Seed:
    """A seed candidate for `task`; a UserError (SeedError) says in one line why there is none.

    Where Inductor's default code is library calls only (a plain GEMM or convolution), its
    max-autotune code, whose Triton templates are kernels of its own, is tried next."""
    from kernelsmith.evaluate.pool import visible_gpus

    if not visible_gpus():
        raise UserError(NO_GPU)
    from kernelsmith.seed.inductor import record_task

    record = record_task(task)
    try:
        seed = Seed(candidate_source(record, task), record, False)
    except NoOwnKernel:
        record = record_task(task, max_autotune=True)
        seed = Seed(candidate_source(record, task), record, True)
    if record_dir is not None:
        record.save(record_dir)
    return seed
