"""A Definition's axes from a task's runs at its sizes: a dimension whose size varies across the runs is a
var axis, one that does not a const axis, and dimensions that move together are one axis.

"Move together" is read from the sizes each run gave them: the task as written, cut to its CPU_SIZES,
and, where two of its constants vary alike (BATCH 8 -> 1, KV_HEADS 8 -> 1), a probe run on the meta
device with each varying constant at its CPU size times another prime, which tells them apart. An axis
is named after the module constant whose sizes it has (TOKENS -> tokens), else a var axis after the first
input dimension that has it (x_d1) and a const axis after its size (d64). flashinfer-bench binds var
axes from the inputs' shapes, so a var axis that only an output has (a KV cache's length plus one) cannot
be said: Unmappable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelsmith.fib.codegen import literal
from kernelsmith.fib.dtypes import Unmappable
from kernelsmith.fib.probe import Run, Value


@dataclass
class Axes:
    axes: dict[str, dict] = field(default_factory=dict)  # name -> {"type": "var"} | {"type": "const", "value": n}
    shapes: dict[str, list[str]] = field(default_factory=dict)  # an input's or output's name -> its axes
    values: list[dict[str, int]] = field(default_factory=list)  # per run: var axis -> size
    constants: dict[str, tuple[str, int]] = field(default_factory=dict)  # a var axis's constant -> (input, dim)


def _check_alike(runs: list[Run], where: str) -> None:
    first = runs[0]
    for run in runs[1:]:
        for a, b in zip(first.inputs + first.outputs, run.inputs + run.outputs):
            if (a.name, a.dtype, a.shape is None, len(a.shape or ())) != (
                b.name,
                b.dtype,
                b.shape is None,
                len(b.shape or ()),
            ):
                raise Unmappable(
                    f"{where}: {a.name} differs between its sizes ({a.dtype}{a.shape} and {b.dtype}{b.shape})"
                )
        if len(first.inputs + first.outputs) != len(run.inputs + run.outputs):
            raise Unmappable(f"{where}: its inputs or outputs differ in number between its sizes")


def name_axes(
    runs: list[Run],
    constants: list[dict[str, int]],
    varying: list[str],
    where: str,
    probe: tuple[Run, dict[str, int]] | None = None,
) -> Axes:
    """The axes of `runs` (one per workload; `constants`: the task's module-level ints in each; `varying`:
    those CPU_SIZES changes; `probe`: a meta run at other sizes, with its constants)."""
    _check_alike(runs + ([probe[0]] if probe else []), where)
    every = runs + ([probe[0]] if probe else [])
    consts = constants + ([probe[1]] if probe else [])
    const_vec = {c: tuple(k.get(c) for k in consts) for c in constants[0]}
    groups: dict[tuple, list[tuple[str, int]]] = {}
    for i, v in enumerate(every[0].inputs + every[0].outputs):
        for d in range(len(v.shape or ())):
            vec = tuple((r.inputs + r.outputs)[i].shape[d] for r in every)  # type: ignore[index]
            groups.setdefault(vec, []).append((v.name, d))
    out = Axes(values=[{} for _ in runs])
    inputs = {v.name for v in runs[0].inputs}
    for vec, dims in groups.items():
        var = len(set(vec[: len(runs)])) > 1
        matches = [c for c, cv in const_vec.items() if cv == vec and (c in varying) == var]
        if var and len(matches) > 1:
            raise Unmappable(
                f"{where}: its constants {' and '.join(matches)} vary alike ({' -> '.join(map(str, vec))}) and a run "
                "at other sizes could not tell them apart: give them distinct CPU_SIZES"
            )
        fallback = f"{dims[0][0]}_d{dims[0][1]}" if var else f"d{vec[0]}"
        name = _fresh(matches[0].lower() if matches else fallback, out.axes)
        out.axes[name] = {"type": "var"} if var else {"type": "const", "value": vec[0]}
        bound = [(t, d) for t, d in dims if t in inputs]
        if var and not bound:
            t, d = dims[0]
            raise Unmappable(
                f"{where}: {t}'s dimension {d} varies ({' -> '.join(map(str, vec[: len(runs)]))}) with no input "
                "dimension of its size: flashinfer-bench binds var axes from the inputs' shapes"
            )
        if var and matches:
            out.constants[matches[0]] = bound[0]
        for t, d in dims:
            out.shapes.setdefault(t, [""] * len(_value(runs[0], t).shape or ()))[d] = name
        for k in range(len(runs)):
            if var:
                out.values[k][name] = vec[k]
    for v in runs[0].inputs + runs[0].outputs:
        if v.shape is not None:  # a 0-d tensor has no dimension above: its shape is []
            out.shapes.setdefault(v.name, [])
    return out


def _value(run: Run, name: str) -> Value:
    return next(v for v in run.inputs + run.outputs if v.name == name)


def _fresh(name: str, taken: dict) -> str:
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    return out


def probe_sizes(cpu: dict[str, int], varying: list[str], seen: set[int]) -> dict[str, int] | None:
    """Sizes for the probe run: each varying constant at its CPU size times a distinct prime (so that what
    divides it still does), none equal to another or to any size already seen; None when two vary alike
    at no size (one varying constant)."""
    if len(varying) < 2:
        return None
    primes = [p for p in range(2, 200) if all(p % q for q in range(2, p))]
    out: dict[str, int] = {}
    for c in varying:
        for p in primes:
            size = cpu[c] * p
            if size not in seen and size not in out.values() and p not in {s // cpu[k] for k, s in out.items()}:
                out[c] = size
                break
    return out if len(out) == len(varying) else None


def init_code(inits: list[list], constants: list[dict[str, int]], axes: Axes, where: str) -> str:
    """Code (over `args`, the Definition's inputs by name) for get_init_inputs() at any workload's sizes.

    `inits`: get_init_inputs() at each size the task was run at, `constants`: its module ints there. A value
    the same at every size is a literal; one that moves is the size of the var axis whose constant moves
    alike (`Model(HIDDEN)`: `args['x'].shape[1]`), read from the inputs as the reference's constants are. A
    model built from the task's CPU sizes would be wrong at the others (LayerNorm(1500) on 8192 columns)."""
    moving = {c: [k.get(c) for k in constants] for c in axes.constants}

    def code(values: list, path: str) -> str:
        first = values[0]
        if isinstance(first, (list, tuple)):
            if any(type(v) is not type(first) or len(v) != len(first) for v in values):
                raise Unmappable(f"{where}: get_init_inputs(){path} changes its structure with the sizes: {values}")
            items = [code([v[i] for v in values], f"{path}[{i}]") for i in range(len(first))]
            return ("[{}]" if isinstance(first, list) else "({},)" if len(items) == 1 else "({})").format(
                ", ".join(items)
            )
        if all(v == first and type(v) is type(first) for v in values):
            return literal(first)
        found = [c for c, vec in moving.items() if vec == values] if all(type(v) is int for v in values) else []
        if not found:
            raise Unmappable(
                f"{where}: get_init_inputs(){path} is {' -> '.join(map(repr, values))} across the task's sizes, as "
                "no var axis's size is: run() cannot rebuild it at a workload's sizes"
            )
        name, dim = axes.constants[found[0]]
        return f"args[{name!r}].shape[{dim}]"

    return code(list(inits), "")
