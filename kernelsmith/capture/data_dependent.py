"""Shapes that depend on the data: a count made by `nonzero`, a boolean mask's selection, `masked_select`,
`unique`, `bincount`, `repeat_interleave` (an MoE's tokens per expert), followed through the ops that carry
it. A task holds its region at the shapes of the one forward capture recorded, so a region whose values hold
such a count is flagged (`data_dependent` in capture.json, a note in the table and the task's header): the
model's next forward may route another count there.

Followed from tensor to tensor: an op's output holds the count when one of its inputs does and the count is
one of its extents, unless its shape is that of an input without it (an `index_add` into the model's own
buffer); a view or reshape carries it into the extents made of the count's (`picked.view(-1, 16)` after a
`masked_select`). A count that leaves the tensors for Python (`.tolist()`, `.item()`) and comes back as a
size is not followed.
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from kernelsmith.capture.regions import Region, packet
from kernelsmith.capture.tape import Op, Ref, Tape

# aten ops whose first output's leading extent (or the one along `dim`) counts something in the data
COUNTING = frozenset(
    "nonzero argwhere masked_select bincount repeat_interleave unique _unique _unique2 unique_dim "
    "unique_consecutive unique_dim_consecutive".split()
)


def _refs(value) -> list[int]:
    return [r.tid for r in pytree.tree_leaves(value) if isinstance(r, Ref)]


def _count(tape: Tape, op: Op) -> int | None:
    """The data-dependent extent an op makes, or None when its shapes follow its inputs' alone."""
    name = packet(tape, op.index)
    outs = _refs(op.out)
    if not outs:
        return None
    shape = tape.meta[outs[0]].shape
    if name in COUNTING and op.func._overloadname != "self_int":  # repeat_interleave by a number: not a count
        named = dict(zip([a.name for a in op.func._schema.arguments], op.args)) | op.kwargs
        dim = named.get("dim")
        return shape[dim if isinstance(dim, int) else 0] if shape else None
    if name == "index" and shape:  # x[mask]: a boolean index selects a count of its positions
        indices = op.args[1] if len(op.args) > 1 else op.kwargs.get("indices", [])
        advanced = [k for k, i in enumerate(indices) if isinstance(i, Ref)]
        masks = [k for k in advanced if tape.meta[indices[k].tid].dtype in (torch.bool, torch.uint8)]
        if masks:  # one advanced index keeps its place in the output; several go first
            return shape[masks[0]] if len(advanced) == 1 and masks[0] < len(shape) else shape[0]
    return None


def _groups(a: tuple[int, ...], b: tuple[int, ...]) -> list[tuple[list[int], list[int]]] | None:
    """A reshape's dimensions of `a` and of `b` that hold the same elements ([96] -> [6, 16]: one group),
    or None where no such grouping is plain (an empty tensor)."""
    if 0 in a or 0 in b:
        return None
    groups, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        gi, gj, pa, pb = [i], [j], a[i], b[j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb and i < len(a):
                gi, pa, i = gi + [i], pa * a[i], i + 1
            elif pb < pa and j < len(b):
                gj, pb, j = gj + [j], pb * b[j], j + 1
            else:
                return None
        groups.append((gi, gj))
    return groups


def _reshaped(tape: Tape, op: Op, source: int, carried: frozenset[int]) -> frozenset[int]:
    """The counts a view or reshape of a tensor that holds `carried` holds: its extents made of those of the
    count's dimensions (the one given as -1 where the sizes name one: `picked.view(-1, 16)`)."""
    a, b = tape.meta[source].shape, tape.meta[_refs(op.out)[0]].shape
    groups = _groups(a, b)
    if groups is None:
        return carried & set(b)
    sizes = op.args[1] if len(op.args) > 1 and isinstance(op.args[1], (list, tuple)) else []
    out: set[int] = set()
    for gi, gj in groups:
        if any(a[k] in carried for k in gi):
            inferred = [k for k in gj if k < len(sizes) and sizes[k] == -1]
            wide = [k for k in gj if b[k] != 1]  # a dimension of 1 added beside the count holds none of it
            out |= {b[k] for k in (inferred or wide or gj)}
    return frozenset(out)


RESHAPES = frozenset("view _unsafe_view reshape _reshape_alias view_copy".split())


def data_dependent(tape: Tape) -> dict[int, tuple[frozenset[int], str]]:
    """tid -> (its extents that are counts of the data, the op that made the count and where)."""
    held: dict[int, tuple[frozenset[int], str]] = {}
    for op in tape.ops:
        outs = [t for t in _refs(op.out) if t not in op.reads]  # a tensor written in place keeps its shape
        where = tape.calls[op.call].path if op.call is not None else tape.model_class
        count = _count(tape, op)
        if count is not None:
            name = packet(tape, op.index)
            made = "a boolean mask's selection (aten.index.Tensor)" if name == "index" else f"aten.{name}"
            carried, why = frozenset([count]), f"{made} in {where}"
            # unique's counts too, not its inverse
            outs = outs[:1] + [t for t in outs[1:] if tape.meta[t].shape == (count,)]
        else:
            inherited = [held[t] for t in op.reads if t in held]
            if not inherited:
                continue
            carried, why = frozenset().union(*(c for c, _ in inherited)), inherited[0][1]
            if packet(tape, op.index) in RESHAPES and outs:
                carried = _reshaped(tape, op, next(t for t in op.reads if t in held), carried)
            plain = {tape.meta[t].shape for t in op.reads if t not in held}
            outs = [t for t in outs if tape.meta[t].shape not in plain]
        for t in outs:
            extents = carried & set(tape.meta[t].shape)
            if extents and t not in held:
                held[t] = (frozenset(extents), why)
    return held


def region_note(tape: Tape, held: dict[int, tuple[frozenset[int], str]], region: Region) -> str | None:
    """One line on why the region's shapes depend on the data, or None when they do not."""
    values = [t for t, _ in region.inputs] + [t for t, _ in region.outputs]
    values += [t for i in region.replay for t in _refs(tape.ops[i].out)]
    tid = next((t for t in values if t in held), None)
    if tid is None:
        return None
    extents, why = held[tid]
    counts = ", ".join(str(n) for n in sorted(extents))
    shape = list(tape.meta[tid].shape)
    return f"{counts} in {shape} is a count of the data (from {why}): the task fixes this forward's count"
