"""Regions replaced in eager mode on a traced forward: the module whose call holds a region (its cover:
the innermost module in whose call every op of the region runs, the views its neighbours make
included) runs its forward through TorchDynamo with a backend that compiles nothing. Dynamo hands it the
forward's graph of torch calls; the backend traces that graph down to aten ops (make_fx with Inductor's
decompositions, as the region's own graph is made: aten_trace.py), finds each kernel's region there,
and writes a graph of the forward's own torch calls in which the region's calls are replaced by one call
of the kernel. The graph runs eagerly, op by op, as the module's forward did. Torch only: `kernelsmith
apply` copies this file into the patch it writes.

Why Dynamo: it keeps the forward's Python (guards on shapes, dtypes, grad mode and the module's
attributes; a new case traces anew), side effects (a cache written in place) and graph breaks right, so a
rewrite never changes what the model computes; and a graph of torch calls runs with less host time than
the module's own forward, so a patched forward costs what the model whose source calls the kernel costs.

The rewritten graph keeps each torch call whole where none of its aten ops is the region's. A call some
of whose aten ops are the region's (a `linear` on a 3-D input views its output back to 3-D, and that view
is the first op of the activation's region) runs as its aten ops, the region's left out. A value of the
region that the forward reads outside it, other than what the region returns, keeps the rewrite from
being made (the module's forward runs as it is, said in `Covers.refused`).

Sizes: a dimension Dynamo makes dynamic (a cache that grows each step) stays dynamic; the sizes a region
reads are specialized to the region's, so the graph holds only where they are (graph_match.py).

Under a dispatch mode of the caller's (a FLOP counter, a debug mode), the forward runs as it is: Dynamo
compiles no frame under one.

A trace is not an export: `torch.compiler.is_exporting()` reads False in it, as in the model's own eager
forward, on every torch (`_export_fold`); `torch.compiler.is_compiling()` reads True, as in any trace (a
library's tracing needs it), but where it is known to pick the model's work from no value (transformers'
`is_tracing()` in its mask code) it answers as the eager forward does (`_AS_EAGER`).

Gradients: a graph traced while autograd records (grad enabled and an input requires grad) keeps the
model's ops; each run of it counts in `autograd`.
"""

from __future__ import annotations

import linecache
import operator
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
from torch.utils._python_dispatch import _get_current_dispatch_mode

from . import graph_match
from .aten_trace import Traced
from .kernel_op import KernelOp, instance
from .shapes import say_unjudged

_PATCHED = "kernelsmith_patch"  # the namespace of kernel_op's operators
_WRAPS = [0]  # wrapped forwards made in this process (each compiled function's file name)


class _Reject(Exception):
    """A match the rewrite cannot make (its index in the list of matches)."""

    def __init__(self, index: int, why: str):
        super().__init__(why)
        self.index = index


class _Rewrite:
    """The torch graph with each match's region replaced by its kernel's call (see the module's docstring)."""

    def __init__(self, gm: fx.GraphModule, traced: Traced, matches: list[tuple[KernelOp, Any, dict]]):
        self.gm, self.traced, self.matches = gm, traced, matches
        self.named = {n.name: n for n in gm.graph.nodes}
        self.inside: dict[fx.Node, int] = {}  # an aten node of a region -> its match
        self.bases: dict[fx.Node, tuple[int, int]] = {}  # a value a region returns -> (match, index)
        for i, (_, region, m) in enumerate(matches):
            for p, g in m.items():
                if p.op != "placeholder":
                    self.inside[g] = i
            for j, b in enumerate(region.bases):
                self.bases[m[b]] = (i, j)
        self.by_origin: dict[str, list[fx.Node]] = {}
        for a in traced.aten.graph.nodes:
            if a.op in ("call_function", "get_attr") and a in traced.origin:
                self.by_origin.setdefault(traced.origin[a], []).append(a)
        touched = {traced.origin[a] for a in self.inside if a in traced.origin}
        for t, value in traced.value.items():  # a call that made no op of its own (a `.to` to the dtype a
            values = value if isinstance(value, list) else [value]  # value has) is the region's value
            if t not in self.by_origin and any(v in self.inside for v in values if v is not None):
                touched.add(t)
        self.split = {t for t in touched if any(a not in self.inside for a in self.by_origin.get(t, []))}
        self.absorbed = touched - self.split
        for i, (_, region, m) in enumerate(matches):
            for p in region.placeholders:
                g = m[p]
                if g in self.inside and g not in self.bases:
                    raise _Reject(i, "an input of the region is made inside another region")
                t = traced.origin.get(g)
                if g.op == "call_function" and t is not None and not self._is_value_of(t, g):
                    self.split.add(t)  # the input is a value made inside a torch call: the call runs as aten ops
        self.absorbed -= self.split

    def _is_value_of(self, t: str, g: fx.Node) -> bool:
        v = self.traced.value.get(t)
        return g is v or (isinstance(v, list) and g in v)

    def build(self) -> fx.GraphModule:
        graph, self.env, self.aenv, self.emitted = fx.Graph(), {}, {}, set()
        self.graph = graph
        root = torch.nn.Module()
        aten_ph = list(self.traced.aten.graph.find_nodes(op="placeholder"))
        torch_ph = list(self.gm.graph.find_nodes(op="placeholder"))
        for t, a in zip(torch_ph, aten_ph):
            self.env[t] = self.aenv[a] = graph.node_copy(t)
        for t in self.gm.graph.nodes:
            if t.op == "placeholder":
                continue
            if t.op == "output":
                graph.output(fx.map_arg(t.args[0], self._torch))
            elif t.name in self.split:
                for a in self.by_origin.get(t.name, []):
                    if a not in self.inside and a not in self.aenv:
                        self.aenv[a] = self._aten_copy(a, root)
            elif t.name not in self.absorbed:
                self.env[t] = graph.node_copy(t, self._torch)
                _direct(self.env[t])
        for name, value in self.gm.named_children():
            root.add_module(name, value)
        for node in graph.find_nodes(op="get_attr"):
            if not hasattr(root, node.target):  # pyright: ignore[reportArgumentType]
                setattr(root, node.target, getattr(self.gm, node.target))  # pyright: ignore[reportArgumentType]
        return fx.GraphModule(root, graph)

    def _aten_copy(self, a: fx.Node, root: torch.nn.Module) -> fx.Node:
        if a.op == "get_attr":  # a constant make_fx lifted: kept under a name of its own
            name = f"_ks_const_{len(root._buffers)}"
            root.register_buffer(name, getattr(self.traced.aten, a.target))  # pyright: ignore[reportArgumentType]
            return self.graph.get_attr(name)
        return self.graph.node_copy(a, self._aten)

    def _torch(self, t: fx.Node) -> fx.Node:
        """The new graph's node for torch node `t`'s value."""
        if t in self.env:
            return self.env[t]
        value = self.traced.value.get(t.name)
        if isinstance(value, fx.Node):
            self.env[t] = self._aten(value)
            return self.env[t]
        raise _Reject(-1, f"{t.name}'s value is read outside the region and is not a value it returns")

    def _aten(self, a: fx.Node) -> fx.Node:
        """The new graph's node for aten value `a`."""
        if a in self.aenv:
            return self.aenv[a]
        if a in self.bases:
            self._kernel(self.bases[a][0])
            return self.aenv[a]
        if a in self.inside:
            raise _Reject(self.inside[a], "a value the region makes but does not return is read outside it")
        t = self.traced.origin.get(a)
        if isinstance(a.meta.get("val"), (torch.SymInt, int)) and a.op == "call_function":
            # a size computed inside a call that runs whole (make_fx shares it with later calls): again here
            self.aenv[a] = self.graph.node_copy(a, self._aten)
            return self.aenv[a]
        node = self.named.get(t) if t is not None else None
        if node is not None and node in self.env:
            value = self.traced.value.get(t)  # pyright: ignore[reportArgumentType]
            if value is a:
                return self.env[node]
            if isinstance(value, list) and a in value:
                self.aenv[a] = self.graph.call_function(operator.getitem, (self.env[node], value.index(a)))
                return self.aenv[a]
        raise _Reject(-1, f"aten value {a.name} of {t} is not available where the region reads it")

    def _kernel(self, i: int) -> None:
        kop, region, m = self.matches[i]
        if i in self.emitted:
            return
        self.emitted.add(i)
        args = [self._aten(m[p]) for p in region.placeholders]
        n = len(kop.sample)
        call = self.graph.call_function(kop.eager, (args[:n], args[n:]))
        for j, b in enumerate(region.bases):
            self.aenv[m[b]] = self.graph.call_function(operator.getitem, (call, j))


def _direct(node: fx.Node) -> None:
    """A kernel operator's call (a swapped module's forward traced inside the cover) becomes a direct call
    of its kernel: no dispatcher between the graph and the kernel."""
    if node.op == "call_function" and getattr(node.target, "namespace", None) == _PATCHED and len(node.args) == 3:
        kop = instance(node.args[2])  # pyright: ignore[reportArgumentType]
        if kop is not None:
            node.target, node.args = kop.eager, node.args[:2]


def rewrite(gm: fx.GraphModule, kops: list[KernelOp]) -> tuple[fx.GraphModule, dict[str, int], list[str]]:
    """The torch graph `gm` with every region of `kops` it holds replaced: (the new graph, regions
    replaced per kernel, why a region found was left as it is)."""
    traced = Traced(gm)
    symbols: list = []
    elsewhere: list = []  # the sizes of a region found at other sizes: specialized, so that its own trace anew
    refused: list[str] = []
    for kop in kops:
        if kop.graph is None:
            kop.graph = graph_match.RegionGraph(kop)
        if kop.graph.why is not None and all(not r.startswith(f"{kop.name}: ") for r in refused):
            refused.append(f"{kop.name}: {kop.graph.why}")
    found = graph_match.candidates(traced.aten.graph, kops, symbols, elsewhere, missed := {})
    for kop, region in [(k, k.graph) for k in kops if not any(f is k for f, _, _ in found)]:
        if region is not None and region.ok and graph_match.find(traced.aten.graph, region, False, []):
            refused.append(f"{kop.name}: the forward reads a value the region makes but does not return")
    rejected: set[int] = set()  # ids of occurrences the rewrite cannot make: an overlapping smaller one may be
    while True:
        matches, within = graph_match.pick([c for c in found if id(c) not in rejected])
        try:
            built = _Rewrite(gm, traced, matches).build() if matches else _plain(gm)
            break
        except _Reject as exc:
            if exc.index < 0 or exc.index >= len(matches):
                refused.extend(f"{k.name}: {exc}" for k, _, _ in matches)
                rejected |= {id(c) for c in found}
            else:
                refused.append(f"{matches[exc.index][0].name}: {exc}")
                rejected.add(id(matches[exc.index]))
    if within:  # served by the larger region's kernel there (graph_match.pick); the kernels share one dispatch
        kops[0].dispatch.within |= within
    if missed:  # at a shape no kernel of the region was judged at: the model's ops, said once (shapes.py)
        say_unjudged(kops[0].dispatch, missed)
    graph_match.specialize((symbols if matches else []) + elsewhere)
    counts: dict[str, int] = {}
    for kop, _, _ in matches:
        counts[kop.name] = counts.get(kop.name, 0) + 1
    return built, counts, refused


def _plain(gm: fx.GraphModule) -> fx.GraphModule:
    for node in gm.graph.nodes:
        _direct(node)
    gm.recompile()
    return gm


class Covers:
    """The modules whose forward runs through the backend, for one installed patch: `kops` are the
    kernels whose regions the rewritten graphs take. `refused`: why a region found was left as it is."""

    def __init__(self, kops: list[KernelOp], live: Callable[[], bool], label: str):
        self.kops, self.live, self.label = kops, live, label
        with warnings.catch_warnings():  # what torch says of itself as these load is not the model's
            warnings.simplefilter("ignore", DeprecationWarning)
            import torch._dynamo  # noqa: F401 - loaded at install, not inside the first forward
            import torch._inductor.decomposition  # noqa: F401
            import torch._inductor.fx_passes.post_grad  # noqa: F401
        self.wrapped: list[tuple[torch.nn.Module, bool, Any, str]] = []
        self.refused: list[str] = []
        self.graphs = 0  # graphs the backend rewrote
        self.warned = False

    def backend(self, gm: fx.GraphModule, example_inputs: list) -> Callable:
        """Dynamo's backend: the graph, its regions replaced, run as it is (nothing compiled)."""
        recording = torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs
        )
        if recording:
            return self._recording(gm)
        try:
            built, counts, refused = rewrite(gm, self.kops)
        except Exception as exc:  # noqa: BLE001 - never the model's failure: it runs as it is, said once
            self._say(f"its forward could not be traced for the kernels ({type(exc).__name__}: {exc})")
            return _plain(gm).forward
        self.refused.extend(r for r in refused if r not in self.refused)
        if counts:
            self.graphs += 1
        return built.forward

    def _recording(self, gm: fx.GraphModule) -> Callable:
        """A graph autograd differentiates keeps the model's ops; each run counts in `autograd` for the
        kernels whose regions it holds (said once)."""
        try:
            traced = Traced(gm)
            held = [k for k in self.kops if _holds_region(traced, k)]
        except Exception:  # noqa: BLE001 - counting only
            held = []
        forward = _plain(gm).forward
        if not held:
            return forward

        def run(*args):
            for kop in held:
                kop.dispatch.recorded(kop.name)
            return forward(*args)

        return run

    def _say(self, why: str) -> None:
        if not self.warned:
            self.warned = True
            warnings.warn(f"{self.label}: {why}; the model's own ops run there", stacklevel=3)

    def wrap(self, module: torch.nn.Module, path: str, forwarding: Callable) -> None:
        """The module's forward runs through the backend (its own Dynamo cache: a function of its own)."""
        original = module.forward
        names: dict[str, Any] = {"__ks_original": original}
        source = "def run(*args, **kwargs):\n    return __ks_original(*args, **kwargs)\n"
        # A file name of its own: Dynamo remembers the sizes a function saw by its file and line, and a
        # patch installed on another model must not start with that one's dimensions marked dynamic.
        _WRAPS[0] += 1
        where = f"<kernelsmith eager graph of {path or 'the model'} #{_WRAPS[0]}>"
        # Its source known (inspect.getsourcefile finds it; no mtime: kept): torch 2.11's torch.compile wraps a
        # function with none in one `inner` shared by all, whose cache fills at 8 covers: later ones ran untraced
        linecache.cache[where] = (len(source), None, source.splitlines(True), where)  # pyright: ignore[reportArgumentType]
        exec(compile(source, where, "exec"), names)
        compiled = torch.compile(names["run"], backend=self.backend)
        live, folds = self.live, _export_fold()
        exporting = torch.compiler.is_exporting

        def body(*args, **kwargs):
            # Under a dispatch mode of the caller's, Dynamo runs a frame as it is and never compiles it
            # again: the forward runs as it is there, and is traced at its first call outside one.
            if torch.compiler.is_compiling() or not live() or _get_current_dispatch_mode() is not None:
                return original(*args, **kwargs)
            # the trace folds is_exporting() and asks _AS_EAGER as the model's eager forward does; each put
            # back as it was, which is the trace's own where a covered forward runs between the graphs of
            # another's (after a graph break)
            twins = _eager_twins()
            for module, name, _, twin in twins:
                setattr(module, name, twin)
            before, folds[exporting] = folds[exporting], exporting()
            try:
                return compiled(*args, **kwargs)
            finally:
                folds[exporting] = before
                for module, name, was, _ in twins:
                    setattr(module, name, was)

        self.wrapped.append((module, "forward" in module.__dict__, module.__dict__.get("forward"), path))
        module.forward = forwarding(original, body, by_name=False)

    def restore(self) -> None:
        for module, had, before, _ in reversed(self.wrapped):
            if had:
                module.__dict__["forward"] = before
            else:
                del module.forward
        self.wrapped = []


def _export_fold() -> dict:
    """The table TorchDynamo folds `torch.compiler.is_exporting()` from, where it folds it to True.

    Dynamo of torch 2.11 folds `is_exporting()` to True in every trace, torch.compile's included (since
    pytorch#176499, in torch 2.13, it reads the flag). Model code that asks it takes its export branch there
    (transformers 5.18+'s `_ignore_causal_mask_sdpa` builds an explicit causal mask: see _AS_EAGER), work the
    model's own eager forward never does. A forward traced here runs eagerly, never exported: while it runs
    through Dynamo, the table says what `is_exporting()` says (False unless torch.export runs), then what it
    said before, so that the user's own torch.compile folds as their torch does. A table of its own where
    Dynamo does not fold it so."""
    try:
        from torch._dynamo.variables.torch import tracing_state_functions

        table = tracing_state_functions()
    except Exception:  # noqa: BLE001 - a torch without the table reads the flag itself
        table = {}
    return table if table.get(torch.compiler.is_exporting) is True else {torch.compiler.is_exporting: False}


def _untraced_without_values(is_tracing: Callable) -> Callable:
    """transformers' `is_tracing(tensor=None)` in a covered forward's trace: with no tensor, what the eager
    forward reads (False); with one, the traced answer (reading its values would break the graph)."""

    return lambda tensor=None: tensor is not None and is_tracing(tensor)


# Checks a covered forward's trace answers as the model's eager forward does, put in their module's place
# while it traces. Up to 5.17, transformers' `_ignore_causal_mask_sdpa` skips the causal mask only if not
# `is_tracing()`, which asks `is_compiling()`, folded True in every Dynamo trace (folding it False breaks
# transformers' own tracing: a ContextVar.set graph break at each module): a traced `LlamaModel.forward` built
# an explicit mask, SDPA ran masked on K/V copied to every head (H100, torch 2.11, transformers 5.17: 8
# arange, 4 clone, a strided copy, ~50 us at batch 1). From 5.18 it asks `is_exporting()` (_export_fold).
_AS_EAGER = (("transformers.masking_utils", "is_tracing", _untraced_without_values),)
_TWINS: dict[Callable, Callable] = {}  # a function -> its one twin (Dynamo guards on it); a twin -> itself


def _eager_twins() -> list[tuple[Any, str, Callable, Callable]]:
    """(module, name, its function now, the twin) of each of _AS_EAGER that the process has imported."""
    found = []
    for where, name, make in _AS_EAGER:
        module = sys.modules.get(where)
        fn = getattr(module, name, None)
        if callable(fn):
            twin = _TWINS.get(fn)
            if twin is None:
                twin = _TWINS[fn] = make(fn)
                _TWINS[twin] = twin
            found.append((module, name, fn, twin))
    return found


def _holds_region(traced: Traced, kop: KernelOp) -> bool:
    if kop.graph is None:
        kop.graph = graph_match.RegionGraph(kop)
    return bool(kop.graph.ok and graph_match.find(traced.aten.graph, kop.graph, sealed=False, symbols=[]))
