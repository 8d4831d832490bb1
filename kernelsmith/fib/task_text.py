"""A flashinfer-bench Definition and one of its Workloads as a KernelBench-format task file.

The task holds the Definition's reference as written, and a Model whose forward calls its `run(...)`:
tensor inputs come from get_inputs() in the Definition's order, drawn as flashinfer-bench's benchmark
draws a `random` input (dtypes.py) or loaded from the workload's safetensors file (written into the task
as a literal when small, read from the imported copy beside the task when not, named relative to the
task's folder); scalar inputs are Model's constructor
arguments (get_init_inputs()), so that ModelNew gets them too. Each axis is a module constant
(`BATCH_SIZE = 32`); CPU_SIZES shrinks the var axes no file and no constraint fixes, so that `--small`
tries a kernel in the Triton interpreter. FIB_DEFINITION and FIB_WORKLOAD at the end say what the task
exports back as (`kernelsmith export-fib`).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

import torch
from flashinfer_bench.bench.utils import load_safetensors
from flashinfer_bench.data import Definition, SafetensorsInput, ScalarInput, Workload

from kernelsmith.errors import UserError, one_line
from kernelsmith.fib.codegen import as_outputs, const_name, ident, literal
from kernelsmith.fib.dtypes import Unmappable, draw, draw_scalar, name_of, torch_dtype, torch_name
from kernelsmith.fib.layout import NoWorkloads

LITERAL_ELEMENTS = 4096  # a safetensors input up to this many elements is written into the task
CPU_AXIS = 8  # the size CPU_SIZES gives a var axis larger than it
# The names the task defines around the reference: a reference that binds one of them at module level is
# embedded as a string and run in a namespace of its own instead.
WRAPPER_NAMES = {"Model", "get_inputs", "get_init_inputs", "CPU_SIZES", "FIB_DEFINITION", "FIB_WORKLOAD", "torch", "nn"}
HELPER_NAMES = {"_as_outputs", "_OUTPUTS", "_OUTPUT_DTYPES", "_blob"}
BLOBS_ENV = "KERNELSMITH_FIB_BLOBS"  # folders where an imported task looks for the blobs it reads
BLOB_TEMPLATE = Path(__file__).with_name("templates") / "blob.py.txt"
REFERENCE_START = "# ---- the Definition's reference, as written ----"
REFERENCE_END = "# ---- end of the reference ----"
# The reference is written as it is, so that `export-fib` gives the Definition back unchanged (a dataset
# recognises its own Definition only then); one without a final newline gets one here, and the end marker
# says so.
NO_FINAL_NEWLINE = " (the reference has no newline after its last line)"


@dataclass
class Input:
    name: str  # the Definition's
    ident: str  # as a Python identifier
    dtype: str
    shape: list[str] | None  # axis names; None: a scalar
    code: str  # the expression that makes it
    says: str  # how, for the header


@dataclass
class Rendered:
    text: str
    blobs: dict[str, Path] = field(default_factory=dict)  # the task's blob (relative path) -> the file to copy


def axis_values(definition: Definition, workload: Workload) -> dict[str, int]:
    where = f"workload {workload.uuid} of {definition.name}"
    values: dict[str, int] = {}
    for name, axis in definition.axes.items():
        if axis.type == "const":
            values[name] = axis.value
        elif name in workload.axes:
            values[name] = workload.axes[name]
        else:
            raise UserError(f"{where}: no value for its var axis {name}")
    return values


def _blob_literal(tensor, dtype: str, shape: str) -> str:
    if tensor.is_floating_point():
        values = literal([float(v) for v in tensor.float().flatten().tolist()])
        return f"torch.tensor({values}, dtype=torch.float32).to({torch_name(dtype)}).reshape({shape})"
    return f"torch.tensor({literal(tensor.flatten().tolist())}, dtype={torch_name(dtype)}).reshape({shape})"


def _files(definition: Definition, workload: Workload, root: Path) -> dict[str, tuple[torch.Tensor, Path]]:
    """The workload's safetensors inputs (name -> its tensor and file), read and checked (its key, shape and
    dtype) by flashinfer-bench's own `load_safetensors`; a UserError in one line for a bad file."""
    where = f"workload {workload.uuid} of {definition.name}"
    named = {n: s for n, s in workload.inputs.items() if isinstance(s, SafetensorsInput)}
    if not named:
        return {}
    axis_values(definition, workload)  # a var axis without a value: said here, in one line
    paths = {}
    for name, source in named.items():
        spec = definition.inputs.get(name)
        if spec is None:
            raise UserError(f"{where}: its input {name} is no input of the Definition")
        if spec.shape is None:
            raise Unmappable(f"{definition.name}: input {name} is a scalar read from a safetensors file")
        torch_dtype(name_of(spec.dtype), f"{definition.name}: input {name}")  # Unmappable: float4
        paths[name] = Path(source.path) if Path(source.path).is_absolute() else root / source.path
        if not paths[name].is_file():
            raise NoWorkloads(f"{where}: input {name}: its safetensors file {source.path} is missing")
    try:
        tensors = load_safetensors(definition, workload, root)
    except Exception as exc:  # noqa: BLE001 - its checks' ValueError, or a file safetensors cannot read
        raise UserError(f"{where}: {one_line(str(exc), 300)}") from None
    return {name: (tensors[name], paths[name]) for name in named}


def axis_consts(definition: Definition) -> dict[str, str]:
    """Each axis's module constant (`BATCH_SIZE` for batch_size)."""
    taken: set[str] = set()
    return {axis: const_name(axis, taken) for axis in definition.axes}


def input_idents(definition: Definition) -> list[tuple[str, bool]]:
    """Each input's identifier in the task (and its candidates), and whether it is a tensor (forward's
    argument) or a scalar (the constructor's), in the Definition's order."""
    taken = set(axis_consts(definition).values()) | WRAPPER_NAMES | HELPER_NAMES | {"self", "run"}
    return [(ident(name, taken), spec.shape is not None) for name, spec in definition.inputs.items()]


def _inputs(definition: Definition, workload: Workload, root: Path, consts: dict[str, str], rendered: Rendered):
    out: list[Input] = []
    files = _files(definition, workload, root)
    for (name, spec), (name_ident, _) in zip(definition.inputs.items(), input_idents(definition)):
        where = f"{definition.name}: input {name}"
        dtype = name_of(spec.dtype)
        torch_dtype(dtype, where)  # Unmappable for what cannot be drawn
        source = workload.inputs.get(name)
        if spec.shape is None:
            code = literal(source.value) if isinstance(source, ScalarInput) else draw_scalar(dtype)
            out.append(Input(name, name_ident, dtype, None, code, f"scalar {code}"))
            continue
        shape_code = "[" + ", ".join(consts[a] for a in spec.shape) + "]"
        if isinstance(source, ScalarInput):
            raise Unmappable(f"workload {workload.uuid}: {where} is a tensor given a scalar value")
        if not isinstance(source, SafetensorsInput):  # random, or not named (flashinfer-bench draws it)
            code, says = draw(dtype, shape_code), "random"
        else:
            tensor, path = files[name]
            if tensor.numel() <= LITERAL_ELEMENTS:
                code, says = _blob_literal(tensor, dtype, shape_code), f"{source.path} (as a literal)"
            else:
                copy = f"blob/{definition.name}/{workload.uuid}/{path.name}"
                rendered.blobs[copy] = path
                code = f"_blob(BLOB_{list(rendered.blobs).index(copy) + 1}, {source.tensor_key!r})"
                says = f"{source.path} (copied to {copy})"
        dims = ", ".join(spec.shape)
        out.append(Input(name, name_ident, dtype, spec.shape, code, f"{dtype}[{dims}] {says}"))
    return out


def cpu_sizes(definition: Definition, workload: Workload, consts: dict[str, str]) -> dict[str, int] | None:
    """The var axes `--small` may shrink (to CPU_AXIS), or None when none may: a constraint ties axes
    together, and an axis of a safetensors input or of no input at all keeps its size."""
    if definition.constraints:
        return None
    fixed = {
        a
        for name, spec in definition.inputs.items()
        if spec.shape is not None and isinstance(workload.inputs.get(name), SafetensorsInput)
        for a in spec.shape
    }
    used = {a for spec in definition.inputs.values() for a in spec.shape or []}
    sizes = {
        consts[a]: CPU_AXIS
        for a in definition.var_axes
        if a in used and a not in fixed and workload.axes.get(a, 0) > CPU_AXIS
    }
    return sizes or None


def _embed_reference(reference: str, taken: set[str], name: str) -> str:
    """The reference as module code between markers; as a string run in its own namespace when it binds a
    name the task defines, or starts with a `from __future__` import (which must open a module)."""
    try:
        tree = ast.parse(reference)
    except SyntaxError as exc:  # flashinfer-bench's own validator parses it: a dataset holds none such
        raise UserError(f"definition {name}: its reference is not Python: {exc.msg} (line {exc.lineno})") from None
    bound = {
        t.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    } | {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in tree.body)
    if not (bound & taken) and not future:
        end = REFERENCE_END if reference.endswith("\n") else f"\n{REFERENCE_END}{NO_FINAL_NEWLINE}"
        return f"{REFERENCE_START}\n{reference}{end}\n"
    return (
        f"{REFERENCE_START} (run in a namespace of its own: it binds names this file uses)\n"
        f"_REFERENCE = {reference!r}\n_reference: dict = {{}}\n"
        f"exec(compile(_REFERENCE, {f'<reference of {name}>'!r}, 'exec'), _reference)\n"
        f"run = _reference['run']\n{REFERENCE_END}\n"
    )


def _header(definition: Definition, workload: Workload, inputs: list[Input], source: str) -> str:
    axes = ", ".join(f"{a}={v}" for a, v in workload.axes.items()) or "no var axes"
    outs = "; ".join(f"{n} {name_of(s.dtype)}[{', '.join(s.shape or [])}]" for n, s in definition.outputs.items())
    lines = [
        f"flashinfer-bench definition {definition.name} (op_type {definition.op_type}),",
        f"workload {workload.uuid}: {axes}.",
        *([definition.description.strip()] if definition.description else []),
        f"Imported by `kernelsmith import-fib` from {source}: the reference below is the",
        "Definition's own; Model calls its run(...) on the inputs get_inputs() draws as flashinfer-bench's",
        "benchmark does (scalar inputs are Model's constructor arguments, so ModelNew gets them too).",
        "Inputs: " + "; ".join(f"{i.name} {i.says}" for i in inputs) + ".",
        f"Outputs: {outs}.",
    ]
    return '"""' + "\n".join(lines).replace('"""', "'''").replace("\\", "\\\\") + '\n"""\n'


def _model(definition: Definition, inputs: list[Input]) -> str:
    scalars = [i for i in inputs if i.shape is None]
    tensors = [i for i in inputs if i.shape is not None]
    init_args = "".join(f", {i.ident}" for i in scalars)
    sets = "".join(f"        self.{i.ident} = {i.ident}\n" for i in scalars) or "        pass\n"
    call = ", ".join(i.ident if i.shape is not None else f"self.{i.ident}" for i in inputs)
    return (
        "class Model(nn.Module):\n"
        f"    def __init__(self{init_args}):\n        super().__init__()\n{sets}\n"
        f"    def forward(self{''.join(', ' + i.ident for i in tensors)}):\n"
        f"        return _as_outputs(run({call}))\n"
    )


def task_text(definition: Definition, workload: Workload, root: Path, source: str) -> Rendered:
    """The task for `workload` of `definition` (a dataset at `root`; `source` names the definition's file).
    The blobs it reads are named relative to its folder, where the import copies them (`Rendered.blobs`):
    the task says no path of this machine, and the folder moves whole."""
    rendered = Rendered("")
    consts = axis_consts(definition)
    inputs = _inputs(definition, workload, root, consts, rendered)
    sizes = axis_values(definition, workload)
    used = {a for spec in [*definition.inputs.values(), *definition.outputs.values()] for a in spec.shape or []}
    const_lines = "".join(f"{consts[a]} = {sizes[a]}\n" for a in definition.axes if a in used)
    small = cpu_sizes(definition, workload, consts)
    blobs = "".join(f"BLOB_{k} = {rel!r}\n" for k, rel in enumerate(rendered.blobs, 1))
    if blobs:
        blobs = "# The safetensors files it reads, relative to its folder (_blob says where it looks).\n" + blobs
    reference = _embed_reference(
        definition.reference, WRAPPER_NAMES | HELPER_NAMES | set(consts.values()), definition.name
    )
    tensors = [i for i in inputs if i.shape is not None]
    scalars = [i for i in inputs if i.shape is None]
    parts = [
        _header(definition, workload, inputs, source),
        "import torch\nimport torch.nn as nn\n",
        f"# The axes: {', '.join(f'{a} ({definition.axes[a].type})' for a in definition.axes if a in used)}\n"
        + const_lines,
        f"# Sizes for the Triton interpreter on the CPU (`--small`): the var axes no file fixes.\n{_sizes(small)}",
        blobs,
        reference,
        as_outputs(list(definition.outputs), [name_of(s.dtype) for s in definition.outputs.values()]),
    ]
    if rendered.blobs:
        parts.append(Template(BLOB_TEMPLATE.read_text(encoding="utf-8")).substitute(env=BLOBS_ENV))
    parts += [
        "\n\n" + _model(definition, inputs),
        "\n\ndef get_inputs():\n    return [\n" + "".join(f"        {i.code},\n" for i in tensors) + "    ]\n",
        "\n\ndef get_init_inputs():\n    return [" + ", ".join(i.code for i in scalars) + "]\n",
        _fib_metadata(definition, workload),
    ]
    rendered.text = parts[0] + "\n" + "\n\n".join(p.strip("\n") + "\n" for p in parts[1:] if p)
    return rendered


def _sizes(small: dict[str, int] | None) -> str:
    return (
        f"CPU_SIZES = {small!r}\n"
        if small
        else "# (none: every var axis is small, or fixed by a file or a constraint)\n"
    )


def _fib_metadata(definition: Definition, workload: Workload) -> str:
    described = definition.model_dump(mode="json", exclude={"reference"}, exclude_unset=True)
    return (
        "\n\n# What `kernelsmith export-fib` writes this task back as: its Definition (the reference is the one\n"
        "# above) and its workload.\n"
        f"FIB_DEFINITION = {json.dumps(described)!r}\n"
        f"FIB_WORKLOAD = {workload.model_dump_json()!r}\n"
    )
