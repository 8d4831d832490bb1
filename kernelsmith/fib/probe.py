"""A task run at one of its sizes, to read what a Definition says of it: every input (forward's arguments,
Model's parameters and buffers, the float attributes its ops read, such as an eps) and every output, with
shape and dtype, in the Definition's order.

The run is on the meta device (shapes only, no memory, however large the task); the values of the inputs
that a Workload must carry (integers, booleans and buffers: indices, masks, running statistics, which
flashinfer-bench's random draw would break) are then drawn for real, on the CPU. What a Definition cannot
say is an Unmappable naming the value: a dtype flashinfer-bench lacks, a non-contiguous input (its inputs
are dense), shapes that count the data (nonzero, a mask's selection).
"""

from __future__ import annotations

import inspect
import math
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from kernelsmith.errors import one_line
from kernelsmith.fib.dtypes import TaskFails, Unmappable, fib_dtype
from kernelsmith.task import load_module

REAL_LIMIT = 1 << 26  # elements: a task whose meta run fails is run for real on the CPU only up to this
DATA_DEPENDENT = ("data-independent", "item() cannot be called on meta", "_unique", "data-dependent")


@dataclass
class Value:
    name: str  # in the Definition
    role: str  # activation | weight | attr | output
    path: str  # an activation's forward argument, a weight's or attr's path in Model, an output's index
    shape: tuple[int, ...] | None  # None: a scalar
    dtype: str | None  # flashinfer-bench's name (a scalar: float32, int64 or bool)
    scalar: float | int | bool | None = None  # a scalar's value
    buffer: bool = False  # a weight that is a buffer (model state, not a parameter)

    @property
    def needs_values(self) -> bool:
        """Whether a Workload carries its values (a safetensors blob) rather than a random draw."""
        return self.shape is not None and (self.buffer or self.dtype in ("bool", "int8", "int16", "int32", "int64"))


@dataclass
class Run:
    """One workload of a task: its inputs and outputs as the Definition orders them."""

    init: list  # get_init_inputs()
    inputs: list[Value]
    outputs: list[Value]
    data: dict[str, torch.Tensor] = field(default_factory=dict)  # the values of inputs that need them
    on_meta: bool = True  # False: the meta device could not run it (it was run for real, on the CPU)


class _Scalars(TorchDispatchMode):
    """The Python floats the ops of a forward take (an eps, a scale): which float attributes it reads."""

    def __init__(self):
        super().__init__()
        self.seen: set[float] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.seen.update(a for a in tree_leaves((args, kwargs)) if type(a) is float)
        return func(*args, **kwargs)


def load(source: str) -> ModuleType:
    """The task `source` as a module (run from a file, as the evaluator runs it; the file is gone after)."""
    name = f"_ks_fib_{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="ks-fib-") as folder:
        try:
            return load_module(source, Path(folder) / "task.py", name)
        finally:
            sys.modules.pop(name, None)


def _scalar_dtype(value) -> str:
    return "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float32"


def _forward_names(model: torch.nn.Module, count: int) -> list[str]:
    params = [
        p.name
        for p in inspect.signature(model.forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return [params[i] if i < len(params) else f"input_{i}" for i in range(count)]


def _float_attrs(model: torch.nn.Module, seen: set[float]) -> dict[str, float]:
    """path -> value of each float attribute of Model's modules whose value the forward's ops took."""
    found = {}
    for prefix, module in model.named_modules():
        for attr, value in vars(module).items():
            if type(value) is float and not attr.startswith("_") and value in seen:
                found[f"{prefix}.{attr}" if prefix else attr] = value
    return found


def _unique(name: str, taken: set[str]) -> str:
    base, n = name.replace(".", "_"), 1
    out = base
    while out in taken:
        n += 1
        out = f"{base}_{n}"
    taken.add(out)
    return out


def _tensor_value(name: str, role: str, path: str, t: torch.Tensor, where: str, buffer: bool = False) -> Value:
    what = f"{where}: {role} {name}" + (f" ({path})" if path != name else "")
    dtype = fib_dtype(t.dtype, what)
    if role != "output" and not t.is_contiguous():
        raise Unmappable(
            f"{what} has stride {list(t.stride())} for shape {list(t.shape)}, not contiguous: flashinfer-bench's "
            "inputs are dense, so a kernel made for this layout would be judged on another"
        )
    return Value(name, role, path, tuple(t.shape), dtype, buffer=buffer)


def _values(model, inputs: list, out, seen: set[float], where: str) -> tuple[list[Value], list[Value]]:
    taken: set[str] = set()
    values = []
    for arg, x in zip(_forward_names(model, len(inputs)), inputs):
        name = _unique(arg, taken)
        if isinstance(x, torch.Tensor):
            values.append(_tensor_value(name, "activation", arg, x, where))
        elif type(x) in (int, float, bool):
            values.append(Value(name, "activation", arg, None, _scalar_dtype(x), scalar=x))
        else:
            raise Unmappable(f"{where}: input {arg} is a {type(x).__name__}, which a Definition cannot hold")
    weights = [(p, t, False) for p, t in model.named_parameters()] + [(p, t, True) for p, t in model.named_buffers()]
    for path, t, buffer in weights:
        values.append(_tensor_value(_unique(path, taken), "weight", path, t, where, buffer))
    for path, v in _float_attrs(model, seen).items():
        values.append(Value(_unique(path, taken), "attr", path, None, "float32", scalar=v))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    outputs = []
    for i, t in enumerate(outs):
        if not isinstance(t, torch.Tensor):
            raise Unmappable(f"{where}: output {i} is a {type(t).__name__}, not a tensor")
        name = _unique("output" if len(outs) == 1 else f"output_{i}", taken)
        outputs.append(_tensor_value(name, "output", str(i), t, where))
    return values, outputs


def _meta_run(module: ModuleType, where: str):
    with torch.device("meta"), torch.no_grad():
        torch.manual_seed(0)
        init = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
        model = module.Model(*init)
        inputs = list(module.get_inputs())
        with _Scalars() as scalars:
            out = model(*inputs)
    return init, model, inputs, out, scalars.seen


def _real_model(module: ModuleType) -> tuple[list, torch.nn.Module]:
    """get_init_inputs() and Model, built for real on the CPU (seed 0)."""
    torch.manual_seed(0)
    init = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
    return init, module.Model(*init)


def _real_inputs(module: ModuleType) -> list:
    torch.manual_seed(0)
    return list(module.get_inputs())


def _size(module: ModuleType) -> int:
    with torch.device("meta"):
        torch.manual_seed(0)
        inputs = list(module.get_inputs())
    return sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))


def _fails(where: str, what: str, exc: Exception) -> TaskFails:
    return TaskFails(f"{where}: {what} raises {type(exc).__name__}: {one_line(str(exc), 200)}")


def probe(source: str, where: str, values: bool = True) -> Run:
    """The task `source` run once (on the meta device, or on the CPU where that cannot run it and it is
    small), read as a Definition reads it; `where` names it in messages. `values`: draw the values of the
    inputs a Workload carries (Run.data). TaskFails when the task's own code raises."""
    try:
        module = load(source)
    except Exception as exc:  # noqa: BLE001 - the task's module code
        raise _fails(where, "its module code", exc) from None
    on_meta = True
    try:
        init, model, inputs, out, seen = _meta_run(module, where)
    except Unmappable:
        raise
    except Exception as exc:
        text = str(exc)
        if any(k in text for k in DATA_DEPENDENT):
            raise Unmappable(
                f"{where}: its shapes depend on its values ({type(exc).__name__}: {text[:120]}): a Definition's "
                "axes are sizes, not counts of the data"
            ) from None
        try:
            size = _size(module)
        except Exception as exc:  # noqa: BLE001 - the task's get_inputs()
            raise _fails(where, "get_inputs()", exc) from None
        if size > REAL_LIMIT:
            raise Unmappable(f"{where}: cannot run on the meta device ({type(exc).__name__}: {text[:160]})") from None
        try:  # for real, on the CPU: an op without a meta kernel, or a task that fails
            (init, model), inputs = _real_model(module), _real_inputs(module)
            with torch.no_grad(), _Scalars() as scalars:
                out = model(*inputs)
        except Exception as exc:  # noqa: BLE001 - the task's own code: its Model, get_inputs or forward
            raise _fails(where, "running it (Model(*get_init_inputs())(*get_inputs()))", exc) from None
        seen, on_meta = scalars.seen, False
    found, outputs = _values(model, inputs, out, seen, where)
    run = Run(init, found, outputs, on_meta=on_meta)
    need = [v for v in run.inputs if v.needs_values] if values else []
    if need:
        try:
            real_model = _real_model(module)[1] if any(v.role == "weight" for v in need) else model
            real_inputs = _real_inputs(module) if any(v.role == "activation" for v in need) else inputs
        except Exception as exc:  # noqa: BLE001 - the task's Model or get_inputs, built for real
            raise _fails(where, "building its inputs or Model for real", exc) from None
        names = _forward_names(model, len(inputs))
        for v in need:
            t = real_inputs[names.index(v.path)] if v.role == "activation" else _get(real_model, v.path)
            run.data[v.name] = t.detach().contiguous()
    return run


def _get(model, path: str) -> torch.Tensor:
    return model.get_parameter(path) if path in dict(model.named_parameters()) else model.get_buffer(path)


def elements(run: Run) -> int:
    return sum(math.prod(v.shape) for v in run.inputs if v.shape is not None)
