"""An exported reference checked at every workload before anything is written (`kernelsmith export-fib`).

Where a workload is small enough to run on the CPU and the task's own code runs there, the reference's
outputs must be the task's Model's on the same inputs and weights, bit for bit. Every other workload is run
on the meta device, its inputs drawn by flashinfer-bench's own `gen_inputs`: the reference must run there
and give the outputs the Definition declares, in shape and dtype (a model built at another workload's
sizes fails here: LayerNorm(1500) on 8192 columns). A workload whose task itself runs only for real (an op
without a meta kernel) and is too large to run is left unchecked.
"""

from __future__ import annotations

from types import ModuleType

import torch
from flashinfer_bench.bench.utils import gen_inputs
from flashinfer_bench.data import Definition, Workload

from kernelsmith.errors import one_line
from kernelsmith.fib.dtypes import Unmappable
from kernelsmith.fib.probe import REAL_LIMIT, Run, elements, load

REAL_ELEMENTS = REAL_LIMIT // 16  # a workload run for real on the CPU, against the task's Model, up to this


def check_reference(definition: Definition, sources: list[str], runs: list[Run], workloads: list[Workload], where: str):
    """Unmappable, saying at which workload and why, unless the reference runs right at each one."""
    try:
        reference = load(definition.reference)
    except Exception as exc:  # noqa: BLE001 - the task's module code without its var axes' constants
        said = f"{type(exc).__name__}: {one_line(str(exc), 200)}"
        raise Unmappable(
            f"{where}: the exported reference does not load ({said}): its module code computes with a constant "
            "that follows the workload's sizes, which run() sets only when called"
        ) from None
    for source, run, workload in zip(sources, runs, workloads):
        if elements(run) <= REAL_ELEMENTS and _same_outputs(reference, source, run, where):
            continue
        if run.on_meta:
            _runs_on_meta(reference, definition, workload, where)


def _as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _same_outputs(reference: ModuleType, source: str, run: Run, where: str) -> bool:
    """Whether the reference's outputs are the task's Model's (Unmappable when not); False when the task's
    own code does not run on this host's CPU (a GPU capture's attention may be a CUDA-only op)."""
    task = load(source)
    try:
        torch.manual_seed(0)
        model = task.Model(*(task.get_init_inputs() if hasattr(task, "get_init_inputs") else []))
        torch.manual_seed(1)
        inputs = list(task.get_inputs())
        with torch.no_grad():
            want = model(*inputs)
    except Exception:  # noqa: BLE001 - the task's own code, which probe.py ran on the meta device
        return False
    weights = dict(model.named_parameters()) | dict(model.named_buffers())
    by_name: dict = dict(zip([v.name for v in run.inputs if v.role == "activation"], inputs))
    for v in run.inputs:
        if v.role == "weight":
            by_name[v.name] = weights[v.path].detach()
        elif v.role == "attr":
            by_name[v.name] = v.scalar
    try:
        with torch.no_grad():
            got = reference.run(*[by_name[v.name] for v in run.inputs])
    except Exception as exc:  # noqa: BLE001 - the task's code, run as the reference runs it
        raise Unmappable(f"{where}: run() of the exported reference fails: {type(exc).__name__}: {exc}") from None
    want, got = _as_tuple(want), _as_tuple(got)
    if len(want) != len(got) or not all(torch.equal(a, b) for a, b in zip(want, got)):
        raise Unmappable(f"{where}: run() of the exported reference does not give the task's outputs on its inputs")
    return True


def _runs_on_meta(reference: ModuleType, definition: Definition, workload: Workload, where: str) -> None:
    at = ", ".join(f"{a}={v}" for a, v in workload.axes.items()) or "its const axes"
    shapes = dict(zip(definition.inputs, definition.get_input_shapes(workload.axes)))
    dtypes = dict(zip(definition.inputs, definition.torch_input_dtypes))
    files = {  # a safetensors input's values do not matter on the meta device, only its shape
        name: torch.empty(shapes[name] or (), dtype=dtypes[name], device="meta")
        for name, spec in workload.inputs.items()
        if spec.type == "safetensors"
    }
    try:
        with torch.no_grad():
            got = _as_tuple(reference.run(*gen_inputs(definition, workload, "meta", files)))
    except Exception as exc:  # noqa: BLE001 - the task's code, run as the reference runs it
        said = f"{type(exc).__name__}: {one_line(str(exc), 200)}"
        raise Unmappable(f"{where}: run() of the exported reference fails at {at}: {said}") from None
    shapes = definition.get_output_shapes(workload.axes)
    want = [(list(s or []), d) for s, d in zip(shapes, definition.torch_output_dtypes)]
    have = [(list(g.shape), g.dtype) if isinstance(g, torch.Tensor) else (type(g).__name__, None) for g in got]
    if have != want:
        raise Unmappable(
            f"{where}: run() of the exported reference gives {have} at {at}, where the Definition says {want}"
        )
