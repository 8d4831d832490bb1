"""A run's best kernel as a flashinfer-bench Solution, and its verdict as a Trace.

The Solution is one file, main.py: the kernel's code as the search stored it (its ModelNew, Triton
kernels or CUDA C++ that torch's load_inline builds when the file is imported) and `run(...)` after it
(shim.py), which takes the Definition's inputs, puts the weights into ModelNew in place of its own, and
calls forward. A Triton kernel is language `triton`; a load_inline kernel is language `python` (its
CUDA C++ is built by the Python file; flashinfer-bench's `cuda` language wants a .cu entry symbol of the
Definition's signature, which a ModelNew's extension function is not). `run` returns the outputs
(destination_passing_style false), or with `dps` copies them into the outputs it is given.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from pathlib import Path

from flashinfer_bench.data import Solution, Trace

from kernelsmith import __version__
from kernelsmith.candidate import analyze
from kernelsmith.evaluate.result import EvalResult
from kernelsmith.evolve.program import Program
from kernelsmith.fib.exported import Exported
from kernelsmith.fib.shim import shim
from kernelsmith.fib.trace_out import evaluation
from kernelsmith.identity import program_hash
from kernelsmith.task import top_level_names


@dataclass
class FromRun:
    run_dir: str
    program: int | None
    solution: Solution
    trace: Trace | None  # None: the stored program has no verdict record
    note: str | None = None  # the sizes it was judged at, where they are not its workload's


def entry_name(code: str) -> str:
    """`run`, unless the kernel's own code binds it (a Solution imported and searched on keeps its run)."""
    try:
        names = top_level_names(ast.parse(code))
    except SyntaxError:
        names = {}
    name = "run"
    while name in names:
        name = "kernelsmith_" + name
    return name


def solution_of(exported: Exported, best: Program, run_dir: Path, author: str, dps: bool) -> Solution:
    code = best.code or ""
    facts = analyze(code)
    language = "triton" if facts.triton_kernels else "python"
    entry = entry_name(code)
    outputs = list(exported.definition.outputs) if dps else None
    binding = replace(exported.binding, cls="ModelNew", build_on_meta=False, entry=entry, outputs=outputs)
    result = EvalResult.model_validate(best.eval) if best.eval else None
    gpu = result.gpu_name if result is not None and result.device == "cuda" else None
    name = re.sub(r"\W", "_", f"{exported.definition.name}_kernelsmith_{program_hash(code)[:8]}")
    speed = f", {best.speedup:.3g}x over the task's reference" if best.speedup is not None else ""
    where = f"on {gpu}" if gpu else "on the CPU (Triton's interpreter)" if result is not None else ""
    return Solution.model_validate(
        dict(
            name=name,
            definition=exported.definition.name,
            author=author,
            description=(
                f"kernelsmith: program {best.id} (iteration {best.iteration}, {best.operator}) of the search in "
                f"{run_dir}; its verdict {best.status}{speed} {where}".rstrip()
            ),
            spec=dict(
                language=language,
                target_hardware=[gpu or "cuda"],
                entry_point=f"main.py::{entry}",
                dependencies=["torch", "triton"] if language == "triton" else ["torch", "ninja"],
                destination_passing_style=dps,
            ),
            sources=[dict(path="main.py", content=code.rstrip() + "\n" + shim(binding))],
        )
    )


def from_run(exported: Exported, k: int, best: Program, run_dir: Path, author: str, dps: bool) -> FromRun:
    """The Solution of a run's best program, and the Trace of its verdict on the exported task's workload `k`
    (the one it was judged on, or the dataset's own that a --small run stands for: its note says so)."""
    solution = solution_of(exported, best, run_dir, author, dps)
    workload, note = exported.workloads[k], exported.notes.get(k)
    trace = None
    if best.eval:
        result = EvalResult.model_validate(best.eval)
        trace = Trace(
            definition=exported.definition.name,
            workload=workload,
            solution=solution.name,
            evaluation=evaluation(result, best.created_at or None, {"kernelsmith": __version__}, note),
        )
    return FromRun(str(run_dir), best.id, solution, trace, note)
