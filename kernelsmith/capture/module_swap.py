"""A region that is the whole of a module's forward (a norm, an activation) served by swapping that
module's forward for one that calls the kernel's operator, as Liger-Kernel swaps modules: no dispatch
mode, no per-op cost, and torch.compile traces straight into the operator. Torch only: `kernelsmith
apply` copies this file into the patch it writes.

Whole: the module's forward, run on the region's recorded inputs under the pattern's recorder, runs the
region's ops in order, at least up to its last compute op (the views after it may be the next module's),
reads nothing but those inputs and the module's own parameters and buffers, and returns one of the
values the region makes. The swapped forward keeps the module's parameters (it passes them to the
operator at each call) and runs the module's own forward where the call is not the region's (other
shapes, strides or dtypes; keyword arguments), where the patch is inactive, and where autograd records
the call (grad enabled and an input or parameter requires grad: a patch never changes gradients).
`restore` puts the module's forward back.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .kernel_op import KernelOp
from .pattern import Slot, Step, Tracer, meta


def _same(ours: Step, theirs: Step, names: dict[str, str]) -> bool:
    """The module's step is the region's, its parameters named `names` (region's -> module's), which this
    comparison extends."""

    def same(a, b) -> bool:
        if isinstance(a, Slot) or isinstance(b, Slot):
            if not (isinstance(a, Slot) and isinstance(b, Slot) and a.kind == b.kind):
                return False
            if a.kind != "param":
                return a == b
            return names.setdefault(b.key, a.key) == a.key
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return type(a) is type(b) and a == b

    return (
        ours.func is theirs.func
        and same(ours.args, theirs.args)
        and ours.out == theirs.out
        and ours.out_meta == theirs.out_meta
        and not ours.aliases
    )


def whole(kop: KernelOp, module: torch.nn.Module) -> tuple[int, list[str]] | None:
    """(which of the operator's values the module returns, the module's tensors in the operator's
    parameter order) when the region is the whole of the module's forward; None otherwise."""
    pattern = kop.pattern
    state = dict(module.named_parameters()) | dict(module.named_buffers())
    slots = {id(t): Slot("in", k) for k, t in enumerate(kop.sample)}
    slots |= {id(t): Slot("param", name) for name, t in state.items()}
    tracer = Tracer(slots, [])
    try:
        with torch.no_grad(), tracer:
            out = module.forward(*kop.sample)
    except Exception:  # the forward takes other arguments than the region's inputs: not the region's
        return None
    steps = tracer.steps
    names: dict[str, str] = {}  # the region's parameter -> the module's tensor
    if len(steps) <= pattern.last or len(steps) > len(pattern.steps):
        return None
    if not all(_same(ours, theirs, names) for ours, theirs in zip(steps, pattern.steps)):
        return None
    made = slots.get(id(out)) if isinstance(out, torch.Tensor) else None
    if made is None or made not in kop.bases or set(names) != set(pattern.params):
        return None
    reverse = {region: mine for mine, region in names.items()}
    return kop.bases.index(made), [reverse[a] for a in kop.attrs]


class Swap:
    """A module whose forward calls a kernel's operator."""

    def __init__(
        self, module: torch.nn.Module, kop: KernelOp, index: int, names: list[str], live: Callable[[], bool], path: str
    ):
        self.module, self.kop, self.index, self.path = module, kop, index, path
        self.owners = [_owner(module, n) for n in names]  # (module, attribute) of each parameter
        self.had = "forward" in module.__dict__
        self.before = module.__dict__.get("forward")
        original = module.forward
        metas = [tuple(m) for m in kop.pattern.input_meta]
        n = len(metas)
        mode = kop.mode

        def forward(*args, **kwargs):
            if kwargs or len(args) != n or not live():
                return original(*args, **kwargs)
            if not all(isinstance(x, torch.Tensor) and meta(x) == m for x, m in zip(args, metas)):
                return original(*args)
            params = [getattr(owner, attr) for owner, attr in self.owners]
            if torch.is_grad_enabled() and any(t.requires_grad for t in (*args, *params)):
                if not torch.compiler.is_compiling():
                    mode.recorded(kop.name)  # counted, and said once: the model's own ops run
                return original(*args)
            return kop.call(list(args), params)[index]

        module.forward = forward

    def restore(self) -> None:
        if self.had:
            self.module.__dict__["forward"] = self.before
        else:
            del self.module.forward


def _owner(module: torch.nn.Module, name: str) -> tuple[torch.nn.Module, str]:
    path, _, attr = name.rpartition(".")
    return (module.get_submodule(path) if path else module), attr
