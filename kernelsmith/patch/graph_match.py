"""A kernel's region found in an aten graph: the matching that torch.compile's graph pass (graph_pass.py)
and the eager path (eager_graph.py) share. Torch only: `kernelsmith apply` copies this file into the
patch it writes.

The region as a graph holds it: its task's Model traced as Inductor traces a model (make_fx with
Inductor's decompositions and no-op removal: `pattern_matcher.fwd_only`), its inputs and parameters as
placeholders, once, when first needed. A match binds each placeholder to a node of the graph laid out as
the region's input was (shape, stride, dtype), matches every op with its constants (`view`,
`_unsafe_view` and `reshape` are one op there), and keeps inside itself every value the region makes but
does not return. A node is one value of the region at most (views aside, which a graph may share): sibling
projections of one input, alike in shape, are found as three nodes, never one node thrice.

Sizes: a graph traced with a dynamic dimension holds symbolic sizes. A match takes a symbolic size whose
value in this compile (its hint) is the region's, and then specializes it (`specialize`): torch.compile
guards on that value, so the graph is used only where the region's inputs are laid out as its task's, and
another size compiles anew. The region's structure found at other sizes (`elsewhere`: a symbolic size of
any value, a static size of another) is noted: the eager path specializes those sizes too (the compile
pass, for a kernel judged at several shapes), and a region so found at none of its kernel's shapes is
said once (`missed`, shapes.py).

Overlaps: where two kernels' regions hold the same ops (a GroupNorm + SiLU inside an add + GroupNorm +
SiLU), the larger region's kernel takes them, whatever the order of the patch's kernels (`pick`), and the
smaller is noted as served by it there; "larger" counts compute ops, views not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_RESHAPES = frozenset(("view", "_unsafe_view", "reshape"))
_VIEWS = _RESHAPES | {"alias", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze", "flatten", "unflatten"}


def _kind(target) -> object:
    name = getattr(getattr(target, "overloadpacket", None), "__name__", None)
    return "reshape" if name in _RESHAPES else target


def is_view(node: torch.fx.Node) -> bool:
    packet = getattr(node.target, "overloadpacket", None)
    return node.op == "call_function" and getattr(packet, "__name__", None) in _VIEWS


class RegionGraph:
    """A kernel's region as an aten graph holds it (`kop`: a kernel_op.KernelOp). `ok` is False where no
    graph holds it whole; `why` then says why (a region that reads a value into Python, BERT's
    `attention_mask.all()` before its mask is built, cannot be traced to a graph)."""

    def __init__(self, kop):
        self.why: str | None = None
        try:
            self._trace(kop)
        except Exception as exc:  # noqa: BLE001 - this region alone is left as the model's ops, not every kernel
            self.why = f"its region does not trace to a graph ({type(exc).__name__}: {str(exc).splitlines()[0]})"
            self.ok, self.placeholders, self.metas, self.bases, self.search = False, [], [], [], []

    def _trace(self, kop) -> None:
        from torch._inductor.pattern_matcher import fwd_only
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        n, reference, attrs = len(kop.sample), kop.reference, kop.attrs

        def region(*flat):
            params = dict(zip(attrs, flat[n:]))
            outs = torch.func.functional_call(reference, params, tuple(flat[:n]))
            return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)

        state = dict(reference.named_parameters()) | dict(reference.named_buffers())
        with unset_fake_temporarily(), torch.no_grad():
            gm = fwd_only(region, [*kop.sample, *(state[a].detach() for a in attrs)])
        graph = gm.graph
        _drop_same_views(graph)
        self.placeholders = [p for p in graph.nodes if p.op == "placeholder"]
        self.metas = [tuple(m) for m in kop.pattern.input_meta] + [tuple(kop.pattern.params[a]) for a in attrs]
        outs = next(p for p in graph.nodes if p.op == "output").args[0]
        bases: list[torch.fx.Node | None] = [None] * len(kop.bases)
        for out, base in zip(outs, kop.pattern.bases):
            while is_view(out) or (out.op == "call_function" and getattr(out.target, "is_view", False)):
                out = out.args[0]  # a `select` after the region's last op too: another output gives its base
            bases[kop.bases.index(base)] = out
        order = {node: i for i, node in enumerate(graph.nodes)}
        self.ok = all(isinstance(b, torch.fx.Node) and b.op == "call_function" for b in bases)
        # the last made first: most of the region lies under it
        self.bases: list[torch.fx.Node] = [b for b in bases if b is not None]
        self.search = sorted(self.bases, key=lambda b: order[b])
        self.gm = gm  # keeps the nodes' graph alive


def _drop_same_views(graph: torch.fx.Graph) -> None:
    """Reshapes that keep their input's shape and strides go, their users reading the input: a model's graph
    may hold them or not (an SDPA's output viewed as it is, `view(x, [2, -1, 1, 16])`, is in its eager trace and
    not in torch.compile's graph), and a placeholder binds to either node alike, having the same layout."""
    for node in list(graph.nodes):
        source = node.args[0] if node.op == "call_function" and node.args else None
        if _kind(node.target) != "reshape" or not isinstance(source, torch.fx.Node):
            continue
        got, given = node.meta.get("val"), source.meta.get("val")
        if not isinstance(got, torch.Tensor) or not isinstance(given, torch.Tensor):
            continue
        if (got.shape, got.stride(), got.dtype) == (given.shape, given.stride(), given.dtype):
            node.replace_all_uses_with(source)
            graph.erase_node(node)


class _AnySize(list):
    """Symbols noted where a size fits whatever its value (a symbolic one, noted, or a static one): the
    region's structure found at other sizes than its task's (find's `elsewhere`)."""


def _sizes_fit(got, want: tuple, symbols: list | None) -> bool:
    """Whether sizes (or strides) `got` are `want`; a symbolic one fits by its hint where `symbols` is a
    list (it is noted there, to specialize), and never where it is None."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if isinstance(g, torch.SymInt) and not is_concrete_int(g):
            hint = g.node.hint if symbols is not None else None
            if hint is None or (int(hint) != w and not isinstance(symbols, _AnySize)):
                return False
            symbols.append(g)  # pyright: ignore[reportOptionalMemberAccess]
        elif isinstance(symbols, _AnySize) and type(g) is int:
            continue
        elif isinstance(g, bool) or not isinstance(g, (int, torch.SymInt)) or int(g) != w:
            return False
    return True


def fits(node: torch.fx.Node, m: tuple, symbols: list | None = None) -> bool:
    """The node's value is laid out as `m` (shape, stride, dtype)."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype != m[2]:
        return False
    try:
        return _sizes_fit(val.shape, m[0], symbols) and _sizes_fit(val.stride(), m[1], symbols)
    except Exception:  # sizes that cannot be read (unbacked): not the region's
        return False


def specialize(symbols: list) -> None:
    """Each symbolic size at its value in this compile, guarded: the compile holds only where it is."""
    from torch.fx.experimental.symbolic_shapes import guard_int

    for s in symbols:
        guard_int(s)


def _match(p, g, m: dict, symbols: list | None = None) -> bool:
    """Whether graph value `g` is pattern value `p`, extending the binding `m` (pattern node -> node).
    `symbols`: where a list, a size the graph computes (a node whose value is a SymInt) matches the
    pattern's constant by its hint, noted there."""
    if isinstance(p, torch.fx.Node):
        if not isinstance(g, torch.fx.Node):
            return False
        if p in m:
            return m[p] is g
        if not is_view(p) and any(v is g and not is_view(k) for k, v in m.items()):
            return False  # one node is one of the region's values (Q, K and V projections alike are three)
        if p.op == "placeholder":
            m[p] = g
            return True
        if g.op != "call_function" or _kind(p.target) != _kind(g.target) or p.kwargs.keys() != g.kwargs.keys():
            return False
        m[p] = g
        return _match(list(p.args), list(g.args), m, symbols) and all(
            _match(p.kwargs[k], g.kwargs[k], m, symbols) for k in p.kwargs
        )
    if isinstance(p, (list, tuple)):
        return isinstance(g, (list, tuple)) and len(p) == len(g) and all(_match(a, b, m, symbols) for a, b in zip(p, g))
    if isinstance(g, torch.fx.Node) and type(p) is int and symbols is not None:
        return _sizes_fit([g.meta.get("val")], (p,), symbols)
    if isinstance(symbols, _AnySize) and type(p) is int and type(g) is int:
        return True  # a size of the region's at other sizes (a view's, an expand's)
    return type(p) is type(g) and p == g


def find(
    graph: torch.fx.Graph,
    region: RegionGraph,
    sealed: bool = True,
    symbols: list | None = None,
    elsewhere: list | None = None,
    missed: list | None = None,
) -> list[dict]:
    """Every occurrence of the region in the graph, as {pattern node: graph node}; none overlap. `sealed`:
    no value the region makes but does not return is read outside it (False: a training graph's forward,
    which saves such values for its backward, is only looked at). `symbols`: a list to note the symbolic
    sizes the matches read (see the module's docstring); None matches static sizes only. `elsewhere`: a
    list to note the symbolic sizes of the region's ops found at other sizes than its task's (specialized
    too, the graph holds only at those sizes, and the task's sizes, traced anew, match); `missed`: a list to
    note each such occurrence, as (its last node, its first input's shape there)."""
    found, used = [], set()
    first = region.search[-1]
    nodes = list(graph.nodes)
    for g in nodes:
        if g in used or g.op != "call_function" or _kind(g.target) != _kind(first.target):
            continue
        noted: list | None = [] if symbols is not None else None
        m = _attempt(g, region, nodes, used, sealed, noted)
        if m is not None:
            found.append(m)
            used |= {v for k, v in m.items() if k.op != "placeholder"}
            if symbols is not None and noted:
                symbols.extend(noted)
        elif elsewhere is not None and symbols is not None:
            wild = _AnySize()
            if (at := _attempt(g, region, nodes, used, sealed, wild)) is not None:
                elsewhere.extend(wild)
                if missed is not None:
                    missed.append((g, _shape(at[region.placeholders[0]])))
    return found


def _attempt(g, region: RegionGraph, nodes: list, used: set, sealed: bool, noted: list | None) -> dict | None:
    """The region whose last value is `g`, or None."""
    m: dict | None = {}
    if not _match(region.search[-1], g, m, noted):
        return None
    for base in region.search[:-1]:  # a value the region returns beside it, not under it (rotary's q beside k)
        m = m if m is None or base in m else _extend(m, base, [c for c in nodes if c not in used], noted)
    inside = {v for k, v in (m or {}).items() if k.op != "placeholder"}
    if m is None or used & inside or not _holds(m, region, sealed, noted):
        return None
    return m


def _extend(m: dict, base: torch.fx.Node, candidates: list[torch.fx.Node], symbols: list | None) -> dict | None:
    for c in candidates:
        tried, noted = dict(m), [] if symbols is not None else None
        if c.op == "call_function" and _kind(c.target) == _kind(base.target) and _match(base, c, tried, noted):
            if symbols is not None and noted:
                symbols.extend(noted)
            return tried
    return None


def _holds(m: dict, region: RegionGraph, sealed: bool, symbols: list | None) -> bool:
    """The inputs are laid out as the region's, and (`sealed`) no value the region makes but does not
    return is read outside it (a view of an input may be)."""
    if any(p not in m for p in region.placeholders):
        return False
    if not all(fits(m[p], meta, symbols) for p, meta in zip(region.placeholders, region.metas)):
        return False
    inside = {v for k, v in m.items() if k.op != "placeholder"}
    for p, g in m.items():
        if not sealed or p.op == "placeholder" or p in region.bases or is_view(g):
            continue
        if any(u not in inside for u in g.users):
            return False
    # No input is made from the region's values: the operator could not run before it.
    args = {m[p] for p in region.placeholders}
    seen, todo = set(inside), [u for v in inside for u in v.users if u not in inside]
    while todo:
        node = todo.pop()
        if node in args:
            return False
        if node not in seen:
            seen.add(node)
            todo.extend(node.users)
    return True


def size(region: RegionGraph) -> int:
    """The region's compute ops (views not counted): which of two overlapping regions is the larger."""
    return sum(1 for n in region.gm.graph.nodes if n.op == "call_function" and not is_view(n))


def candidates(
    graph: torch.fx.Graph,
    kops: list,
    symbols: list,
    elsewhere: list,
    missed: dict[str, set[str]] | None = None,
    near_of: Callable[[Any], bool] = lambda kop: True,
) -> list[tuple]:
    """Every sealed occurrence of each kernel's region in the graph as (kop, region, match), the larger
    regions first (the kernels' order among equals); each kop's `graph` is a RegionGraph already (a kernel
    at each shape of its task is a kop of its own, of the same name: patch/shapes.py). `elsewhere` notes
    the symbolic sizes of the regions found at other sizes (of the kops `near_of` names); `missed`, each
    kernel's regions found at other sizes than every one of its shapes (name -> their inputs' shapes)."""
    ordered = sorted((k for k in kops if k.graph.ok), key=lambda k: -size(k.graph))
    found, hit, near = [], set(), []
    for k in ordered:
        wild: list = []
        for m in find(graph, k.graph, True, symbols, elsewhere if near_of(k) else [], wild):
            found.append((k, k.graph, m))
            # every node it holds: a near miss begun at one (Q's projection tried as V's, of another width) is none
            hit |= {(k.name, g) for p, g in m.items() if p.op != "placeholder"}
        near += [(k.name, g, shape) for g, shape in wild]
    for name, g, shape in near:
        if missed is not None and (name, g) not in hit:
            missed.setdefault(name, set()).add(shape)
    return found


def _shape(node: torch.fx.Node) -> str:
    """A value's shape in words (a symbolic size by its value in this compile)."""
    val = node.meta.get("val")
    sizes = getattr(val, "shape", ())
    return str([int(s.node.hint) if isinstance(s, torch.SymInt) and s.node.hint is not None else s for s in sizes])


def pick(found: list[tuple]) -> tuple[list[tuple], dict[str, str]]:
    """The occurrences that are taken, from `candidates`' list: each one unless its ops overlap one taken
    before it (a larger region's). Returns (those taken, {a kernel one of whose occurrences lay inside a
    taken region of another kernel: that kernel}), so that the smaller kernel is said as served by it."""
    taken, owner, within = [], {}, {}
    for occurrence in found:  # the same tuples: the eager rewrite leaves one out by its identity
        kop, _, m = occurrence
        inside = {g for p, g in m.items() if p.op != "placeholder"}
        over = next((owner[g] for g in inside if g in owner), None)
        if over is None:
            taken.append(occurrence)
            owner |= dict.fromkeys(inside, kop.name)
        elif over != kop.name:
            within.setdefault(kop.name, over)
    return taken, within
