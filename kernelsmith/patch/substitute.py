"""A captured region's kernel run in place of the region's aten ops, inside a model's own forward.

Imports torch only: `kernelsmith apply` copies this file into the patch it writes, so a patched model
needs no kernelsmith at serving time.

How: the task file of a region replays its aten ops, so running the task's `Model` once under a
recorder gives the region's pattern (pattern.py: each op, its constants, and where each tensor argument comes
from: input k, parameter `attr`, or an earlier op's value). While one of the region's module calls
runs, a TorchDispatchMode compares the ops that arrive with the pattern. Views and tensor creation run
as usual; the pattern's compute ops are not run but answered with empty tensors of the recorded shape;
when the last compute op arrives, the kernel (`ModelNew`, bound to the real module's parameters) runs
once on the region's real inputs and its outputs take the place of the region's (an output that the
region makes by views after its last compute op gives the value under them: pattern.unviewer). A write
in place to the model's own tensors waits too, and is made after the kernel ran (match.py). An op
outside the pattern that reads a deferred value, reads or writes a tensor whose write waits, or writes
one of the region's inputs, or the end of the module call, first runs the deferred ops for real (the
match is dropped), so a partial match never changes the model's results. Hand-written because no
library substitutes an aten sequence in eager mode.

The kernels have no backward: a compute op that autograd records (grad enabled and a tensor it reads
requires grad) is never answered by a placeholder. A match that meets one runs as the model's own ops
(counted in `autograd`, and said once per patch in a warning), so a patch never changes gradients; the
kernel serves where no graph is recorded (`torch.no_grad()`, `torch.inference_mode()`, or nothing the
region reads requires grad).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from .match import Deferred, Match, bind, storage, tensors
from .pattern import Pattern, Slot, Step, slot_meta, unviewer, writes

MAX_OPEN = 4  # partial matches of one pattern kept at once; the oldest is run for real beyond this


@dataclass
class Counts:
    fired: int = 0  # regions the kernel took
    dropped: int = 0  # partial matches run as the model's own ops
    recomputed: int = 0  # taken regions whose inner values the model read after all (run for real then)
    autograd: int = 0  # regions run as the model's own ops because autograd was recording them


@dataclass
class BuiltKernel:
    pattern: Pattern  # the region's, from its task
    module: torch.nn.Module  # ModelNew
    attrs: dict[str, str]  # each of Model's parameters and buffers -> the tensor of ModelNew that takes its place
    reference: torch.nn.Module  # the task's Model: the region's own ops
    sample: list  # the task's inputs, as the region's were laid out
    written: list[Slot]  # the inputs and parameters the region writes in place
    key: str  # a digest of its task's and kernel's text (its operator's name)


class Substitution(TorchDispatchMode):
    """The dispatch mode a patch enters while one of its regions' module calls runs."""

    def __init__(self, kernels: dict[str, BuiltKernel], label: str = "the patch"):
        super().__init__()
        self.kernels, self.label = kernels, label
        self.warned = False
        self.enabled: dict[str, int] = {name: 0 for name in kernels}
        self.open: list[Match] = []
        self.fired: list[Match] = []  # taken in this module call, kept to recompute an inner value read late
        self.counts: dict[str, Counts] = {name: Counts() for name in kernels}
        self.within: dict[str, str] = {}  # a kernel a region of which a larger kernel's region held and took -> it
        self._bound: dict[tuple, torch.nn.Module] = {}
        self._plans: dict[int, list[tuple]] = {}  # output_plan of each pattern (a kernel's at each shape), made once
        # A range around each region taken (the kernel, its outputs put in place, inner values computed
        # late), by kernel name: how `kernelsmith apply` times each kernel in the forward (None: none).
        self.timed: Callable[[str], AbstractContextManager] | None = None
        self.entered = False  # the mode is on (a module call of a region runs)

    def plan(self, pattern: Pattern) -> list[tuple]:
        """output_plan(pattern), made once for the patch: every call of the kernel checks its outputs by it."""
        made = self._plans.get(id(pattern))
        if made is None:
            made = self._plans[id(pattern)] = output_plan(pattern)
        return made

    # -- the op stream
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        here = (args, kwargs)
        recorded = torch.is_grad_enabled() and any(
            x.requires_grad for x in pytree.tree_leaves(here) if isinstance(x, torch.Tensor)
        )
        fitting = [
            m for m in self.open if m.pattern.steps[m.pos].func is func and m.fits(m.pattern.steps[m.pos].args, here)
        ]
        if recorded:  # a compute op autograd records is the model's own: its match runs for real
            for match in [m for m in fitting if m.pattern.steps[m.pos].deferred]:
                fitting.remove(match)
                self._drop(match)
                self.recorded(match.pattern.name)
        ts = tensors(here)
        for match in [m for m in self.open if m not in fitting and m.touches_dirty(ts)]:
            self._drop(match)  # the op reads or writes a tensor whose write the match deferred
        if fitting:
            return self._take(fitting, args, kwargs)
        reads = {id(x) for x in ts}
        written = {id(x) for x in writes(func, args, kwargs)}
        for match in list(self.open):
            if reads & match.tainted or any(id(t) in written for t in match.bound.values()):
                self._drop(match)
        for match in list(self.fired):
            if reads & match.inner or any(id(t) in written for t in match.bound.values()):
                self._recompute(match)
        # An op may begin several patterns (a view of a projection's output begins the rotary embedding
        # and the residual add alike): each begins a match of its own.
        starts = [
            Match(pattern)
            for name, pattern in ((n, k.pattern) for n, k in self.kernels.items())
            if self.enabled[name] and pattern.steps[0].func is func
        ]
        starts = [m for m in starts if m.fits(m.pattern.steps[0].args, here)]
        if recorded:
            for match in [m for m in starts if m.pattern.steps[0].deferred]:
                starts.remove(match)
                self.recorded(match.pattern.name)
        for match in starts:
            self.open.append(match)
            if len([m for m in self.open if m.pattern is match.pattern]) > MAX_OPEN:
                self._drop(next(m for m in self.open if m.pattern is match.pattern))
        if starts:
            return self._take(starts, args, kwargs)
        return func(*args, **kwargs)

    def _take(self, matches: list[Match], args: tuple, kwargs: dict):
        """The op is the next step of `matches`: a view or creation runs once for all of them; a compute
        op is deferred (or fires the kernel) for the first, as one op's result can be answered once."""
        if matches[0].pattern.steps[matches[0].pos].deferred:
            return self._defer(matches[0], matches[0].pattern.steps[matches[0].pos], args, kwargs)
        result = matches[0].pattern.steps[matches[0].pos].func(*args, **kwargs)
        ins = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        made = {id(x) for x in pytree.tree_leaves(result) if isinstance(x, torch.Tensor)}
        for match in matches:
            step = match.pattern.steps[match.pos]
            match.bind(step.args, (args, kwargs))
            match.pos += 1
            if any(id(x) in match.tainted for x in ins):  # a view of a placeholder is tainted
                match.viewed |= {id(x) for x in ins}
                match.tainted |= made
            if any(id(x) in match.inner for x in ins):
                match.inner |= made
            match.bind(step.out, result)
        return result

    def _defer(self, match: Match, step: Step, args: tuple, kwargs: dict):
        match.bind(step.args, (args, kwargs))
        for key, arg in step.aliases.items():  # an in-place op's result is the tensor it writes
            match.bound[Slot("val", key)] = match.bound[arg]
        index, match.pos = match.pos, match.pos + 1
        writes_own = [w for w in writes(step.func, args, kwargs) if id(w) not in match.tainted]
        match.dirty |= {storage(w) for w in writes_own}
        if index == match.pattern.last:
            return self._fire(match, step, Deferred(step, (args, kwargs), None, writes_own))
        device = tensors((args, kwargs))[0].device

        def placeholder(slot):
            if not isinstance(slot, Slot):
                return slot
            if slot.key in step.aliases:
                return match.bound[Slot("val", slot.key)]
            shape, stride, dtype = step.out_meta[slot.key]
            return torch.empty_strided(shape, stride, dtype=dtype, device=device)

        result = pytree.tree_map(placeholder, step.out)
        match.deferred.append(Deferred(step, (args, kwargs), result, writes_own))
        filled = {b.key for b in match.pattern.bases if b.kind == "val"}
        for slot, x in zip(pytree.tree_leaves(step.out), pytree.tree_leaves(result)):
            if isinstance(slot, Slot) and slot.key not in step.aliases:
                match.tainted.add(id(x))
                if slot.key not in filled:
                    match.inner.add(id(x))
        match.bind(step.out, result)
        return result

    def _kernel(self, match: Match) -> torch.nn.Module:
        """The kernel module bound to this occurrence's real parameters (one per parameter set)."""
        pattern, base, attrs = (k := self.kernels[match.pattern.name]).pattern, k.module, k.attrs
        real = {attrs[attr]: match.bound[Slot("param", attr)] for attr in pattern.params}
        key = (pattern.name, *(id(t) for t in real.values()))
        made = self._bound.get(key)
        if made is None:
            made = self._bound[key] = bind(base, real)
        return made

    def _fire(self, match: Match, step: Step, last: Deferred):
        pattern = match.pattern
        inputs = [match.bound.get(Slot("in", k)) for k in range(pattern.n_inputs)]
        unbound = any(Slot("param", a) not in match.bound for a in pattern.params)
        if unbound or any(x is None for x in inputs):  # read only after the last compute op: run for real
            self._drop(match)
            args, kwargs = last.args
            return step.func(*args, **kwargs)
        self.open.remove(match)
        match.deferred.append(last)
        with self._range(pattern.name):
            here, device = self._run(match, step, inputs)
        self.counts[pattern.name].fired += 1

        def answer(slot):
            if not isinstance(slot, Slot):
                return slot
            if slot.key in step.aliases:
                return match.bound[Slot("val", slot.key)]
            if slot.key in here:
                return here[slot.key]
            shape, stride, dtype = step.out_meta[slot.key]
            inner = torch.empty_strided(shape, stride, dtype=dtype, device=device)
            match.inner.add(id(inner))
            return inner

        last.given = pytree.tree_map(answer, step.out)
        if match.inner:
            self.fired.append(match)
            if len([m for m in self.fired if m.pattern is pattern]) > MAX_OPEN:
                self.fired.remove(next(m for m in self.fired if m.pattern is pattern))
        return last.given

    def _run(self, match: Match, step: Step, inputs: list) -> tuple[dict[int, torch.Tensor], torch.device]:
        """The kernel on the region's inputs, its outputs put where the model holds the region's values:
        the outputs that answer the last compute op (by slot key), and the device they are on."""
        pattern = match.pattern
        outs = self._kernel(match)(*inputs)  # the region's writes in place are not made yet: it reads its inputs
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        values = values_of(pattern, outs, self.plan(pattern))

        def held(base: Slot) -> torch.Tensor | None:
            """The tensor the model holds for a value the kernel gives (None: the answer to this op)."""
            made_here = base.kind == "val" and base.key in step.out_meta and base.key not in step.aliases
            return None if made_here else match.bound[base]

        written = [w for d in match.deferred for w in d.writes]
        given = [t for t in map(held, values) if t is not None and id(t) not in match.tainted]
        given = [t for t in given if any(w is t or w._base is t for w in written)]  # its new value is an output
        if written:
            match.writes_after_kernel(given)
        here: dict[int, torch.Tensor] = {}
        for base, got in values.items():
            shape, stride, _ = slot_meta(pattern, base)
            t = held(base)
            if t is None:
                here[base.key] = got if laid_out(got, stride) else restride(got, shape, stride)
            elif id(t) in match.tainted and id(t) not in match.viewed and tuple(got.stride()) == stride:
                t.set_(got)  # pyright: ignore[reportArgumentType]  (a tensor source: no copy)
            elif id(t) in match.tainted or any(t is g for g in given):
                t.copy_(got)  # a placeholder a view was taken of, or the model's tensor written in place
            # else: a view of the model's own tensors, made by the model itself
        return here, outs[0].device

    def _range(self, name: str) -> AbstractContextManager:
        return self.timed(name) if self.timed is not None else nullcontext()

    def recorded(self, name: str) -> None:
        self.counts[name].autograd += 1
        if not self.warned:
            self.warned = True
            warnings.warn(
                f"{self.label}: autograd is recording the model's forward, and the kernels have no backward: "
                "their regions run as the model's own ops (patch.counts[...].autograd), so gradients are the "
                "model's; call the model under torch.no_grad() or torch.inference_mode() for the kernels to serve",
                stacklevel=2,
            )

    def _drop(self, match: Match) -> None:
        """Run a partial match's deferred ops for real, in order, into the tensors already handed out."""
        if match in self.open:
            self.open.remove(match)
        for deferred in match.deferred:
            deferred.run()
        if match.deferred:
            self.counts[match.pattern.name].dropped += 1

    def _recompute(self, match: Match) -> None:
        """A taken region whose inner value the model reads after all: its ops run for real into the
        inner placeholders (the outputs keep the kernel's values; writes in place were made at the kernel)."""
        self.fired.remove(match)
        with self._range(match.pattern.name):  # the region's cost in the patched forward too
            for deferred in match.deferred:
                if not deferred.done and not deferred.writes:
                    deferred.run(into=match.inner)
        self.counts[match.pattern.name].recomputed += 1

    def drop_all(self, name: str | None = None) -> None:
        """At the end of a module call: its partial matches run for real (with no mode on: from a hook)."""
        with _disable_current_modes():
            for match in [m for m in self.open if name is None or m.pattern.name == name]:
                self._drop(match)
        self.fired = [m for m in self.fired if name is not None and m.pattern.name != name]


def output_plan(pattern: Pattern) -> list[tuple]:
    """Per output of the region: (its shape as a torch.Size, its dtype, the value it is or is a view of,
    the functions that give that value from it, None where it is a view of part of it that another
    output gives), what `values_of` checks and does, looked up once."""
    plan = []
    for slot, base, unviews in zip(pattern.outputs, pattern.bases, pattern.unviews):
        shape, _, dtype = slot_meta(pattern, slot)
        undo = None if unviews is None else [unviewer(pattern, v) for v in reversed(unviews)]
        plan.append((torch.Size(shape), dtype, base, undo))
    return plan


def values_of(pattern: Pattern, outs: list, plan: list[tuple] | None = None) -> dict[Slot, torch.Tensor]:
    """The kernel's outputs, checked against the region's, as the values they are or are views of.
    `plan`: output_plan(pattern), where the caller keeps it (a kernel's every call)."""
    if plan is None:
        plan = output_plan(pattern)
    if len(outs) != len(plan):
        raise RuntimeError(f"{pattern.name}: the kernel returned {len(outs)} outputs, the region {len(plan)}")
    values: dict[Slot, torch.Tensor] = {}
    for (shape, dtype, base, unviews), got in zip(plan, outs):
        if not isinstance(got, torch.Tensor) or got.shape != shape or got.dtype != dtype:
            what = f"{got.dtype}{list(got.shape)}" if isinstance(got, torch.Tensor) else type(got).__name__
            raise RuntimeError(
                f"{pattern.name}: the kernel returned {what} where the region makes {dtype}{list(shape)}"
            )
        if unviews is None or base in values:  # an output that is a view of another output follows from it
            continue
        for undo in unviews:  # the model makes these views of the value
            got = undo(got)
        values[base] = got
    return values


def restride(t: torch.Tensor, shape: tuple, stride: tuple) -> torch.Tensor:
    return torch.empty_strided(shape, stride, dtype=t.dtype, device=t.device).copy_(t)


def laid_out(t: torch.Tensor, stride: tuple) -> bool:
    """`t` (of the region's shape) is laid out as `stride` says. A dimension of one element may have any
    stride, as torch's own contiguity says: a kernel that gives a [1, n] value as a view of an expanded one
    (stride 0 there) needs no copy (BERT's token type ids copied on every call)."""
    got = t.stride()
    if got == stride:
        return True
    return t.numel() == 0 or all(g == s for g, s, n in zip(got, stride, t.shape) if n != 1)


def hooks(patch, mode: Substitution):
    """The forward hooks that enter the dispatch mode around a region's module calls (eager only: under
    torch.compile the swapped forwards and the graph pass serve). `patch`: patch_runtime.Patch."""
    depth = [0]
    entered = [False]

    def hooks(name: str):
        def pre(_module, _args):
            if torch.compiler.is_compiling():
                patch.noted()  # the graph pass serves this compile's regions; the dispatch mode stays off
                return None
            if not patch.active and not depth[0]:
                return
            mode.enabled[name] += 1
            depth[0] += 1
            if depth[0] == 1:
                mode.__enter__()
                entered[0] = mode.entered = True

        def post(_module, _args, _out):
            if not entered[0]:
                return
            mode.enabled[name] -= 1
            if not mode.enabled[name]:
                mode.drop_all(name)
            depth[0] -= 1
            if depth[0] == 0:
                mode.drop_all()
                mode.__exit__(None, None, None)
                entered[0] = mode.entered = False

        return pre, post

    return hooks
