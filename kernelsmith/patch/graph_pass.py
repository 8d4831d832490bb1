"""Regions replaced on torch.compile's graph: a custom Inductor post-grad pass
(`torch._inductor.config.post_grad_custom_post_pass`) finds each installed kernel's region in the
forward graph Inductor compiles and puts the kernel's operator (kernel_op.py) in its place. Torch only:
`kernelsmith apply` copies this file into the patch it writes.

The region is found as graph_match.py finds it (once a graph is first compiled with the patch
installed); the operator's values replace the region's, and the region's ops, now unused, go; then each
operator call is the kernel's own graph where it traces (inline.py). A dynamic dimension the region reads
is specialized to the region's size (a guard: another size compiles anew), as in eager mode.

Only the patched model's graphs: the pass is the process's, but it replaces regions only in the graphs
of a compile that traced the patched model (the patch notes the compile while Dynamo traces its forward
or its regions' modules: Patch.traced), so another model compiled meanwhile keeps its own ops. A graph
break splits the model into several compiles: those that trace no patched module keep the model's ops.

A patch never changes gradients: a graph that autograd will differentiate (a training forward, or its
backward) is left as it is, said once. Inductor says which graphs are inference graphs where torch
has `CustomInferenceAwareGraphPass`; elsewhere the graph's AOT metadata does (an output that requires
grad). The pass's `uuid` names the installed kernels and the compile's mode, so Inductor's cache keeps
apart graphs compiled with and without them.

Each kernel serves the modes patch.json gives it (kernel_op.modes_of): in a compile whose graphs replay
as CUDA graphs (Inductor's `triton.cudagraphs` on, as torch.compile(mode="reduce-overhead") sets it) the
pass replaces the regions of the kernels that serve graphs mode, in any other those of the kernels that
serve compile mode.
"""

from __future__ import annotations

import hashlib
import operator
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch._guards import TracingContext, detect_fake_mode

from .graph_match import RegionGraph, candidates, find, pick, specialize
from .inline import inline_calls
from .kernel_op import KernelOp, compiled_mode
from .module_swap import forwarding
from .shapes import say_unjudged


def replace(graph: torch.fx.Graph, kop: KernelOp, region: RegionGraph, m: dict, renamed: dict) -> None:
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
        """The kernels whose regions this compile's graphs take: installed, their patch active, the patched
        model traced in this compile, and serving this compile's mode (compile or graphs: compiled_mode)."""
        now, mode = compile_id(), compiled_mode()
        return [k for k in self.kops if k.installed and k.live() and now in k.compiles and mode in k.modes]

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
        symbols: list = []  # the symbolic sizes the regions read, specialized (graph_match.py)
        for kop in kops:
            if kop.graph is None:
                kop.graph = RegionGraph(kop)
        if training:
            for kop in [k for k in kops if k.graph.ok and find(graph, k.graph, sealed=False)]:
                self._said(kop)
            return
        # every kernel's regions found before any is replaced: where two overlap, the larger takes them. A region
        # found at other sizes than its kernel's shapes keeps the model's ops, said (shapes.py); where its kernel
        # was judged at several, those sizes are specialized, so that this graph never serves its judged shapes
        # (a growing cache that a one-shape kernel's region reads stays dynamic, as it was)
        elsewhere: list = []
        several = {k.name for k in kops if k.shapes}
        found = candidates(graph, kops, symbols, elsewhere, missed := {}, lambda k: k.name in several)
        matches, within = pick(found)
        for kop, region, m in matches:
            replace(graph, kop, region, m, renamed)
        if within:  # the smaller kernel is said as served by the larger there (all of a patch's share one dispatch)
            kops[0].dispatch.within |= within
        if matches:
            graph.eliminate_dead_code()  # the replaced regions' ops
        if symbols or elsewhere:
            specialize(symbols + elsewhere)
        if missed:
            say_unjudged(kops[0].dispatch, missed)
        inlined = inline_calls(graph, kops)  # their own graphs, where they trace
        if inlined:
            graph.eliminate_dead_code()
        if renamed or inlined:
            from torch._inductor.pattern_matcher import stable_topological_sort

            stable_topological_sort(graph)

    def _said(self, kop: KernelOp) -> None:
        kop.dispatch.counts[kop.name].autograd += 1
        if not kop.dispatch.warned:  # said once a patch, as its eager forward under autograd says it
            kop.dispatch.warned = True
            warnings.warn(
                f"{kop.dispatch.label}: torch.compile is compiling a graph that autograd differentiates, and the "
                "kernels have no backward: their regions keep the model's own ops there, so gradients are the model's; "
                "compile under torch.no_grad() or torch.inference_mode() for the kernels to serve",
                stacklevel=2,
            )

    def uuid(self, named: type):
        previous = self.previous.uuid() if isinstance(self.previous, named) else None
        if self.previous is not None and previous is None:
            return None  # a pass Inductor cannot name: no cache
        here = Path(__file__)
        h = hashlib.sha256(
            b"".join(here.with_name(f).read_bytes() for f in (here.name, "graph_match.py", "inline.py", "kernel_op.py"))
        )
        # The instances too: a graph from Inductor's cache calls each operator with the install it was
        # compiled with, which in another process may be another patch's; and the mode, whose kernels they are.
        h.update(compiled_mode().encode())
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
    """The compile torch.compile is in (None outside one): the same object while Dynamo traces a frame and
    while Inductor compiles its graph. The compile's own tracing context, not its CompileId: those are
    counted from 0 again after torch._dynamo.reset(), and a patch installed before would take another's
    compile for its own (seen: an older patch's kernel took a newer patch's region)."""
    return TracingContext.try_get()


def guard(model: torch.nn.Module, patch) -> Callable[[], None]:
    """The model's forward, while torch.compile traces it, notes the compile for `patch` (an install.Patch:
    the graph pass replaces regions in that compile's graphs only, not in another model's) and reads
    `patch.active`, so that torch.compile guards on it and compiles the model apart with the patch active
    and inactive. A hook would not do: the top module's hooks run outside its compiled forward. Returns
    what puts the forward back."""
    had, before, original = "forward" in model.__dict__, model.__dict__.get("forward"), model.forward

    def body(*args, **kwargs):
        if torch.compiler.is_compiling():
            patch.noted()
        return original(*args, **kwargs)

    model.forward = forwarding(original, body, by_name=True)  # the model's names (Hugging Face's generate reads them)

    def unguard() -> None:
        if had:
            model.__dict__["forward"] = before
        else:
            del model.forward

    return unguard
