"""flashinfer-bench (fib) in and out: the serving engines' kernel format (docs/ecosystem.md).

In (`kernelsmith import-fib`, importing.py): a flashinfer-trace dataset (layout.py reads it) becomes
KernelBench-format tasks, one per workload (task_text.py), and its Solutions candidates the evaluator
judges as any other (candidate_text.py). Out (`kernelsmith export-fib`, exporting.py): a task becomes a
Definition and its Workloads (probe.py runs it, axes.py names its dimensions, reference.py and
definition_out.py write them, reference_check.py runs the reference at each workload; imported_out.py
gives an imported task back as it came), a run's best
kernel a Solution and its verdict a Trace (solution_out.py, trace_out.py), written into
flashinfer-bench's folder layout (writer.py). shim.py writes the `run(...)` a reference and a Solution are
called by; codegen.py and dtypes.py are the small pieces both directions share.

The schema is flashinfer-bench's own pydantic models (`flashinfer_bench.data`), and where it has a helper
this package uses it (its dtype map, `gen_inputs`, `load_safetensors`, `resolve_evaluator`,
`var_axes_bindings`, ApplyConfig), imported by the modules that need them; `require()` says in one line
when flashinfer-bench is not installed (the `flashinfer` extra is optional). May import task,
candidate, task_sizes, identity, evaluate's records, evolve's store and capture's outdir.
"""

from __future__ import annotations

from kernelsmith.errors import UserError

__all__ = ["require"]


def require() -> None:
    """A UserError (one line) unless what this package takes from flashinfer-bench imports: its schema, its
    input drawing and blob checks (bench.utils), its choice of evaluator, its apply() config."""
    try:
        import flashinfer_bench.apply.config  # noqa: F401
        import flashinfer_bench.bench.evaluators  # noqa: F401
        import flashinfer_bench.bench.utils  # noqa: F401
        import flashinfer_bench.data  # noqa: F401
    except ImportError as exc:
        raise UserError(f"flashinfer-bench is not installed ({exc}): pip install 'kernelsmith[flashinfer]'") from None
