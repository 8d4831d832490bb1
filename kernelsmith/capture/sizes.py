"""CPU sizes for a captured task: the region's extents as named module-level constants, and a
`CPU_SIZES` dict of small values for them (kernelsmith/task_sizes.py: `--small` sets them), so that a
Triton kernel can be tried in the interpreter on the CPU at the region's structure.

An extent of the region's activations (an input's dimension above MAX_KEPT) becomes a constant named
by where it first appears (`X0_DIM2`); every dimension of equal size shares it. Extents of the
region's parameters and buffers stay as they are (a norm's width, a projection's output), and so
does any activation dimension of the same size. The dimensions of everything the region makes follow
from its ops: a view's sizes are products of its input's (grouped as `view` groups them), a `cat` adds
its inputs', any other op's dimension is the input's dimension of that size. The largest constants
shrink first, to SMALL, SMALL + STEP, ... (distinct, in the same order as the real sizes) until each
input holds at most BUDGET elements. A view that splits a named extent into one large dimension and
small ones ([B*T] as [B, T]) makes the large one the extent divided by them; any other split pins the
extent (it keeps its size) and the plan is made again. Capture then runs the task at its CPU sizes and
checks every op's output shape against the plan (validate.py), and leaves CPU_SIZES out when they
differ. A task whose inputs are small as captured declares `CPU_SIZES = {}` (it runs as it is).

At several shapes (capture's `--shape`: regions.Elsewhere), a size is its value at every shape, the main
one first (its key), and sizes are told apart by their keys: an activation's extent that differs between
the shapes is named however small (a batch of 1), every size of the same key shares its constant, and
`SHAPES` gives the varying constants' values at each other shape. Each size the task writes must follow
from the named ones at every shape (checked as the plan is made); where one does not (Unfit), the task
holds the main shape only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kernelsmith.capture.regions import Elsewhere, Region, packet
from kernelsmith.capture.tape import Ref, Tape

MAX_KEPT = 8  # dimensions this small are never named (nor taken for one: dim indices, flags)
BUDGET = 1 << 16  # elements per input at CPU sizes
SMALL, STEP = 8, 8  # CPU sizes 8, 16, 24, ... in the order of the real sizes (a batch of 2, 4 or 8 divides them)
VIEWS = frozenset({"view", "_unsafe_view", "reshape"})


class Unfit(Exception):
    """A size at another shape that follows from no named size: the task holds the main shape only."""


@dataclass(frozen=True)
class Dim:
    """One dimension: the text that makes it in the task, its CPU size, the constants it uses, and its
    value at every shape (the main one first; () for a number written as it is)."""

    text: str
    small: int
    names: frozenset[str] = frozenset()
    vals: tuple[int, ...] = ()

    @classmethod
    def const(cls, v: int) -> Dim:
        return cls(str(v), v)


def _vals(dims: list[Dim], combine) -> tuple[int, ...]:
    n = max((len(d.vals) for d in dims), default=0)
    return tuple(combine([d.vals[k] if d.vals else int(d.text) for d in dims]) for k in range(n))


def _product(dims: list[Dim]) -> Dim:
    named = [d for d in dims if d.names]
    const = math.prod(int(d.text) for d in dims if not d.names)
    if not named:
        return Dim.const(const)
    grouped = [d.text if " + " not in d.text and " // " not in d.text else f"({d.text})" for d in named]
    parts = grouped + ([str(const)] if const != 1 else [])
    names = frozenset().union(*(d.names for d in named))
    return Dim(" * ".join(parts), math.prod(d.small for d in dims), names, _vals(dims, math.prod))


def _sum(dims: list[Dim]) -> Dim:
    if not any(d.names for d in dims):
        return Dim.const(sum(int(d.text) for d in dims))
    names = frozenset().union(*(d.names for d in dims))
    return Dim(" + ".join(d.text for d in dims), sum(d.small for d in dims), names, _vals(dims, sum))


class _Pinned(Exception):
    def __init__(self, names: frozenset[str]):
        self.names = names


@dataclass
class SizePlan:
    constants: dict[str, int] = field(default_factory=dict)  # name -> real size
    cpu: dict[str, int] = field(default_factory=dict)  # name -> CPU size
    dims: dict[int, list[Dim]] = field(default_factory=dict)  # tid -> its dimensions
    by_value: dict[tuple[int, ...], Dim] = field(default_factory=dict)  # a size's key -> its constant
    fits: bool = True  # every input is within BUDGET at the CPU sizes
    elsewhere: Elsewhere | None = None  # the region at the other shapes (None: one shape)
    varying: dict[str, tuple[int, ...]] = field(default_factory=dict)  # a constant that differs -> its other values

    def key(self, tid: int, d: int, v: int) -> tuple[int, ...]:
        """Dimension `d` of `tid` (of size `v` here) at every shape."""
        return self.elsewhere.key(v, tid, d) if self.elsewhere is not None else (v,)

    def int_key(self, i: int, k: int, v: int) -> tuple[int, ...]:
        """The k-th int argument of op `i` (`v` here) at every shape."""
        return (v, *(ints[i][k] for ints in self.elsewhere.ints)) if self.elsewhere is not None else (v,)

    def check(self, dims: list[Dim], keys: list[tuple[int, ...]], what: str) -> None:
        """Raises Unfit where a dimension written is not the recorded one at some shape."""
        if self.elsewhere is not None:
            for d, (dim, key) in enumerate(zip(dims, keys)):
                if (dim.vals or (key[0],) * len(key)) != key:
                    raise Unfit(f"{what}'s dimension {d} ({'/'.join(map(str, key))}) follows from no named size")

    def shape(self, tid: int, shape: tuple[int, ...]) -> str:
        dims = self.dims.get(tid) or [Dim.const(v) for v in shape]
        return "[" + ", ".join(d.text for d in dims) + "]"

    def stride(self, tid: int, shape: tuple[int, ...], stride: tuple[int, ...]) -> str:
        """The strides as products of the dimensions when the layout is dense (a permutation of a
        contiguous one), else as recorded."""
        dims = self.dims.get(tid) or [Dim.const(v) for v in shape]
        order = sorted((k for k in range(len(shape)) if shape[k] != 1 and stride[k] != 0), key=lambda k: -stride[k])
        texts, step, inner = [str(s) for s in stride], 1, []
        for k in reversed(order):
            if stride[k] != step:
                return "[" + ", ".join(texts) + "]"
            texts[k] = _product(inner).text if inner else "1"
            step *= shape[k]
            inner.append(dims[k])
        return "[" + ", ".join(texts) + "]"

    def size_list(self, tape: Tape, i: int, sizes) -> str | None:
        """A view's size argument as its output's dimensions (-1 kept), or None for another op."""
        out = tape.ops[i].out
        if packet(tape, i) not in VIEWS or not isinstance(out, Ref) or out.tid not in self.dims:
            return None
        if not isinstance(sizes, (list, tuple)) or not all(type(v) is int for v in sizes):
            return None
        dims = self.dims[out.tid]
        if len(sizes) != len(dims):
            return None
        return "[" + ", ".join("-1" if v == -1 else d.text for v, d in zip(sizes, dims)) + "]"

    def small_of(self, tid: int) -> list[int] | None:
        dims = self.dims.get(tid)
        return [d.small for d in dims] if dims is not None else None

    def int_text(self, tape: Tape, i: int, v: int, k: int = 0) -> str:
        """The k-th int argument of op `i`: the dimension of that size of one of its inputs, a constant, a
        constant plus a little (a decode step's position), else as recorded."""
        if isinstance(v, bool):
            return repr(v)
        key = self.int_key(i, k, v)
        varies = len(set(key)) > 1
        if v <= MAX_KEPT and not varies:
            return repr(v)
        found = self.lookup(tape, i, key)
        if found is not None:
            return found.text
        for d in range(1, MAX_KEPT + 1):
            if (near := tuple(x - d for x in key)) in self.by_value:
                return f"{self.by_value[near].text} + {d}"
        if varies:
            raise Unfit(f"{tape.ops[i].name}'s argument {'/'.join(map(str, key))} follows from no named size")
        return repr(v)

    def lookup(self, tape: Tape, i: int, key: tuple[int, ...]) -> Dim | None:
        for tid in _tensor_args(tape.ops[i]):
            for size, dim in zip(tape.meta[tid].shape, self.dims.get(tid, [])):
                if dim.names and (dim.vals or (size,)) == key:
                    return dim
        return self.by_value.get(key)

    def declared(self) -> str:
        """The constants' lines (real sizes)."""
        return "".join(f"{name} = {v}\n" for name, v in self.constants.items())

    def cpu_block(self) -> str:
        """CPU_SIZES: the constants' CPU sizes; empty for a task CPU-sized as written; none (no text)
        for one that cannot shrink to BUDGET (every large extent a parameter's)."""
        if not self.constants and not self.fits:
            return ""
        return (
            "\n# Sizes for the Triton interpreter on the CPU (`--small`): the region's ranks, dtypes and ops.\n"
            f"CPU_SIZES = {self.cpu!r}\n"
        )

    def shapes_block(self, keep: list[int] | None = None) -> str:
        """SHAPES: the varying constants' values at each other shape (those of `keep`, their index among the
        region's other shapes: all by default); none (no text) where no constant varies."""
        count = len(next(iter(self.varying.values()))) if self.varying else 0
        shapes = [{n: v[j] for n, v in self.varying.items()} for j in range(count) if keep is None or j in keep]
        if not shapes:
            return ""
        return (
            "\n# The other shapes the model was captured at (`--shape`): the named sizes at each. A kernel is\n"
            "# judged at every one (docs/capture.md, Shapes a server sees).\n"
            f"SHAPES = {shapes!r}\n"
        )


def _tensor_args(op) -> list[int]:
    from torch.utils import _pytree as pytree

    return [r.tid for r in pytree.tree_leaves((op.args, op.kwargs)) if isinstance(r, Ref)]


def _flat(key: tuple[int, ...]) -> bool:
    """A size of 1 at every shape: a view's grouping leaves it out."""
    return all(x == 1 for x in key)


def _view_dims(
    in_shape: tuple[int, ...],
    in_dims: list[Dim],
    out_shape: tuple[int, ...],
    out_keys: list[tuple[int, ...]],
    named: dict[tuple[int, ...], Dim],
) -> list[Dim]:
    """A view's output dimensions from its input's, grouped as `view` groups them. An extent split
    over several dimensions keeps its size, and so do those it splits into (`named`: the constants)."""
    ins = [(v, d) for v, d in zip(in_shape, in_dims) if not _flat(d.vals or (v,))]
    outs = [k for k, key in enumerate(out_keys) if not _flat(key)]
    result = [Dim.const(1) for _ in out_shape]
    if 0 in in_shape or 0 in out_shape:
        split = frozenset().union(*(d.names for _, d in ins))
        if split:
            raise _Pinned(split)
        return [Dim.const(v) for v in out_shape]
    a = b = 0
    while b < len(outs):
        pi, ga, po, gb = ins[a][0], [a], out_shape[outs[b]], [b]
        a, b = a + 1, b + 1
        while pi != po:
            if pi < po:
                pi, a = pi * ins[a][0], a + 1
                ga.append(a - 1)
            else:
                po, b = po * out_shape[outs[b]], b + 1
                gb.append(b - 1)
        if len(gb) == 1:
            result[outs[gb[0]]] = _product([ins[k][1] for k in ga])
            continue
        keys = [out_keys[outs[k]] for k in gb]
        divided = _divided(ins[ga[0]][1], keys, named) if len(ga) == 1 else None
        if divided is not None:
            for k, dim in zip(gb, divided):
                result[outs[k]] = dim
            continue
        split = frozenset().union(*(ins[k][1].names for k in ga), *(named[key].names for key in keys if key in named))
        if split:
            raise _Pinned(split)
        for k in gb:
            result[outs[k]] = Dim.const(out_shape[outs[k]])
    return result


def _divided(whole: Dim, parts: list[tuple[int, ...]], named: dict[tuple[int, ...], Dim]) -> list[Dim] | None:
    """A named extent viewed as one large dimension and small ones ([B*T] as [B, T], B <= MAX_KEPT):
    the large one is the extent divided by the others (a named one by its constant), when its CPU size
    divides too. `parts`: each dimension's key."""
    large = [k for k, key in enumerate(parts) if key[0] > MAX_KEPT]
    if not whole.names or len(large) != 1 or parts[large[0]] in named:
        return None
    small = [named.get(key) or Dim.const(key[0]) for k, key in enumerate(parts) if k != large[0]]
    rest = _product(small)
    if whole.small % rest.small:
        return None
    text = whole.text if " " not in whole.text else f"({whole.text})"
    by = rest.text if " " not in rest.text else f"({rest.text})"
    vals = tuple(w // r for w, r in zip(whole.vals, rest.vals or (int(rest.text),) * len(whole.vals)))
    made = Dim(f"{text} // {by}", whole.small // rest.small, whole.names | rest.names, vals)
    it = iter(small)
    return [made if k == large[0] else next(it) for k in range(len(parts))]


def _out_dims(plan: SizePlan, tape: Tape, i: int, tid: int) -> list[Dim]:
    op, shape = tape.ops[i], tape.meta[tid].shape
    args = _tensor_args(op)
    keys = [plan.key(tid, d, v) for d, v in enumerate(shape)]
    if packet(tape, i) in VIEWS and args and args[0] in plan.dims:
        dims = _view_dims(tape.meta[args[0]].shape, plan.dims[args[0]], shape, keys, plan.by_value)
        plan.check(dims, keys, tape.ops[i].name)
        return dims
    named = lambda key: plan.lookup(tape, i, key) if key[0] > MAX_KEPT or len(set(key)) > 1 else None
    dims = [named(key) or Dim.const(v) for v, key in zip(shape, keys)]
    if packet(tape, i) == "cat" and op.args and isinstance(op.args[0], (list, tuple)):
        parts = [r.tid for r in op.args[0] if isinstance(r, Ref) and r.tid in plan.dims]
        along = op.args[1] if len(op.args) > 1 else op.kwargs.get("dim", 0)
        along = along % len(shape) if shape else 0
        if parts and all(len(plan.dims[t]) == len(shape) for t in parts):
            dims[along] = _sum([plan.dims[t][along] for t in parts])
    plan.check(dims, keys, tape.ops[i].name)
    return dims


def _attempt(
    tape: Tape, region: Region, activations: dict[int, int], pinned: set[tuple], elsewhere: Elsewhere | None
) -> SizePlan | set[tuple]:
    """The plan with the sizes in `pinned` kept, or the sizes a view would split (to keep too)."""
    plan = SizePlan(elsewhere=elsewhere)
    for tid, k in activations.items():
        for d, v in enumerate(tape.meta[tid].shape):
            key = plan.key(tid, d, v)
            if (v > MAX_KEPT or len(set(key)) > 1) and key not in pinned and key not in plan.by_value:
                name = f"X{k}_DIM{d}"
                plan.constants[name] = v
                plan.by_value[key] = Dim(name, v, frozenset({name}), key)
                if len(set(key)) > 1:
                    plan.varying[name] = key[1:]
    _shrink(plan, tape, activations)
    for tid, _ in region.inputs:
        shape = tape.meta[tid].shape
        keys = [plan.key(tid, d, v) for d, v in enumerate(shape)]
        plan.dims[tid] = [plan.by_value.get(key) or Dim.const(v) for v, key in zip(shape, keys)]
        plan.check(plan.dims[tid], keys, "an input")
    for i in region.replay:
        outs = tape.ops[i].out if isinstance(tape.ops[i].out, (list, tuple)) else [tape.ops[i].out]
        for r in outs:
            if isinstance(r, Ref) and r.tid not in plan.dims:
                try:
                    plan.dims[r.tid] = _out_dims(plan, tape, i, r.tid)
                except _Pinned as exc:
                    return {key for key, dim in plan.by_value.items() if dim.names & exc.names}
    return plan


def _shrink(plan: SizePlan, tape: Tape, activations: dict[int, int]) -> None:
    """The CPU sizes: the largest constants shrink first until each input is within BUDGET."""
    plan.cpu = dict(plan.constants)
    shrunk: list[str] = []
    largest_first = sorted(plan.constants, key=lambda n: -plan.constants[n])

    def named(tid: int) -> list[tuple[Dim | None, int]]:
        return [(plan.by_value.get(plan.key(tid, d, v)), v) for d, v in enumerate(tape.meta[tid].shape)]

    def numel(tid: int) -> int:
        return math.prod(plan.cpu[dim.text] if dim is not None else v for dim, v in named(tid))

    while (heavy := next((t for t in activations if numel(t) > BUDGET), None)) is not None:
        names = {dim.text for dim, _ in named(heavy) if dim is not None}
        pick = next((n for n in largest_first if n in names and n not in shrunk), None)
        if pick is None:
            plan.fits = False
            break
        shrunk.append(pick)
        for k, name in enumerate(sorted(shrunk, key=lambda n: plan.constants[n])):
            plan.cpu[name] = min(plan.constants[name], SMALL + STEP * k)
    for key, dim in list(plan.by_value.items()):
        plan.by_value[key] = Dim(dim.text, plan.cpu[dim.text], dim.names, dim.vals)


def plan_sizes(
    tape: Tape, region: Region, activations: dict[int, int], fixed: list[int], elsewhere: Elsewhere | None = None
) -> SizePlan:
    """The plan for `region`: `activations` are its get_inputs() tensors that may shrink (tid -> its
    place in get_inputs(), which names its constants: X1_DIM0 is first seen in x1's dimension 0),
    `fixed` the tensors whose every dimension keeps its size (parameters, buffers, literals);
    `elsewhere`: the region at the other shapes (raises Unfit where a size there follows from no named one)."""
    plan = SizePlan(elsewhere=elsewhere)
    pinned = {plan.key(tid, d, v) for tid in fixed for d, v in enumerate(tape.meta[tid].shape)}
    if any(len(set(key)) > 1 for key in pinned):
        raise Unfit("a tensor of fixed shape (a parameter's view, a literal) differs at another shape")
    while not isinstance(plan := _attempt(tape, region, activations, pinned, elsewhere), SizePlan):
        if any(len(set(key)) > 1 for key in plan):
            raise Unfit("a view splits a size that differs between the shapes")
        pinned |= plan
    return plan
