"""A task `kernelsmith import-fib` wrote, exported back: the Definition it carries (FIB_DEFINITION, with the
reference it holds) and its workload (FIB_WORKLOAD). A run at other sizes (--small shrank its var axes) is
still a run on that workload: its Trace goes there, and its log says at which sizes it was judged (a made-up
workload beside the dataset's would leave the dataset's own without a Trace). Its safetensors inputs are
written from the values its get_inputs() gives them, at the workload's own paths."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import torch
from flashinfer_bench.data import Definition, Workload
from pydantic import ValidationError

from kernelsmith.fib.dtypes import TaskFails, Unmappable
from kernelsmith.fib.exported import Exported, module_ints, module_string, reference_of
from kernelsmith.fib.layout import blob_path, why_invalid
from kernelsmith.fib.probe import load
from kernelsmith.fib.shim import Binding
from kernelsmith.fib.task_text import BLOBS_ENV, axis_consts


@contextmanager
def _blobs_in(folder: Path | None):
    """The task file's folder among those where its _blob() looks (it runs from a copy elsewhere here)."""
    before = os.environ.get(BLOBS_ENV)
    if folder is not None:
        os.environ[BLOBS_ENV] = os.pathsep.join(f for f in (before, str(folder)) if f)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(BLOBS_ENV, None)
        else:
            os.environ[BLOBS_ENV] = before


def _blobs(source: str, definition: Definition, workload: Workload, folder: Path | None) -> tuple[Workload, dict]:
    """The workload's safetensors inputs, from the task's own get_inputs() (seed 0): they are constants there."""
    wanted = {n: s for n, s in workload.inputs.items() if s.type == "safetensors"}
    if not wanted:
        return workload, {}
    try:
        task = load(source)
        torch.manual_seed(0)
        with _blobs_in(folder):
            drawn = task.get_inputs()
    except Exception as exc:  # noqa: BLE001 - the imported task's code (which its user may have edited)
        raise TaskFails(f"task of {definition.name}: get_inputs() raises {type(exc).__name__}: {exc}") from None
    tensors = dict(zip([n for n, s in definition.inputs.items() if s.shape is not None], drawn))
    blobs: dict[str, dict[str, torch.Tensor]] = {}
    inputs = dict(workload.inputs)
    for name, spec in wanted.items():
        path = spec.path
        if Path(path).is_absolute():  # a dataset's own path elsewhere: the export writes its own copy
            path = blob_path(definition.op_type, definition.name, workload.uuid)
            inputs[name] = spec.model_copy(update={"path": path})
        blobs.setdefault(path, {})[spec.tensor_key] = tensors[name].detach().contiguous()
    return workload.model_copy(update={"inputs": inputs}), blobs


def _carried(source: str) -> tuple[Definition, Workload]:
    """The Definition and workload an imported task carries; TaskFails when they were edited out of shape."""
    try:
        described = json.loads(module_string(source, "FIB_DEFINITION") or "{}")
        definition = Definition.model_validate({**described, "reference": reference_of(source)})
        return definition, Workload.model_validate_json(module_string(source, "FIB_WORKLOAD") or "{}")
    except ValidationError as exc:
        raise TaskFails(f"its FIB_DEFINITION or FIB_WORKLOAD is not flashinfer-bench's: {why_invalid(exc)}") from None
    except (ValueError, SyntaxError) as exc:  # not JSON; reference markers gone
        raise TaskFails(f"its FIB_DEFINITION or reference cannot be read: {exc}") from None


def export_imported(source: str, folder: Path | None = None) -> Exported:
    """The Definition and workload the imported task `source` carries (its file in `folder`, where the
    blobs it reads are; a run's stored task has none: they are found through $KERNELSMITH_FIB_BLOBS)."""
    definition, workload = _carried(source)
    consts = axis_consts(definition)
    ints = module_ints(source)
    axes = {a: ints[consts[a]] for a in definition.var_axes if consts[a] in ints}
    moved = {a: v for a, v in axes.items() if v != workload.axes.get(a)}
    notes = {}
    if moved:  # a run at other sizes (--small): its verdict is said on the dataset's own workload
        _check_unfiled(definition, workload, moved)
        at = ", ".join(f"{a}={v}" for a, v in moved.items())
        was = ", ".join(f"{a}={workload.axes.get(a)}" for a in moved)
        notes[0] = f"judged at {at} (the task cut to other sizes, as --small does), not at this workload's {was}"
    workload, blobs = _blobs(source, definition, workload, folder)
    scalars = [n for n, s in definition.inputs.items() if s.shape is None]
    bindings = definition.var_axes_bindings
    binding = Binding(
        cls="ModelNew",
        inputs=list(definition.inputs),
        init="[" + ", ".join(f"args[{n!r}]" for n in scalars) + "]",
        activations=[n for n, s in definition.inputs.items() if s.shape is not None],
        axes={consts[a]: bindings[a] for a in definition.var_axes if a in bindings},
    )
    return Exported(definition, [workload], [source], binding, blobs, notes)


def _check_unfiled(definition: Definition, workload: Workload, moved: dict[str, int]) -> None:
    """Unmappable when an axis that moved is one a safetensors input has (its file holds other sizes)."""
    for name, spec in workload.inputs.items():
        shape = definition.inputs[name].shape or []
        if spec.type == "safetensors" and set(shape) & set(moved):
            raise Unmappable(
                f"task of {definition.name}: its {', '.join(sorted(set(shape) & set(moved)))} is not the workload's, "
                f"and input {name} comes from a file of the workload's sizes"
            )
