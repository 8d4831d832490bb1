"""A task as a flashinfer-bench Definition and its Workloads (`kernelsmith export-fib`).

A task's workloads are its sizes: as written, and cut to its CPU_SIZES where it declares them (`small`:
that one alone). Each is probed (probe.py), the axes named from how the sizes move (axes.py), and the
reference is the task's own code with `run(...)` after it (reference.py, shim.py). Its inputs, in the
Definition's order: forward's arguments, Model's parameters and buffers (the weights), the float
attributes its ops read (an eps); a Workload draws floats at random and carries integers, booleans and
buffers as safetensors (their values are indices, masks, statistics). The model's constructor arguments
follow the workload's sizes (axes.init_code). Before anything is written, the reference is checked at
every workload (reference_check.py): the task's Model's outputs, bit for bit, where it runs on the CPU,
and on the meta device the Definition's outputs elsewhere; or the task is not exported. (A task imported
from flashinfer-bench exports as it came: imported_out.py.)
"""

from __future__ import annotations

import ast
import json
import re
import uuid

from flashinfer_bench.data import Definition, Workload

from kernelsmith.fib.axes import Axes, init_code, name_axes, probe_sizes
from kernelsmith.fib.dtypes import TaskFails, Unmappable
from kernelsmith.fib.exported import Exported, module_ints
from kernelsmith.fib.layout import blob_path
from kernelsmith.fib.probe import Run, elements, probe
from kernelsmith.fib.reference import reference_text
from kernelsmith.fib.reference_check import check_reference
from kernelsmith.fib.shim import Binding, shim
from kernelsmith.task_sizes import read_cpu_sizes, shrink

NAMESPACE = uuid.UUID("6b1d3a52-0c0e-4f59-9d1e-7e6f5a3c2b10")  # workload uuids: uuid5 of the workload's content
_DATA_DEPENDENT = re.compile(r"^Note: data-dependent: (.*)$", re.MULTILINE)


def _used_in_code(source: str, name: str) -> bool:
    """Whether `name` is read anywhere but get_inputs, get_init_inputs and CPU_SIZES."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in ("get_inputs", "get_init_inputs"):
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node)):
                return True
    return False


def sizes_of(source: str, small: bool) -> list[str]:
    """The task's source at each of its workload sizes: as written and cut to its CPU_SIZES."""
    cut = shrink(source) if read_cpu_sizes(source) else source
    if small:
        return [cut]
    return [source] if cut == source else [source, cut]


def _probe_run(source: str, varying: list[str], cpu: dict[str, int], runs: list[Run], where: str):
    seen = {d for r in runs for v in r.inputs + r.outputs for d in v.shape or ()}
    sizes = probe_sizes(cpu, varying, seen)
    if sizes is None:
        return None
    probed = shrink(source + f"\nCPU_SIZES = {sizes!r}\n")
    try:
        return probe(probed, where, values=False), module_ints(probed)
    except Exception:  # noqa: BLE001 - a task whose sizes do not take other values: the pairs alone decide
        return None


def _literal_init(init: list, where: str) -> list:
    for v in init:
        try:
            ok = ast.literal_eval(repr(v)) == v
        except (ValueError, SyntaxError):
            ok = False
        if not ok:
            raise Unmappable(f"{where}: get_init_inputs() gives {type(v).__name__} {v!r}, which run() cannot rebuild")
    return init


def _spec(v, axes: Axes, role: str) -> dict:
    says = {
        "activation": f"forward's argument {v.path}",
        "weight": f"Model's {'buffer' if v.buffer else 'parameter'} {v.path}",
        "attr": f"Model's float attribute {v.path}, read by its ops",
        "output": f"forward's output {v.path}",
    }[role]
    return {"shape": axes.shapes[v.name] if v.shape is not None else None, "dtype": v.dtype, "description": says}


def _workload(definition: Definition, run: Run, values: dict[str, int], blobs: dict) -> Workload:
    scalars = {v.name: v.scalar for v in run.inputs if v.shape is None}
    key = json.dumps([definition.name, values, scalars], sort_keys=True)
    wid = str(uuid.uuid5(NAMESPACE, key))
    inputs: dict[str, dict] = {}
    path = blob_path(definition.op_type, definition.name, wid)
    for v in run.inputs:
        if v.shape is None:
            inputs[v.name] = {"type": "scalar", "value": v.scalar}
        elif v.needs_values:
            inputs[v.name] = {"type": "safetensors", "path": path, "tensor_key": v.name}
            blobs.setdefault(path, {})[v.name] = run.data[v.name]
        else:
            inputs[v.name] = {"type": "random"}
    return Workload.model_validate(dict(uuid=wid, axes=values, inputs=inputs))


def export_task(name: str, source: str, op_type: str | None = None, small: bool = False) -> Exported:
    """The Definition (named `name`) and Workloads of the task `source`; Unmappable says why there are none."""
    where = f"task {name}"
    note = _DATA_DEPENDENT.search(source)
    if note:
        raise Unmappable(
            f"{where}: its shapes hold a count of the data ({note.group(1)}): a Definition's axes are sizes"
        )
    try:
        sources = sizes_of(source, small)
    except ValueError as exc:  # a CPU_SIZES that is not a literal dict of names to ints, or names no constant
        raise TaskFails(f"{where}: {exc}") from None
    runs = [probe(s, where) for s in sources]
    constants = [module_ints(s) for s in sources]
    varying = [c for c in read_cpu_sizes(source) or {} if len({k.get(c) for k in constants}) > 1]
    extra = _probe_run(source, varying, constants[-1], runs, where) if len(varying) > 1 else None
    axes = name_axes(runs, constants, varying, where, extra)
    for c in varying:
        if c not in axes.constants and _used_in_code(source, c):
            raise Unmappable(f"{where}: its code reads {c}, which varies but is no input's dimension")
    first = min(runs, key=elements)
    sized = runs + ([extra[0]] if extra else [])
    binding = Binding(
        cls="TaskModel",
        inputs=[v.name for v in first.inputs],
        init=init_code(
            [_literal_init(r.init, where) for r in sized], constants + ([extra[1]] if extra else []), axes, where
        ),
        activations=[v.name for v in first.inputs if v.role == "activation"],
        weights={v.name: v.path for v in first.inputs if v.role == "weight"},
        attrs={v.name: v.path for v in first.inputs if v.role == "attr"},
        axes=axes.constants,
        build_on_meta=True,
    )
    reference = reference_text(name, source, set(axes.constants), shim(binding))
    definition = Definition.model_validate(
        dict(
            name=name,
            op_type=op_type or name,
            description=f"kernelsmith task {name}, exported by `kernelsmith export-fib`: {_docline(source)}",
            tags=["origin:kernelsmith"],
            axes=axes.axes,
            inputs={v.name: _spec(v, axes, v.role) for v in first.inputs},
            outputs={v.name: _spec(v, axes, "output") for v in first.outputs},
            reference=reference,
        )
    )
    blobs: dict = {}
    workloads = [_workload(definition, run, axes.values[k], blobs) for k, run in enumerate(runs)]
    check_reference(definition, sources, runs, workloads, where)
    return Exported(definition, workloads, sources, binding, blobs)


def _docline(source: str) -> str:
    doc = ast.get_docstring(ast.parse(source)) or ""
    return doc.strip().splitlines()[0] if doc.strip() else "no description"
