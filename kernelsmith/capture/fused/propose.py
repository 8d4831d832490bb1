"""Regions that hold a library op with its neighbours, each a union of whole split regions (regions.py):

- `prologue`: a GEMM with the region that makes its input (an RMSNorm into the projection after it);
  `prologue+siblings` where that input feeds several GEMMs (the norm with the Q, K and V projections);
- `epilogue`: a GEMM with a region that reads its output (its activation, the SiLU-mul gating, a residual
  add and the norm after it);
- `siblings`: the GEMMs that read one activation (Q, K and V; gate and up), one merged GEMM for a kernel;
  `siblings+epilogue` with a region that reads several of them (gate and up with their SiLU-mul);
- `attention`: an attention op with the regions that make its inputs (the rotary embedding and the KV-cache
  append of a decode step).

Each union must be one piece of the forward: no op outside it both reads what it makes and makes what it reads
(`_convex`). The GEMMs' weights are the task's parameters (the `t` view of a Linear's weight is borrowed, so
the task reads the parameter), the other values it reads its inputs; its reference is the model's own ops.
The split regions stay beside them in capture.json, so a search can choose either, and a patch's larger
region takes the ops both hold (patch/graph_match.py, `pick`).
"""

from __future__ import annotations

from kernelsmith.capture.regions import Graph, Region, find_regions, is_glue, is_library, make_region, packet
from kernelsmith.capture.tape import Tape

GEMMS = frozenset({"mm", "addmm"})  # a Linear after autograd: `t` of its weight, then mm (addmm with a bias)


def _is_attention(name: str) -> bool:
    return name == "scaled_dot_product_attention" or name.startswith("_scaled_dot_product")


def all_regions(tape: Tape) -> list[Region]:
    """The split regions, then those across the library boundary."""
    regions = find_regions(tape)
    return regions + fused_regions(tape, regions)


def _sources(tape: Tape, g: Graph, region: Region, owner: dict[int, int]) -> set[int]:
    """The regions (by index) whose values `region` reads, through views that belong to none."""
    inside, found = set(region.replay), set()
    todo = [d for i in region.replay for d in g.deps[i] if d not in inside]
    seen: set[int] = set()
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        if d in owner:
            found.add(owner[d])
        elif is_glue(tape, d) and not is_library(tape, d):
            todo += [e for e in g.deps[d] if e not in inside]
    return found


def _activation(tape: Tape, region: Region) -> tuple[int, int] | None:
    """The activation a GEMM region reads (the first input not made from a parameter), by (tid, version)."""
    for tid, ver in region.inputs:
        if tape.origin.get(tid, ("",))[0] not in ("parameter", "buffer") and not _param_views(tape, tid):
            return tid, ver
    return None


def _param_views(tape: Tape, tid: int) -> list[int]:
    """The ops that make `tid` as a view of a parameter or buffer (a Linear's `t` of its weight), or []."""
    chain = []
    while tid in tape.creator and tape.ops[tape.creator[tid]].func.is_view:
        op = tape.ops[tape.creator[tid]]
        chain.append(op.index)
        bases = list(op.reads)
        if len(bases) != 1:
            return []
        tid = bases[0]
    return chain if chain and tape.origin.get(tid, ("",))[0] in ("parameter", "buffer") else []


def _convex(g: Graph, inside: set[int]) -> bool:
    """No op outside `inside` reads what it makes and makes what it reads (the union runs as one piece)."""
    low, high = min(inside), max(inside)
    after, todo = set(), [u for i in inside for u in g.users[i] if u not in inside and u < high]
    while todo:
        j = todo.pop()
        if j not in after:
            after.add(j)
            todo += [u for u in g.users[j] if u not in inside and u < high]
    before, todo = set(), [d for i in inside for d in g.deps[i] if d not in inside and d > low]
    while todo:
        j = todo.pop()
        if j not in before:
            before.add(j)
            todo += [d for d in g.deps[j] if d not in inside and d > low]
    return not (after & before)


def _proposals(tape: Tape, g: Graph, regions: list[Region]) -> dict[frozenset[int], str]:
    """Unions of split regions (by index) -> their kind, in the order found."""
    owner = {i: k for k, r in enumerate(regions) for i in r.ops}
    sources = [_sources(tape, g, r, owner) for r in regions]
    gemms = [k for k, r in enumerate(regions) if r.library and packet(tape, r.ops[-1]) in GEMMS]
    by_input: dict[tuple[int, int] | None, list[int]] = {}
    for k in gemms:
        by_input.setdefault(_activation(tape, regions[k]), []).append(k)
    siblings = {k: group for key, group in by_input.items() if key is not None and len(group) > 1 for k in group}
    found: dict[frozenset[int], str] = {}
    for group in {tuple(group) for group in siblings.values()}:
        found.setdefault(frozenset(group), "siblings")
    for e, region in enumerate(regions):
        if region.library:
            if _is_attention(packet(tape, region.ops[-1])):
                feeding = {k for k in sources[e] if not regions[k].library}
                if feeding:
                    found.setdefault(frozenset({e, *feeding}), "attention")
            continue
        fed = sorted(k for k in sources[e] if k in gemms)
        for k in fed:
            found.setdefault(frozenset({k, e}), "epilogue")
        for group in {tuple(siblings[k]) for k in fed if k in siblings}:
            if sum(k in fed for k in group) > 1:
                found.setdefault(frozenset({*group, e}), "siblings+epilogue")
        readers: dict[tuple[int, int] | None, list[int]] = {}
        for k in gemms:
            if e in sources[k]:
                readers.setdefault(_activation(tape, regions[k]), []).append(k)
        for group in readers.values():
            found.setdefault(frozenset({e, *group}), "prologue" if len(group) == 1 else "prologue+siblings")
    return found


def fused_regions(tape: Tape, regions: list[Region]) -> list[Region]:
    """The regions across the library boundary that the split `regions` of `tape` make (module docstring),
    in the order their first op runs."""
    g = Graph(tape)
    made = []
    for members, kind in _proposals(tape, g, regions).items():
        parts = [regions[k] for k in sorted(members)]
        ops = sorted({i for r in parts for i in r.ops})
        replay = {i for r in parts for i in r.replay}
        if not _convex(g, replay):
            continue
        for i in list(replay):
            replay |= {j for tid in tape.ops[i].reads for j in _param_views(tape, tid)}
        made.append(make_region(tape, ops, sorted(replay), False, kind))
    return sorted(made, key=lambda r: (r.ops[0], len(r.ops)))
