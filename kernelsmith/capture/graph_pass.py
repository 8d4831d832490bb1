"""Regions replaced on torch.compile's graph: a custom Inductor post-grad pass
(`torch._inductor.config.post_grad_custom_post_pass`) finds each installed kernel's region in the
forward graph Inductor compiles and puts the kernel's operator (kernel_op.py) in its place. Torch only:
`kernelsmith apply` copies this file into the patch it writes.

The region as the graph holds it: its task's Model traced as Inductor traces a model (make_fx with
Inductor's decompositions and no-op removal: `pattern_matcher.fwd_only`), its inputs and parameters as
placeholders, once, when a graph is first compiled with the patch installed. A match binds each
placeholder to a node of the graph laid out as the region's input was (shape, stride, dtype), matches
every op with its constants (`view`, `_unsafe_view` and `reshape` are one op there), and keeps inside
itself every value the region makes but does not return. The operator's values replace the region's;
the region's ops, now unused, go. A region at other shapes (a dynamic dimension) is not matched: the
graph keeps the model's ops there.

Only the patched model's graphs: the pass is the process's, but it replaces regions only in the graphs
of a compile that traced the patched model (the patch notes the compile while Dynamo traces its forward
or its regions' modules: Patch.traced), so another model compiled meanwhile keeps its own ops. A graph
break splits the model into several compiles: those that trace no patched module keep the model's ops.

A patch never changes gradients: a graph that autograd will differentiate (a training forward, or its
backward) is left as it is, said once. Inductor says which graphs are inference graphs where torch
has `CustomInferenceAwareGraphPass`; elsewhere the graph's AOT metadata does (an output that requires
grad). The pass's `uuid` names the installed kernels, so Inductor's cache keeps apart graphs compiled
with and without them.
"""

from __future__ import annotations

import hashlib
import operator
import warnings
from pathlib import Path
from typing import Any

import torch
from torch._guards import CompileContext, TracingContext, detect_fake_mode

from .kernel_op import KernelOp

_RESHAPES = frozenset(("view", "_unsafe_view", "reshape"))
_VIEWS = _RESHAPES | {"alias", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze", "flatten", "unflatten"}


def _kind(target) -> object:
    name = getattr(getattr(target, "overloadpacket", None), "__name__", None)
    return "reshape" if name in _RESHAPES else target


def _is_view(node: torch.fx.Node) -> bool:
    packet = getattr(node.target, "overloadpacket", None)
    return node.op == "call_function" and getattr(packet, "__name__", None) in _VIEWS


class Region:
    """A kernel's region as Inductor's graph holds it."""

    def __init__(self, kop: KernelOp):
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
        self.placeholders = [p for p in graph.nodes if p.op == "placeholder"]
        self.metas = [tuple(m) for m in kop.pattern.input_meta] + [tuple(kop.pattern.params[a]) for a in attrs]
        outs = next(p for p in graph.nodes if p.op == "output").args[0]
        bases: list[torch.fx.Node | None] = [None] * len(kop.bases)
        for out, base in zip(outs, kop.pattern.bases):
            while _is_view(out):
                out = out.args[0]
            bases[kop.bases.index(base)] = out
        order = {node: i for i, node in enumerate(graph.nodes)}
        self.ok = all(isinstance(b, torch.fx.Node) and b.op == "call_function" for b in bases)
        # the last made first: most of the region lies under it
        self.bases: list[torch.fx.Node] = [b for b in bases if b is not None]
        self.search = sorted(self.bases, key=lambda b: order[b])
        self.gm = gm  # keeps the nodes' graph alive


def _fits(node: torch.fx.Node, m: tuple) -> bool:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return False
    try:
        return (tuple(val.shape), tuple(val.stride()), val.dtype) == m
    except Exception:  # symbolic sizes: not the region's
        return False


def _match(p, g, m: dict) -> bool:
    """Whether graph value `g` is pattern value `p`, extending the binding `m` (pattern node -> node)."""
    if isinstance(p, torch.fx.Node):
        if not isinstance(g, torch.fx.Node):
            return False
        if p in m:
            return m[p] is g
        if p.op == "placeholder":
            m[p] = g
            return True
        if g.op != "call_function" or _kind(p.target) != _kind(g.target) or p.kwargs.keys() != g.kwargs.keys():
            return False
        m[p] = g
        return _match(list(p.args), list(g.args), m) and all(_match(p.kwargs[k], g.kwargs[k], m) for k in p.kwargs)
    if isinstance(p, (list, tuple)):
        return isinstance(g, (list, tuple)) and len(p) == len(g) and all(_match(a, b, m) for a, b in zip(p, g))
    return type(p) is type(g) and p == g


def find(graph: torch.fx.Graph, region: Region, sealed: bool = True) -> list[dict]:
    """Every occurrence of the region in the graph, as {pattern node: graph node}; none overlap. `sealed`:
    no value the region makes but does not return is read outside it (False: a training graph's forward,
    which saves such values for its backward, is only looked at)."""
    found, used = [], set()
    first, rest = region.search[-1], region.search[:-1]
    nodes = list(graph.nodes)
    for g in nodes:
        if g in used or g.op != "call_function" or _kind(g.target) != _kind(first.target):
            continue
        m: dict | None = {}
        if not _match(first, g, m):
            continue
        for base in rest:  # a value the region returns beside it, not under it (rotary's q beside k)
            m = m if m is None or base in m else _extend(m, base, [c for c in nodes if c not in used])
        inside = {v for k, v in (m or {}).items() if k.op != "placeholder"}
        if m is not None and not used & inside and _holds(m, region, sealed):
            found.append(m)
            used |= inside
    return found


def _extend(m: dict, base: torch.fx.Node, candidates: list[torch.fx.Node]) -> dict | None:
    for c in candidates:
        tried = dict(m)
        if c.op == "call_function" and _kind(c.target) == _kind(base.target) and _match(base, c, tried):
            return tried
    return None


def _holds(m: dict, region: Region, sealed: bool) -> bool:
    """The inputs are laid out as the region's, and (`sealed`) no value the region makes but does not
    return is read outside it (a view of an input may be)."""
    if not all(_fits(m[p], meta) for p, meta in zip(region.placeholders, region.metas) if p in m):
        return False
    if any(p not in m for p in region.placeholders):
        return False
    inside = {v for k, v in m.items() if k.op != "placeholder"}
    for p, g in m.items():
        if not sealed or p.op == "placeholder" or p in region.bases or _is_view(g):
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


def replace(graph: torch.fx.Graph, kop: KernelOp, region: Region, m: dict, renamed: dict) -> None:
    """The operator in the region's place: its values replace the region's, whose ops then go.
    `renamed`: a value an earlier replacement took the place of -> the node that gives it now."""
    args = [renamed.get(m[p], m[p]) for p in region.placeholders]
    n = len(kop.sample)
    order = {node: i for i, node in enumerate(graph.nodes)}
    with graph.inserting_before(max(args, key=lambda a: order[a]).next):
        call = graph.call_function(kop.op, (args[:n], args[n:], kop.instance))
        values = [graph.call_function(operator.getitem, (call, i)) for i in range(len(region.bases))]
    fake = detect_fake_mode([a.meta["val"] for a in args])
    if fake is not None:
        with fake:
            made = kop.op([a.meta["val"] for a in args[:n]], [a.meta["val"] for a in args[n:]], kop.instance)  # pyright: ignore
        call.meta["val"] = made
        for value, val in zip(values, made):
            value.meta["val"] = val
    for base, value in zip(region.bases, values):
        m[base].replace_all_uses_with(value)
        renamed[m[base]] = value


def _needs_grad() -> bool:
    """Where Inductor does not say: whether the graph being compiled is one autograd differentiates (an
    output requires grad, by AOT's metadata). Unknown counts as yes: the graph is left as it is."""
    context = TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    if meta is None:
        return True
    return any(getattr(o, "requires_grad", False) for o in meta.output_info)


class Replacer:
    """The process's one pass: every installed patch's kernels (those whose patch is active). Inductor
    calls it as a `CustomGraphPass` (GraphPass wraps it, made when a patch is first installed, so that
    torch._inductor is imported only then)."""

    def __init__(self):
        self.kops: list[KernelOp] = []
        self.previous: Any = None  # the pass (or list of passes) set before ours: it runs first

    def live(self) -> list[KernelOp]:
        """The kernels whose regions this compile's graphs take: installed, their patch active, and the
        patched model traced in this compile."""
        now = compile_id()
        return [k for k in self.kops if k.installed and k.live() and now in k.compiles]

    def __call__(self, graph: torch.fx.Graph, is_inference: bool | None, aware: type | None) -> None:
        previous = self.previous if isinstance(self.previous, list) else [self.previous]
        for other in [p for p in previous if p is not None]:
            if aware is not None and isinstance(other, aware):
                other(graph, is_inference=bool(is_inference))
            else:
                other(graph)
        kops = self.live()
        if not kops:
            return
        training = _needs_grad() if is_inference is None else not is_inference
        renamed: dict = {}
        for kop in kops:
            if kop.graph is None:
                kop.graph = Region(kop)
            if not kop.graph.ok:
                continue
            matches = find(graph, kop.graph, sealed=not training)
            if matches and training:
                self._said(kop)
                continue
            for m in matches:
                replace(graph, kop, kop.graph, m, renamed)
            if matches:
                graph.eliminate_dead_code()  # the replaced regions' ops go before the next kernel looks
        if renamed:
            from torch._inductor.pattern_matcher import stable_topological_sort

            stable_topological_sort(graph)

    def _said(self, kop: KernelOp) -> None:
        kop.mode.counts[kop.name].autograd += 1
        if not kop.mode.warned:  # said once a patch, as its eager forward under autograd says it
            kop.mode.warned = True
            warnings.warn(
                f"{kop.mode.label}: torch.compile is compiling a graph that autograd differentiates, and the kernels "
                "have no backward: their regions keep the model's own ops there, so gradients are the model's; "
                "compile under torch.no_grad() or torch.inference_mode() for the kernels to serve",
                stacklevel=2,
            )

    def uuid(self, named: type):
        previous = self.previous.uuid() if isinstance(self.previous, named) else None
        if self.previous is not None and previous is None:
            return None  # a pass Inductor cannot name: no cache
        h = hashlib.sha256(Path(__file__).read_bytes() + Path(__file__).with_name("kernel_op.py").read_bytes())
        # The instances too: a graph from Inductor's cache calls each operator with the install it was
        # compiled with, which in another process may be another patch's.
        for name in sorted(f"{k.op_name}:{k.instance}" for k in self.live()):
            h.update(name.encode())
        h.update(repr(previous).encode())
        return h.hexdigest()


_REPLACER = Replacer()
_PASS = None  # the GraphPass set in Inductor's config


def _make_pass():
    """Inductor's pass around the replacer: inference-aware where torch has `CustomInferenceAwareGraphPass`
    (Inductor then says which graphs are inference graphs), a plain `CustomGraphPass` elsewhere."""
    from torch._inductor import custom_graph_pass

    named = custom_graph_pass.CustomGraphPass
    aware = getattr(custom_graph_pass, "CustomInferenceAwareGraphPass", None)

    class GraphPass(aware or named):  # pyright: ignore[reportGeneralTypeIssues, reportUntypedBaseClass]
        def __call__(self, graph, is_inference=None):
            _REPLACER(graph, is_inference, aware)

        def uuid(self):
            return _REPLACER.uuid(named)

    return GraphPass()


def activate(kops: list[KernelOp]) -> None:
    """The kernels' regions are replaced in graphs compiled from now on."""
    global _PASS
    import torch._inductor.config as inductor_config

    if _PASS is None:
        _PASS = _make_pass()
    current = inductor_config.post_grad_custom_post_pass
    if current is not _PASS:
        _REPLACER.previous = current
        inductor_config.post_grad_custom_post_pass = _PASS  # pyright: ignore[reportAttributeAccessIssue]
    _REPLACER.kops.extend(kops)


def deactivate(kops: list[KernelOp]) -> None:
    import torch._inductor.config as inductor_config

    _REPLACER.kops = [k for k in _REPLACER.kops if not any(k is o for o in kops)]
    if not _REPLACER.kops and inductor_config.post_grad_custom_post_pass is _PASS:
        inductor_config.post_grad_custom_post_pass = _REPLACER.previous  # pyright: ignore[reportAttributeAccessIssue]
        _REPLACER.previous = None


def compile_id() -> object:
    """The compile torch.compile is in (None outside one): the same while Dynamo traces a frame and while
    Inductor compiles its graph."""
    return CompileContext.current_compile_id()
