"""The `run(...)` that a Definition's reference and an exported Solution are called by: it takes the
Definition's inputs by name, puts the weights into the model (the task's Model, or a kernel's ModelNew)
in place of its own, sets the float attributes (an eps), gives the module constants of the var axes
their sizes from the inputs' shapes, and calls forward (templates/run.py.txt).

A destination-passing run copies the results into the outputs it is given (a copy per output: the
value-returning entry point is the one without it). flashinfer-bench's Runnable.call_destination_passing
does the same when it calls a value-returning run; a Solution that declares destination-passing style is
called with the outputs directly, so the copy is in its own code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from kernelsmith.fib.codegen import ident, literal

TEMPLATE = Path(__file__).with_name("templates") / "run.py.txt"


@dataclass
class Binding:
    cls: str  # the model class: TaskModel (the reference) or ModelNew (a Solution)
    inputs: list[str]  # the Definition's inputs, in order (run's parameters)
    init: str  # code for the constructor's arguments, over `args` (the inputs by name)
    activations: list[str]  # forward's arguments
    weights: dict[str, str] = field(default_factory=dict)  # input -> path of a parameter or buffer
    attrs: dict[str, str] = field(default_factory=dict)  # input -> path of a float attribute
    axes: dict[str, tuple[str, int]] = field(default_factory=dict)  # module constant -> (input, dim)
    build_on_meta: bool = False  # the reference: every tensor is replaced, so the model costs no memory
    entry: str = "run"
    outputs: list[str] | None = None  # destination-passing: the outputs' names (run's last parameters)


def shim(b: Binding) -> str:
    """The code appended to a model's module: `entry(...)`, and the helpers it calls."""
    taken: set[str] = set()
    idents = [ident(n, taken) for n in b.inputs]  # a Definition's names are any strings
    params = ", ".join(idents)
    args = "{" + ", ".join(f"{n!r}: {p}" for n, p in zip(b.inputs, idents)) + "}"
    if b.outputs is None:
        run = f"def {b.entry}({params}):\n    return _ks_call({args})\n"
    else:
        outs = ", ".join(ident(n, taken) for n in b.outputs)
        run = (
            f"def {b.entry}({params}, {outs}):\n"
            f"    result = _ks_call({args})\n"
            "    results = result if isinstance(result, (tuple, list)) else (result,)\n"
            f"    for out, value in zip(({outs}{',' if len(b.outputs) == 1 else ''}), results):\n"
            "        out.copy_(value)\n"
        )
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        entry=b.entry,
        cls=b.cls,
        build_on='"meta"' if b.build_on_meta else "None",
        activations=literal(b.activations),
        weights=repr(b.weights),
        attrs=repr(b.attrs),
        axes=repr(b.axes),
        init=b.init,
        run=run,
    )
