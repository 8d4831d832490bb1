"""A captured region's pattern: its task's `Model` run once under a recorder gives each aten op, its
constants, and where each tensor argument comes from (input k, parameter `attr`, or an earlier op's
value). Torch only: `kernelsmith apply` copies this file into the patch it writes (substitute.py uses it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

# Views that the schema does not mark as views, and ops that only wrap a constant: no kernel work
# (capture.regions reads the same set; this file must stay torch-only, so it holds it).
GLUE = frozenset("_unsafe_view lift_fresh detach alias _fused_sdp_choice".split())


class PatternError(Exception):
    """A task whose region cannot be substituted in place (the reason is the message)."""


@dataclass(frozen=True)
class Slot:
    kind: str  # "in" (an activation, by position), "param" (by attribute), "val" (the n-th value made)
    key: Any


@dataclass
class Step:
    func: Any  # OpOverload
    args: Any  # the op's arguments with tensors as Slot
    out: Any  # its result with tensors as Slot("val", n)
    out_meta: dict[int, tuple]  # val n -> (shape, stride, dtype)
    deferred: bool  # a compute op: answered with an empty tensor, its work done by the kernel
    aliases: dict[int, Slot] = field(default_factory=dict)  # val n -> the argument it is (an in-place op's result)


@dataclass
class Pattern:
    name: str
    steps: list[Step]
    n_inputs: int
    params: dict[str, tuple]  # attribute -> (shape, stride, dtype)
    outputs: list[Slot]
    last: int = 0  # index of the last deferred step: the kernel runs there
    bases: list[Slot] = field(default_factory=list)  # per output: the value it is, or is a view of
    # per output: the views after `last` that make it of its base; None where one of them keeps part of the
    # base (ViT's CLS token `select`ed from the final norm's output): another output gives the base then
    unviews: list[list[Step] | None] = field(default_factory=list)
    input_meta: list[tuple] = field(default_factory=list)  # per input: (shape, stride, dtype)

    def __post_init__(self) -> None:
        self.last = max(i for i, s in enumerate(self.steps) if s.deferred)


def meta(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.dtype


def writes(func, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    names = [a.name for a in func._schema.arguments]
    named = dict(zip(names, args)) | kwargs
    return [
        named[a.name]
        for a in func._schema.arguments
        if a.alias_info is not None and a.alias_info.is_write and isinstance(named.get(a.name), torch.Tensor)
    ]


def _is_compute(func, args: tuple, kwargs: dict, result: Any) -> bool:
    reads = any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves((args, kwargs)))
    makes = any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves(result))
    return not func.is_view and func.overloadpacket.__name__ not in GLUE and reads and makes


# How capture writes a task whose region writes one of its inputs in place: the forward first clones
# the input (`w1 = x1.clone()`, `w2 = self.cache.clone()`) and writes the clone (write_task.render).
_CLONED = re.compile(r"^\s+w\d+ = (x\d+|self\.\w+)\.clone\(\)\s*$", re.MULTILINE)


def written_slots(task_source: str) -> list[Slot]:
    """The inputs and parameters a task's region writes in place in the model (the ones it clones first)."""
    names = _CLONED.findall(task_source)
    return [Slot("in", int(n[1:])) if n.startswith("x") else Slot("param", n.removeprefix("self.")) for n in names]


class Tracer(TorchDispatchMode):
    def __init__(self, slots: dict[int, Slot], written: list[Slot]):
        super().__init__()
        self.slots, self.steps, self.keep = slots, [], []
        self.values = 0
        self.cloned = set(written)  # the task's clones of these stand for the model's own tensors

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func is torch.ops.aten.clone.default and not kwargs and self.slots.get(id(args[0])) in self.cloned:
            self.cloned.discard(slot := self.slots[id(args[0])])
            self.slots[id(result)] = slot  # the model runs no clone: the ops that follow write its tensor
            self.keep.append(result)
            return result

        def slot_of(x):
            if not isinstance(x, torch.Tensor):
                return x
            if id(x) not in self.slots:
                raise PatternError(f"op {func} reads a tensor that is not an input, parameter or earlier value")
            return self.slots[id(x)]

        r_args = pytree.tree_map(slot_of, (args, kwargs))
        given = {id(x): slot_of(x) for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)}
        metas: dict[int, tuple] = {}
        aliases: dict[int, Slot] = {}

        def new_val(x):
            if not isinstance(x, torch.Tensor):
                return x
            n = self.values
            self.values += 1
            if id(x) in given:
                aliases[n] = given[id(x)]
            self.slots[id(x)] = Slot("val", n)
            self.keep.append(x)  # alive, so that no later tensor reuses its id
            metas[n] = meta(x)
            return Slot("val", n)

        out = pytree.tree_map(new_val, result)
        self.steps.append(Step(func, r_args, out, metas, _is_compute(func, args, kwargs, result), aliases))
        return result


def trace(name: str, model: torch.nn.Module, inputs: list, written: list[Slot] | None = None) -> Pattern:
    """The pattern of a task's Model: its ops with every tensor argument traced to where it came from.
    `written`: the inputs and parameters the region writes in place (`written_slots`)."""
    slots = {id(t): Slot("in", k) for k, t in enumerate(inputs) if isinstance(t, torch.Tensor)}
    params = dict(model.named_parameters()) | dict(model.named_buffers())
    slots |= {id(t): Slot("param", attr) for attr, t in params.items()}
    tracer = Tracer(slots, written or [])
    with torch.no_grad(), tracer:
        result = model(*inputs)
    leaves = list(result) if isinstance(result, (tuple, list)) else [result]
    outputs = []
    for leaf in leaves:
        slot = slots.get(id(leaf)) if isinstance(leaf, torch.Tensor) else None
        if slot is None or (slot.kind != "val" and slot not in (written or [])):
            raise PatternError("an output of its Model is not a value its ops make")
        outputs.append(slot)
    if not any(s.deferred for s in tracer.steps):
        raise PatternError("its Model runs no compute op")
    pattern = Pattern(name, tracer.steps, len(inputs), {a: meta(t) for a, t in params.items()}, outputs)
    pattern.input_meta = [meta(t) for t in inputs]
    partial: list[str] = []
    for out in outputs:
        base, unviews, why = _base(pattern, out)
        pattern.bases.append(base)
        pattern.unviews.append(None if why else unviews)
        partial.append(why)
    for base, why in zip(pattern.bases, partial):
        given = any(b == base and u is not None for b, u in zip(pattern.bases, pattern.unviews))
        if why and not given:
            raise PatternError(why)
    return pattern


def slot_meta(pattern: Pattern, slot: Slot) -> tuple:
    """(shape, stride, dtype) of a slot: an input's, a parameter's, or the value's where it is made."""
    if slot.kind == "in":
        return pattern.input_meta[slot.key]
    if slot.kind == "param":
        return pattern.params[slot.key]
    return next(s.out_meta[slot.key] for s in pattern.steps if slot.key in s.out_meta)


def _base(pattern: Pattern, out: Slot) -> tuple[Slot, list[Step], str]:
    """The value made by the last compute op or before that `out` is, or is a view of, the views after the
    last compute op that make `out` of it (a view the region borrowed at its end, such as the `expand` and
    `view` before the next bmm, runs in the model on the value the kernel's output gives), and why `out`
    cannot give that value ("" where it can): one of the views keeps part of it (a `select`, a `slice`), so
    another output must give it (trace checks)."""
    slot, unviews, partial = out, [], ""
    while slot.kind == "val":
        step = next(s for s in pattern.steps if slot.key in s.out_meta)
        if pattern.steps.index(step) <= pattern.last:
            break
        ins = [x for x in pytree.tree_leaves(step.args) if isinstance(x, Slot)]
        name = step.func.overloadpacket.__name__
        if name not in _WHOLE_VIEWS or len(ins) != 1 or step.func._overloadname == "dtype":
            why = "a view of part of it" if step.func.is_view else "not a view"
            said = (
                f"an output is made by {step.func} after its last compute op ({why}: the kernel's output "
                "cannot give the value it is made of)"
            )
            if not step.func.is_view or len(ins) != 1:
                raise PatternError(said)
            partial = partial or said
        slot, unviews = ins[0], [step, *unviews]
    return slot, unviews, partial


# Views that keep every element of their input: the input follows from the output (`unviewer`).
_WHOLE_VIEWS = frozenset(
    "view _unsafe_view reshape unsqueeze squeeze flatten unflatten alias detach expand transpose t permute".split()
)


def unviewer(pattern: Pattern, step: Step) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function that gives the tensor `step` (one of _WHOLE_VIEWS, after the last compute op) made its
    argument of; what it reads of the pattern is looked up once (a kernel's every call runs it)."""
    name, args = step.func.overloadpacket.__name__, step.args[0]
    shape = slot_meta(pattern, next(x for x in pytree.tree_leaves(step.args) if isinstance(x, Slot)))[0]
    if name == "expand":  # its broadcast dimensions hold copies: keep one

        def unexpand(got: torch.Tensor) -> torch.Tensor:
            if got.dim() > len(shape):  # leading dimensions the expand added (no `alias` op where none)
                got = got[(0,) * (got.dim() - len(shape))]
            for d, n in enumerate(shape):
                if n == 1 and got.shape[d] != 1:
                    got = got.narrow(d, 0, 1)
            return got

        return unexpand
    if name == "transpose":
        return lambda got: got.transpose(args[1], args[2])
    if name == "t":
        return lambda got: got.t()
    if name == "permute":  # its inverse: the input's dimension d is the output's dims.index(d)
        dims = [d % len(args[1]) for d in args[1]]
        inverse = [dims.index(d) for d in range(len(dims))]
        return lambda got: got.permute(inverse)
    return lambda got: got.reshape(shape)
