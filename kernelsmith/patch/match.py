"""One occurrence of a region's pattern in the model's op stream, as far as it has come (substitute.py
drives it). Torch only: `kernelsmith apply` copies this file into the patch it writes.

A match binds each slot of the pattern to the model's tensor, and keeps the compute ops it deferred:
their real arguments and what the model was handed for their results (empty placeholders, or for an
op that writes in place, the tensor it writes). A write to one of the model's own tensors (an input, a
parameter or buffer, or a view of one) is deferred as well, so that the kernel reads the region's
inputs as the region did; the kernel's outputs or the region's own ops bring the written tensors to
their new values after it (`writes_after_kernel`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from .pattern import Pattern, Slot, Step, meta


@dataclass(eq=False)
class Deferred:
    step: Step
    args: Any  # (args, kwargs) as the model passed them
    given: Any  # what the model was handed for its results (None: the op that fires the kernel, until answered)
    writes: list[torch.Tensor]  # the model's own tensors (not placeholders) it writes in place
    done: bool = False  # run for real already

    def run(self, into: set[int] | None = None) -> None:
        """Run the op for real; its results go into the placeholders handed out (only those in `into`)."""
        args, kwargs = self.args
        real = self.step.func(*args, **kwargs)
        for g, r in zip(pytree.tree_leaves(self.given), pytree.tree_leaves(real)):
            if isinstance(g, torch.Tensor) and g is not r and (into is None or id(g) in into):
                g.copy_(r)


def storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def tensors(tree) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


@dataclass(eq=False)  # one occurrence: compared by identity
class Match:
    pattern: Pattern
    pos: int = 0
    bound: dict[Slot, torch.Tensor] = field(default_factory=dict)
    deferred: list[Deferred] = field(default_factory=list)
    tainted: set[int] = field(default_factory=set)  # ids of placeholders and views of them
    viewed: set[int] = field(default_factory=set)  # placeholders a view was taken of
    inner: set[int] = field(default_factory=set)  # placeholders (and their views) that no output fills
    dirty: set[int] = field(default_factory=set)  # storages of the model's tensors a deferred op writes

    def fits(self, template, actual) -> bool:
        if isinstance(template, Slot):
            if not isinstance(actual, torch.Tensor):
                return False
            have = self.bound.get(template)
            if have is not None:
                return have is actual
            if template.kind == "val":
                return False
            metas = self.pattern.params if template.kind == "param" else self.pattern.input_meta
            return meta(actual) == metas[template.key]
        if isinstance(template, (list, tuple)):
            return (
                isinstance(actual, (list, tuple))
                and len(template) == len(actual)
                and all(self.fits(t, a) for t, a in zip(template, actual))
            )
        if isinstance(template, dict):
            return (
                isinstance(actual, dict)
                and template.keys() == actual.keys()
                and all(self.fits(template[k], actual[k]) for k in template)
            )
        if isinstance(template, torch.device):
            return isinstance(actual, torch.device) and template.type == actual.type
        if isinstance(actual, torch.Tensor):
            return False
        return type(template) is type(actual) and template == actual

    def bind(self, template, actual) -> None:
        for t, a in zip(pytree.tree_leaves(template), pytree.tree_leaves(actual)):
            if isinstance(t, Slot) and isinstance(a, torch.Tensor):
                self.bound.setdefault(t, a)

    def touches_dirty(self, ts: list[torch.Tensor]) -> bool:
        return bool(self.dirty) and any(storage(t) in self.dirty for t in ts)

    def writes_after_kernel(self, given: list[torch.Tensor]) -> None:
        """After the kernel ran on the region's inputs: run for real the deferred ops that bring the
        model's tensors the region writes in place to their new values, except those whose new value
        the kernel's outputs give (`given`, copied in after this), and the ops that read such a tensor
        before a later write to it (their values could not be computed again after it)."""
        written = [w for d in self.deferred for w in d.writes]
        need = {storage(w) for w in written if not any(w is g or w._base is g for g in given)}
        written_later: set[int] = set()
        keep = []
        for d in reversed(self.deferred):
            reads = {storage(t) for t in tensors(d.args)}
            makes = {storage(t) for t in tensors(d.given)} | {storage(w) for w in d.writes}
            if makes & need or (not d.writes and reads & written_later):
                keep.append(d)
                need |= reads
            written_later |= {storage(w) for w in d.writes}
        for d in reversed(keep):
            d.run()
            d.done = True


# A kernel may derive tensors from the parameters it is bound to (a merged QKV weight: its region's sibling
# projections concatenated once, not at every call): ModelNew's method of this name, which its __init__ calls
# too, runs after each binding (once per layer's parameters); the bytes it made are said (`derived_bytes`).
DERIVE = "derive_weights"


def bind(base: torch.nn.Module, real: dict[str, torch.Tensor]) -> torch.nn.Module:
    """A shallow copy of `base` whose tensors named in `real` are those tensors (no copy of their data), its
    derived tensors (DERIVE) made again from them."""
    made = copy.copy(base)
    made._parameters, made._buffers = dict(base._parameters), dict(base._buffers)
    for attr, t in real.items():
        if attr in made._parameters:
            made._parameters[attr] = t if isinstance(t, torch.nn.Parameter) else torch.nn.Parameter(t, False)
        elif attr in made._buffers:
            made._buffers[attr] = t
        else:
            object.__setattr__(made, attr, t)
    if callable(getattr(type(made), DERIVE, None)):
        with torch.no_grad():
            getattr(made, DERIVE)()
        held = {t.untyped_storage().data_ptr() for t in real.values()}
        derived = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in _tensors_of(made)}
        object.__setattr__(made, "_ks_derived_bytes", sum(n for p, n in derived.items() if p not in held))
    return made


def _tensors_of(module: torch.nn.Module) -> list[torch.Tensor]:
    """The tensors a module holds itself: its parameters, buffers and tensor attributes."""
    held = [*module._parameters.values(), *module._buffers.values(), *vars(module).values()]
    return [t for t in held if isinstance(t, torch.Tensor)]


def derived_bytes(bound: list[torch.nn.Module]) -> int:
    """The memory the kernel's derived tensors (DERIVE) take, over its bound copies."""
    return sum(getattr(m, "_ks_derived_bytes", 0) for m in {id(m): m for m in bound}.values())
