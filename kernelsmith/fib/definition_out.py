"""A task as a flashinfer-bench Definition and its Workloads (`kernelsmith export-fib`).

A task's workloads are its sizes: as written, and cut to its CPU_SIZES where it declares them (`small`:
that one alone). Each is probed (probe.py), the axes named from how the sizes move (axes.py), and the
reference is the task's own code with `run(...)` after it (reference.py, shim.py). Its inputs, in the
Definition's order: forward's arguments, Model's parameters and buffers (the weights), the float
attributes its ops read (an eps); a Workload draws floats at random and carries integers, booleans and
buffers as safetensors (their values are indices, masks, statistics). Before anything is written, the
reference is run against the task's Model on the smallest workload: the same outputs, bit for bit, or the
task is not exported. (A task imported from flashinfer-bench exports as it came: imported_out.py.)
"""

from __future__ import annotations

import ast
import json
import re
import uuid

import torch
from flashinfer_bench.data import Definition, Workload

from kernelsmith.fib.axes import Axes, name_axes, probe_sizes
from kernelsmith.fib.dtypes import Unmappable
from kernelsmith.fib.exported import Exported, module_ints
from kernelsmith.fib.layout import blob_path
from kernelsmith.fib.probe import REAL_LIMIT, Run, elements, load, probe
from kernelsmith.fib.reference import reference_text
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
    sources = sizes_of(source, small)
    runs = [probe(s, where) for s in sources]
    constants = [module_ints(s) for s in sources]
    varying = [c for c in read_cpu_sizes(source) or {} if len({k.get(c) for k in constants}) > 1]
    extra = _probe_run(source, varying, constants[-1], runs, where) if len(varying) > 1 else None
    axes = name_axes(runs, constants, varying, where, extra)
    for c in varying:
        if c not in axes.constants and _used_in_code(source, c):
            raise Unmappable(f"{where}: its code reads {c}, which varies but is no input's dimension")
    smallest = min(range(len(runs)), key=lambda k: elements(runs[k]))
    first = runs[smallest]
    binding = Binding(
        cls="TaskModel",
        inputs=[v.name for v in first.inputs],
        init=repr(_literal_init(first.init, where)),
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
    _check_reference(definition, sources[smallest], first, where)
    return Exported(definition, workloads, sources, binding, blobs)


def _docline(source: str) -> str:
    doc = ast.get_docstring(ast.parse(source)) or ""
    return doc.strip().splitlines()[0] if doc.strip() else "no description"


def _check_reference(definition: Definition, source: str, run: Run, where: str) -> None:
    """The reference's outputs against the task's Model's on the same inputs and weights (real, on the CPU),
    where the workload is small enough to run there and the task runs on the CPU (a GPU capture's attention
    may be a CUDA-only op: its reference is then the task's code unchecked here)."""
    if elements(run) > REAL_LIMIT // 16:
        return
    task = load(source)
    try:
        torch.manual_seed(0)
        model = task.Model(*(task.get_init_inputs() if hasattr(task, "get_init_inputs") else []))
        torch.manual_seed(1)
        inputs = list(task.get_inputs())
        with torch.no_grad():
            want = model(*inputs)
    except Exception:  # noqa: BLE001 - the task's own code does not run on this host's CPU
        return
    weights = dict(model.named_parameters()) | dict(model.named_buffers())
    ref = load(definition.reference)
    by_name: dict = {}
    for v, x in zip([v for v in run.inputs if v.role == "activation"], inputs):
        by_name[v.name] = x
    for v in run.inputs:
        if v.role == "weight":
            by_name[v.name] = weights[v.path].detach()
        elif v.role == "attr":
            by_name[v.name] = v.scalar
    try:
        with torch.no_grad():
            got = ref.run(*[by_name[v.name] for v in run.inputs])
    except Exception as exc:  # noqa: BLE001 - the task's code, run as the reference runs it
        raise Unmappable(f"{where}: run() of the exported reference fails: {type(exc).__name__}: {exc}") from None
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = got if isinstance(got, (tuple, list)) else (got,)
    if len(want) != len(got) or not all(torch.equal(a, b) for a, b in zip(want, got)):
        raise Unmappable(f"{where}: run() of the exported reference does not give the task's outputs on its inputs")
