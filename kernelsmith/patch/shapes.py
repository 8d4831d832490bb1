"""A kernel at every shape its task holds, and the word for a forward at a shape no kernel was judged at.
Torch only: `kernelsmith apply` copies this file into the patch it writes.

A task captured at several shapes (`kernelsmith capture --shape`) is written at its main shape
(`get_inputs()`) and names the values of its sizes at each other shape (`SHAPES`, module-level int
constants that its `Model` and `get_inputs` read when called); its kernel was judged at every one. The
patch traces the region at each (`built_at`): the task's module loaded once a shape with its sizes set
there, which gives that shape's pattern, sample inputs and reference. Each is a KernelOp of its own (its
operator's fake gives that shape's values), of the kernel's name, module and counts: the eager path and
the compiled graph pass find a region at whichever of its shapes holds it (graph_match.candidates).

A kernel's region found at other sizes than every shape its kernel was judged at runs the model's own ops
there (nothing promised it), and the patch says so once per kernel and shape (`say_unjudged`): the eager
path and torch.compile trace a forward once a shape, so a server that meets a new batch size hears of it
once, not at every call.
"""

from __future__ import annotations

import types
import warnings
import weakref
from collections.abc import Callable

import torch

from .substitute import BuiltKernel

SHAPES = "SHAPES"  # the task's other shapes: a list of {size constant: value}

# patch (its dispatch object) -> the (kernel, shape) pairs said: each once a patch
_SAID: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def other_shapes(task: types.ModuleType) -> list[dict[str, int]]:
    """The task's SHAPES, checked: each a dict of its module-level int constants to ints ([] where none)."""
    shapes = getattr(task, SHAPES, None) or []
    ok = isinstance(shapes, list) and all(
        isinstance(s, dict) and all(type(v) is int and type(getattr(task, str(n), None)) is int for n, v in s.items())
        for s in shapes
    )
    if not ok:
        raise ValueError(f"its task's {SHAPES} is not a list of dicts of its module-level int constants to ints")
    return shapes


def built_at(
    load: Callable[[int], types.ModuleType],
    main: BuiltKernel,
    name: str,
    device: torch.device,
    trace: Callable,
) -> list[BuiltKernel]:
    """`main` (the kernel at its task's main shape) at each other shape of its task: `load(k)` loads the
    task's module anew (k > 0: its k-th other shape's own copy), `trace` is pattern.trace."""
    shapes = other_shapes(load(0))
    gpus = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    made = []
    for k, sizes in enumerate(shapes, 1):
        task = load(k)
        for size, value in sizes.items():  # its Model and get_inputs read them when called
            setattr(task, size, value)
        with torch.random.fork_rng(devices=gpus), torch.device(device):
            torch.manual_seed(0)
            inputs = list(task.get_inputs())
            reference = task.Model(*task.get_init_inputs()).eval()
        pattern = trace(name, reference, inputs, main.written)
        made.append(BuiltKernel(pattern, main.module, main.attrs, reference, inputs, main.written, f"{main.key}s{k}"))
    return made


def with_shapes(kops: list) -> list:
    """Each kernel's operator, then its operators at the other shapes of its task (KernelOp.shapes)."""
    return [v for k in kops for v in (k, *k.shapes)]


def say_unjudged(dispatch, missed: dict[str, set[str]]) -> None:
    """One warning for the regions a trace found at shapes their kernels were not judged at (`missed`: kernel
    -> its region's first input's shape there), each kernel and shape said once a patch."""
    said = _SAID.setdefault(dispatch, set())
    new = sorted({(name, shape) for name, shapes in missed.items() for shape in shapes} - said)
    if not new:
        return
    said |= set(new)
    listed = "; ".join(f"{name} at {shape}" for name, shape in new)
    warnings.warn(
        f"{dispatch.label}: the forward runs regions at a shape their kernels were not judged at ({listed}): the "
        "model's own ops run there; capture the model at that shape too (kernelsmith capture --shape) to judge "
        "kernels there",
        stacklevel=3,
    )


def unjudged(dispatch) -> dict[str, list[str]]:
    """Each kernel of a patch (its dispatch object) -> the shapes its region ran at unjudged, as said."""
    out: dict[str, list[str]] = {}
    for name, shape in sorted(_SAID.get(dispatch, ())):
        out.setdefault(name, []).append(shape)
    return out
