"""A patch's kernel as a PyTorch operator, so that a patched model traces under torch.compile and
replays under CUDA graphs. Torch only: `kernelsmith apply` copies this file into the patch it writes.

Each kernel whose region makes new values (it writes none of the model's tensors in place) becomes
`torch.ops.kernelsmith_patch.<name>_<digest>(inputs, params, instance) -> values` (`instance`: which
install's kernel runs, a constant of each call): `torch.library.custom_op` with a
fake implementation (`register_fake`) that gives the region's values their recorded shapes, strides
and dtypes, so that torch.compile traces it without running it, and Inductor calls it as an opaque
kernel. Its implementation binds the kernel (`ModelNew`) to the parameters it is given (one bound copy
per parameter set, no copy of their data), runs it on the inputs (restrided first where they are not
laid out as the region's were), and returns the region's values, one per value the region makes (an
output that is a view of another follows from it outside the op), each laid out as recorded and none
sharing memory with an input or another. No host sync and no allocation but torch's: a CUDA graph
captures it as it captures any op.

It counts each region it takes in the patch's counts; a graph compiled while the patch was installed
keeps calling it after `patch.remove()`: it runs the region's own ops then (its task's Model).
"""

import hashlib
import re
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .pattern import Pattern, meta, slot_meta
from .substitute import Kernel, Substitution, bind, restride, values_of

NAMESPACE = "kernelsmith_patch"
_INSTANCES: dict[int, "KernelOp"] = {}  # a call's `instance` -> the KernelOp it runs (the patch installed then)
_DEFINED: dict[str, Any] = {}  # op name -> its OpOverload (an operator is defined once a process)


def op_ready(pattern: Pattern, written: list) -> str | None:
    """Why a region cannot be a functional operator (None: it can): an operator makes new values, so a
    region that writes the model's tensors in place runs only under the dispatch mode (eager)."""
    if written or any(s.aliases for s in pattern.steps):
        return "its region writes the model's tensors in place (served in eager mode only)"
    made = {k for s in pattern.steps if s.deferred for k in s.out_meta}
    if any(b.kind != "val" or b.key not in made for b in pattern.bases):
        return "an output of its region is no value a compute op makes (served in eager mode only)"
    return None


def digest(*texts: str) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode("utf-8"))
    return h.hexdigest()[:12]


class KernelOp:
    """One kernel of an installed patch as an operator. `call` runs it: eagerly straight through (no
    dispatch cost), while torch.compile traces through the operator."""

    def __init__(self, name: str, kernel: Kernel, mode: Substitution):
        self.name, self.kernel, self.reference, self.sample = name, kernel, kernel.reference, kernel.sample
        self.mode: Substitution = mode  # the patch's counts and timing ranges
        pattern = kernel.pattern
        self.pattern = pattern
        self.bases = list(dict.fromkeys(pattern.bases))  # the values it returns, in order
        self.out_meta = [slot_meta(pattern, b) for b in self.bases]
        self.attrs = list(pattern.params)  # the order its parameters are passed in
        self.op_name = re.sub(r"\W", "_", f"{name}_{kernel.key}")
        self.installed = True  # False after patch.remove(): the region's own ops run
        self.live: Callable[[], bool] = lambda: True  # the patch is active (graphs compiled now take the region)
        self.compiles: set = set()  # the compiles that traced the patched model (its graphs take the region)
        self.graph: Any = None  # the region as Inductor's graphs hold it (graph_pass.Region), traced when first needed
        self._bound: dict[tuple, torch.nn.Module] = {}
        # Each install's own number, a constant of every call: a graph runs the KernelOp of the patch it was
        # compiled with (its counts, its parameters' binding), whatever else installs the same kernel.
        self.instance = len(_INSTANCES)
        _INSTANCES[self.instance] = self
        self.op = _define(self.op_name)

    def call(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        if torch.compiler.is_compiling():
            return self.op(inputs, params, self.instance)  # pyright: ignore[reportCallIssue]
        return self.run(inputs, params)

    def run(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        """The operator's implementation: the region's values from the kernel (or, uninstalled, from the
        region's own ops)."""
        if self.mode.entered:  # a swapped module inside another region's module call: the mode need not see it
            with _disable_current_modes():
                return self._run(inputs, params)
        return self._run(inputs, params)

    def _run(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        if not self.installed:
            outs = self._bind(self.reference, dict(zip(self.attrs, params)))(*inputs)
            return self._values(outs, inputs, params)
        with self.mode._range(self.name):
            fitted = [x if meta(x) == m else restride(x, m[0], m[1]) for x, m in zip(inputs, self.pattern.input_meta)]
            attrs = self.kernel.attrs
            outs = self._bind(self.kernel.module, {attrs[a]: t for a, t in zip(self.attrs, params)})(*fitted)
            values = self._values(outs, inputs, params)
        self.mode.counts[self.name].fired += 1
        return values

    def fake(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        device = (inputs or params)[0].device
        return [
            torch.empty_strided(shape, stride, dtype=dtype, device=device) for shape, stride, dtype in self.out_meta
        ]

    def uninstall(self) -> None:
        self.installed = False
        self._bound.clear()  # the model's tensors are not kept alive by the patch

    def _bind(self, base: torch.nn.Module, real: dict[str, torch.Tensor]) -> torch.nn.Module:
        key = (id(base), *((t.data_ptr(), t.shape, t.stride(), t.dtype, t.device) for t in real.values()))
        made = self._bound.get(key)
        if made is None:
            made = self._bound[key] = bind(base, real)
        return made

    def _values(self, outs, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        """The region's values from the module's outputs, laid out as recorded, sharing no memory with the
        operator's arguments or with one another (an operator's outputs are its own)."""
        values = values_of(self.pattern, list(outs) if isinstance(outs, (tuple, list)) else [outs])
        taken = {x.untyped_storage().data_ptr() for x in (*inputs, *params)}
        result = []
        for base, (shape, stride, _) in zip(self.bases, self.out_meta):
            got = values[base]
            if tuple(got.stride()) != stride or got.untyped_storage().data_ptr() in taken:
                got = restride(got, shape, stride)
            taken.add(got.untyped_storage().data_ptr())
            result.append(got)
        return result


def _define(op_name: str):
    """torch.ops.kernelsmith_patch.<op_name>(inputs, params, instance): defined once a process; a call
    runs KernelOp number `instance`."""
    if op_name in _DEFINED:
        return _DEFINED[op_name]

    def impl(inputs: list[torch.Tensor], params: list[torch.Tensor], instance: int) -> list[torch.Tensor]:
        return _INSTANCES[instance].run(inputs, params)

    def fake(inputs: list[torch.Tensor], params: list[torch.Tensor], instance: int) -> list[torch.Tensor]:
        return _INSTANCES[instance].fake(inputs, params)

    op = torch.library.custom_op(f"{NAMESPACE}::{op_name}", impl, mutates_args=())
    op.register_fake(fake)
    overload = getattr(getattr(torch.ops, NAMESPACE), op_name).default
    _DEFINED[op_name] = overload
    return overload
