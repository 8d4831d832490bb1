"""Seeds of our own for the regions capture fuses across the library boundary (issue 57), which Inductor does
not fuse: Triton kernels the project writes, made a starting candidate for a captured fused task.

terms.py reads the task's forward as terms (a norm, a SiLU-mul, a GEMM with its weight); gemv_glue.py plans a
GEMV with its prologue and epilogue from them and writes its ModelNew; gemv_kernels.py holds the GEMV's Triton
kernels, whose text a seed carries. `fused_seed(task_path)` is the one entry: the seed's source, or None for a
task it does not know. It imports only kernelsmith.seed.fused's own modules (no triton: a seed is text).
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelsmith.seed.fused.gemv_glue import model_new, plan_of, sizes
from kernelsmith.seed.fused.terms import read_forward

__all__ = ["FUSED_KINDS", "fused_kind", "fused_seed"]

FUSED_KINDS = ("prologue", "prologue+siblings", "epilogue", "siblings", "siblings+epilogue")
_HERE = Path(__file__).parent


def fused_kind(source: str) -> str | None:
    """The task's fused kind from its header line (`Fused: KIND, across the library boundary: ...`)."""
    found = re.search(r"^Fused: ([\w+]+), across the library boundary", source, re.M)
    return found[1] if found else None


def _kernels(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


def fused_seed(task_path: Path) -> str | None:
    """The seed's source for a captured fused task (the task's own source, our kernels, a ModelNew), or None for
    a task of another kind or with ops these kernels do not compute."""
    source = Path(task_path).read_text(encoding="utf-8")
    kind = fused_kind(source)
    if kind not in FUSED_KINDS:
        return None
    fwd = read_forward(source)
    plan = plan_of(fwd) if fwd is not None else None
    size = sizes(source, plan) if plan is not None else None
    glue = model_new(fwd, plan, size) if fwd is not None and plan is not None and size is not None else None
    if glue is None:
        return None
    return source.rstrip() + "\n\n\n" + _kernels("gemv_kernels.py") + glue
