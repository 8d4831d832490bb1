"""A task `kernelsmith import-fib` wrote, exported back: the Definition it carries (FIB_DEFINITION, with the
reference it holds) and its workload (FIB_WORKLOAD), at the sizes its constants have (a run with --small
shrank its var axes: that is another workload, its uuid derived from its content). Its safetensors inputs
are written from the values its get_inputs() gives them, at the workload's own paths."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import torch
from flashinfer_bench.data import Definition, Workload

from kernelsmith.fib.definition_out import NAMESPACE
from kernelsmith.fib.exported import Exported, module_ints, module_string, reference_of
from kernelsmith.fib.layout import blob_path
from kernelsmith.fib.probe import load
from kernelsmith.fib.shim import Binding
from kernelsmith.fib.task_text import axis_consts


def _blobs(source: str, definition: Definition, workload: Workload) -> tuple[Workload, dict]:
    """The workload's safetensors inputs, from the task's own get_inputs() (seed 0): they are constants there."""
    wanted = {n: s for n, s in workload.inputs.items() if s.type == "safetensors"}
    if not wanted:
        return workload, {}
    task = load(source)
    torch.manual_seed(0)
    tensors = dict(zip([n for n, s in definition.inputs.items() if s.shape is not None], task.get_inputs()))
    blobs: dict[str, dict[str, torch.Tensor]] = {}
    inputs = dict(workload.inputs)
    for name, spec in wanted.items():
        path = spec.path
        if Path(path).is_absolute():  # a dataset's own path elsewhere: the export writes its own copy
            path = blob_path(definition.op_type, definition.name, workload.uuid)
            inputs[name] = spec.model_copy(update={"path": path})
        blobs.setdefault(path, {})[spec.tensor_key] = tensors[name].detach().contiguous()
    return workload.model_copy(update={"inputs": inputs}), blobs


def export_imported(source: str) -> Exported:
    described = json.loads(module_string(source, "FIB_DEFINITION") or "{}")
    definition = Definition.model_validate({**described, "reference": reference_of(source)})
    workload = Workload.model_validate_json(module_string(source, "FIB_WORKLOAD") or "{}")
    consts = axis_consts(definition)
    ints = module_ints(source)
    axes = {a: ints[consts[a]] for a in definition.var_axes if consts[a] in ints}
    if axes != {a: workload.axes[a] for a in axes}:
        key = json.dumps([definition.name, axes, workload.model_dump(mode="json")["inputs"]], sort_keys=True)
        workload = Workload(uuid=str(uuid.uuid5(NAMESPACE, key)), axes=axes, inputs=workload.inputs)
    workload, blobs = _blobs(source, definition, workload)
    scalars = [n for n, s in definition.inputs.items() if s.shape is None]
    bindings = definition.var_axes_bindings
    binding = Binding(
        cls="ModelNew",
        inputs=list(definition.inputs),
        init="[" + ", ".join(f"args[{n!r}]" for n in scalars) + "]",
        activations=[n for n, s in definition.inputs.items() if s.shape is not None],
        axes={consts[a]: bindings[a] for a in definition.var_axes if a in bindings},
    )
    return Exported(definition, [workload], [source], binding, blobs)
