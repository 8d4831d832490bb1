"""A region as a KernelBench-format task: `Model.forward` replays the region's aten ops in tape order.

Parameters and buffers of the real module become the task's own (same shapes, dtypes and strides,
values drawn with the recorded ones' structure: values.py); activations come from `get_inputs()` at
the recorded shapes, dtypes and strides. The body less its values (`Rendered.shape_key`) is the
region's identity: layers that run the same ops on the same shapes, dtypes and strides render the
same one, and capture merges them into one task.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

import torch

from kernelsmith.capture.regions import Elsewhere, Region
from kernelsmith.capture.sizes import SizePlan, Unfit, plan_sizes
from kernelsmith.capture.tape import Ref, Tape
from kernelsmith.capture.values import helpers_for, literal, value_expr


class RenderError(Exception):
    """The region holds something a self-contained task cannot express."""


@dataclass
class Rendered:
    body: str
    params: dict[str, tuple[int, int]]  # task attribute -> (tid, version) of the real parameter/buffer
    inputs: list[tuple[int, int]]  # get_inputs() order
    notes: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)  # x0 / attribute -> how its values are made
    # The body with each value's expression replaced by its dtype, shape and strides: the region's
    # ops, constants and layouts, which the values drawn (statistics of one layer's) do not change.
    shape_key: str = ""
    sizes: SizePlan | None = None  # the named sizes and their CPU sizes (sizes.py)
    elsewhere: Elsewhere | None = None  # the region at the other shapes (`at`: those its task holds)


def _ident(name: str) -> str:
    name = re.sub(r"\W", "_", name).strip("_") or "t"
    return "_" + name if name[0].isdigit() else name


def _attr_name(tape: Tape, region: Region, qual: str) -> str:
    """A parameter's attribute in the task: its own name (`weight`); in a region across the library boundary,
    which holds several modules' weights, its path below the module that holds the region
    (`self_attn_q_proj_weight`), the same in every layer."""
    if not region.fused:
        return _ident(qual.rsplit(".", 1)[-1])
    path = tape.calls[region.call].path if region.call is not None else ""
    return _ident(qual.removeprefix(path + ".") if path and qual.startswith(path + ".") else qual)


def _render_arg(x, names: dict[int, str], ints=repr) -> str:
    if isinstance(x, Ref):
        return names[x.tid]
    if isinstance(x, (list, tuple)):
        inner = ", ".join(_render_arg(v, names, ints) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
    if isinstance(x, torch.device):
        return "dev"
    if isinstance(x, float):
        return {"inf": "float('inf')", "-inf": "-float('inf')", "nan": "float('nan')"}.get(repr(x), repr(x))
    if isinstance(x, int) and not isinstance(x, bool):
        return ints(x)
    if x is None or isinstance(x, (bool, str, torch.dtype, torch.layout, torch.memory_format)):
        return repr(x)
    raise RenderError(f"an argument of type {type(x).__name__} cannot be written in a task")


def call_text(tape: Tape, i: int, names: dict[int, str], plan: SizePlan | None = None) -> str:
    """Op `i` as a call of its aten overload; with a plan, its sizes are the task's named sizes."""
    op = tape.ops[i]
    if op.func.namespace not in ("aten", "prims"):
        raise RenderError(f"op {op.func} is not an aten op: the task would need its library")
    count = itertools.count()  # each int's place among the op's ints: its values at the other shapes
    ints = (lambda v: plan.int_text(tape, i, v, next(count))) if plan is not None else repr
    args = [_render_arg(a, names, ints) for a in op.args]
    sizes = plan.size_list(tape, i, list(op.args)[1]) if plan is not None and len(op.args) > 1 else None
    if sizes is not None:
        args[1] = sizes
    args += [f"{k}={_render_arg(v, names, ints)}" for k, v in op.kwargs.items()]
    packet = op.func.overloadpacket.__name__
    return f"torch.ops.{op.func.namespace}.{packet}.{op.func._overloadname}({', '.join(args)})"


def _assign(tape: Tape, i: int, names: dict[int, str], call: str) -> list[str]:
    op = tape.ops[i]
    new = lambda r: isinstance(r, Ref) and r.tid not in names
    if isinstance(op.out, Ref):
        if not new(op.out):
            return [call]
        names[op.out.tid] = f"v{len(names)}"
        return [f"{names[op.out.tid]} = {call}"]
    if isinstance(op.out, (tuple, list)) and any(new(r) for r in op.out):
        if any(isinstance(r, (tuple, list)) for r in op.out):
            raise RenderError(f"op {op.func} returns nested tensors")
        lines = [f"out = {call}"]
        for k, r in enumerate(op.out):
            if new(r):
                names[r.tid] = f"v{len(names)}"
                lines.append(f"{names[r.tid]} = out[{k}]")
        return lines
    return [call]


def _placeholder(t: torch.Tensor) -> str:
    return f"_value({t.dtype}, {list(t.shape)}, {list(t.stride())})"


def _assemble(inits: list[str], made_inputs: list[str], body: list[str], sizes: str = "") -> str:
    init_body = "\n".join(f"        {line}" for line in inits) or "        pass"
    input_lines = "\n".join(f"        {m}," for m in made_inputs)
    helpers = helpers_for("\n".join(inits + made_inputs))
    return (
        "import torch\nimport torch.nn as nn\n\n"
        + (f"\n{sizes}\n" if sizes else "")
        + (f"\n{helpers}\n\n" if helpers else "")
        + "\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        + init_body
        + "\n\n"
        + "\n".join(body)
        + "\n\n\ndef get_inputs():\n    return [\n"
        + input_lines
        + ("\n" if input_lines else "")
        + "    ]\n\n\ndef get_init_inputs():\n    return []\n"
    )


def _of_parameter(tape: Tape, tid: int) -> bool:
    """A parameter or buffer, or a view of one (a Linear's transposed weight)."""
    while tid in tape.creator and tape.ops[tape.creator[tid]].func.is_view:
        base = next((r.tid for r in tape.ops[tape.creator[tid]].args if isinstance(r, Ref)), tid)
        if base == tid:
            break
        tid = base
    return tape.origin.get(tid, ("activation", ""))[0] in ("parameter", "buffer")


def _plan(tape: Tape, region: Region, elsewhere: Elsewhere | None = None) -> SizePlan:
    """Named sizes for the region's activations; parameters' (their views') and literals' stay."""
    activations: dict[int, int] = {}  # tid -> its place in get_inputs()
    fixed: list[int] = []
    places = [tid for tid, _ in region.inputs if tape.origin.get(tid, ("",))[0] not in ("parameter", "buffer")]
    for tid, ver in region.inputs:
        if _of_parameter(tape, tid) or literal(tape.value(tid, ver)):
            fixed.append(tid)
        else:
            activations[tid] = places.index(tid)
    return plan_sizes(tape, region, activations, fixed, elsewhere)


def render(tape: Tape, region: Region, elsewhere: Elsewhere | None = None) -> Rendered:
    """The task's body for `region` (RenderError when it cannot be written), holding the other shapes of
    `elsewhere` where its sizes follow from named ones there (sizes.py), else the main shape only."""
    if elsewhere is not None and elsewhere.at:
        try:
            done = _render(tape, region, _plan(tape, region, elsewhere))
            done.elsewhere = elsewhere
            return done
        except Unfit as exc:
            elsewhere.drop(dict.fromkeys(range(len(elsewhere.at)), str(exc)))
    done = _render(tape, region, _plan(tape, region))
    done.elsewhere = elsewhere
    return done


def _render(tape: Tape, region: Region, plan: SizePlan) -> Rendered:
    names: dict[int, str] = {}
    params: dict[str, tuple[int, int]] = {}
    inputs: list[tuple[int, int]] = []
    inits: list[str] = []
    made_inputs: list[str] = []
    notes: list[str] = []
    values: dict[str, str] = {}
    key_inits: list[str] = []  # the same, with each value's expression its layout alone (shape_key)
    key_inputs: list[str] = []
    for tid, ver in region.inputs:
        kind, qual = tape.origin.get(tid, ("activation", ""))
        value = tape.value(tid, ver)
        layout = plan.shape(tid, tuple(value.shape)), plan.stride(tid, tuple(value.shape), tuple(value.stride()))
        if kind in ("parameter", "buffer"):
            attr = _attr_name(tape, region, qual)
            while attr in params:
                attr += "_"
            params[attr] = (tid, ver)
            names[tid] = f"self.{attr}"
            made, values[attr], note = value_expr(value, attr, kind, *layout)
            for exprs, expr in ((inits, made), (key_inits, _placeholder(value))):
                if kind == "parameter":
                    exprs.append(f"self.{attr} = nn.Parameter({expr}, requires_grad=False)")
                else:
                    exprs.append(f"self.register_buffer({attr!r}, {expr})")
        else:
            names[tid] = f"x{len(inputs)}"
            made, values[names[tid]], note = value_expr(value, names[tid], "activation", *layout)
            inputs.append((tid, ver))
            made_inputs.append(made)
            key_inputs.append(_placeholder(value))
        if note:
            notes.append(note)
    body = _forward(tape, region, names, inputs, plan)
    source = _assemble(inits, made_inputs, body, plan.declared() + plan.cpu_block() + plan.shapes_block())
    shape_key = _assemble(key_inits, key_inputs, body, plan.declared() + plan.shapes_block())
    return Rendered(source, params, inputs, notes, values, shape_key, plan)


def _forward(
    tape: Tape, region: Region, names: dict[int, str], inputs: list[tuple[int, int]], plan: SizePlan
) -> list[str]:
    args = ", ".join(names[tid] for tid, _ in inputs)
    body = [f"    def forward(self{', ' if args else ''}{args}):"]
    for tid in region.written_inputs:  # the real model wrote these in place: the task writes a copy
        local = f"w{len(body)}"
        body.append(f"        {local} = {names[tid]}.clone()")
        names[tid] = local
    for i in region.replay:
        body += [f"        {line}" for line in _assign(tape, i, names, call_text(tape, i, names, plan))]
    if any("=dev" in line or "dev)" in line or "dev," in line for line in body):
        # creation ops land where the inputs are (or the parameters: a task's Model is moved to the device)
        anchor = next((names[tid] for tid, _ in inputs), None) or next(
            (n for n in names.values() if n.startswith("self.")), None
        )
        if anchor is None:
            raise RenderError(
                "it reads no tensor (its values are the model's constants, such as position ids): no work for a kernel"
            )
        body.insert(1, f"        dev = {anchor}.device")
    outs = [names[tid] for tid, _ in region.outputs]
    body.append(f"        return {', '.join(outs)}")
    return body
