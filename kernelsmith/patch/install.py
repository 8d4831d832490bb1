"""A patch written by `kernelsmith apply`, installed on a live model: torch only, copied into the patch.

    import my_patch                 # the folder `kernelsmith apply --out my_patch` wrote
    patch = my_patch.apply(model)   # the model's forward now runs the kernels; patch.remove() undoes it

`patch.json` lists each kernel: its task file (the region's aten ops, which give the pattern), its
candidate file (`ModelNew`), and the module paths whose calls hold the region. Each kernel whose region
makes new values is a PyTorch operator (kernel_op.py), served the cheapest way that fits:
- in eager mode, the model's forward runs through TorchDynamo with a backend that replaces each region's
  calls by one direct call of its kernel and compiles nothing (eager_graph.py);
- under torch.compile, Inductor's graph of the patched model gets each region's operator in its place
  (graph_pass.py, graph_match.py), then the kernel's own graph in place of the operator where it traces
  (inline.py);
- a region that is the whole of a module's forward: that module's forward also calls the kernel
  (module_swap.py), where Dynamo gives up on a frame;
- a region that writes the model's tensors in place (eager only): while the module call that holds it
  runs, the patch's dispatch mode substitutes the region (substitute.py), at a cost in Python per op.
Outside them the model runs untouched. Each kernel serves only the modes patch.json gives it
(kernel_op.modes_of: `kernelsmith apply` leaves a kernel out of a mode its taking made slower); a mode no
kernel serves runs the model as it was. `patch.counts` says how often each kernel took its region;
`patch.served(name)` says how it serves, `patch.serving(mode)` which kernels serve a mode.

The kernels have no backward: where autograd records a region (grad enabled and something the region
reads requires grad), the model's own ops run there (counted in `autograd`, said once in a warning), so
gradients are the model's; a graph torch.compile makes for autograd keeps the model's ops. Serve under
`torch.no_grad()` or `torch.inference_mode()`.

On the CPU, Triton kernels run only in Triton's interpreter: installing sets TRITON_INTERPRET=1 when
triton is not imported yet (as `kernelsmith apply` does) or torch sees no GPU, and otherwise says that
it must be set.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import weakref
from collections.abc import Callable
from pathlib import Path

import torch

from . import graph_pass
from .eager_graph import Covers
from .interpreter import interpret_triton
from .kernel_op import COMPILED, MODES, KernelOp, digest, mode_ways, modes_of, op_ready, serving, unserved
from .module_swap import Swap, forwarding, whole
from .pattern import Pattern, PatternError, trace, written_slots
from .shapes import built_at, unjudged, with_shapes
from .substitute import BuiltKernel, Counts, Substitution, hooks

MANIFEST = "patch.json"


class PatchError(Exception):
    """The patch does not fit this model (the reason is the message)."""


class Unsubstitutable(PatchError):
    """A kernel whose region cannot be taken in place (its task's shape, not the kernel's fault)."""


def _load(path: Path, label: str):
    name = f"_ks_patch_{label}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PatchError(f"{path} is not Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton reads a kernel's source through its module
    spec.loader.exec_module(module)
    return module


def build(root: Path, entry: dict, device: torch.device) -> tuple[BuiltKernel, list[BuiltKernel]]:
    """One kernel: its region's pattern (from its task) and its ModelNew, both on `device`; and the same at
    each other shape its task holds (shapes.py)."""
    # The task and kernel draw their own random tensors: the caller's random state is left as it was.
    gpus = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    try:
        task, cand = _load(root / entry["task"], "task"), _load(root / entry["kernel"], "kernel")
        with torch.random.fork_rng(devices=gpus), torch.device(device):
            torch.manual_seed(0)
            inputs = list(task.get_inputs())
            reference = task.Model(*task.get_init_inputs()).eval()
            kernel = cand.ModelNew(*task.get_init_inputs()).eval()
    except Exception as exc:  # the kernel's own code: whatever it raises is its failure to load
        raise PatchError(f"{entry['name']}: loading its task or kernel raised {type(exc).__name__}: {exc}") from None
    try:
        written = written_slots((root / entry["task"]).read_text(encoding="utf-8"))
        pattern = trace(entry["name"], reference, inputs, written)
    except PatternError as exc:
        raise Unsubstitutable(str(exc)) from None
    except Exception as exc:  # the task's own replay failed here (another device, another torch)
        raise PatchError(f"{entry['name']}: its task's Model raised {type(exc).__name__}: {exc}") from None
    texts = [(root / entry[k]).read_text(encoding="utf-8") for k in ("task", "kernel")]
    attrs = _kernel_attrs(entry["name"], pattern, kernel)
    main = BuiltKernel(pattern, kernel, attrs, reference, inputs, written, digest(*texts))
    load = lambda k: task if not k else _load(root / entry["task"], f"task{k}")  # a module of its own a shape
    try:
        return main, built_at(load, main, entry["name"], device, trace)
    except Exception as exc:  # the task's own code at another of its shapes
        raise PatchError(
            f"{entry['name']}: its task at another of its SHAPES raised {type(exc).__name__}: {exc}"
        ) from None


def _kernel_attrs(name: str, pattern: Pattern, kernel: torch.nn.Module) -> dict[str, str]:
    """The tensor of ModelNew that takes the place of each of Model's parameters and buffers: the one of
    the same name; else, where ModelNew's tensors are Model's in count, order, shapes and dtypes (as an
    evaluation builds both from one seed, whatever their names), the one in the same place."""
    state = dict(kernel.named_parameters()) | dict(kernel.named_buffers())
    ours, theirs = list(pattern.params.items()), list(state.items())

    def fits(t, m: tuple) -> bool:
        return isinstance(t, torch.Tensor) and tuple(t.shape) == m[0] and t.dtype == m[2]

    if all(fits(state.get(a, getattr(kernel, a, None)), m) for a, m in ours):
        return {a: a for a, _ in ours}
    in_order = len(ours) == len(theirs) and all(
        fits(t, m) and "." not in k and (k == a or (k not in pattern.params and a not in state))
        for (a, m), (k, t) in zip(ours, theirs)
    )
    if in_order:
        return {a: k for (a, _), (k, _) in zip(ours, theirs)}
    attr, (shape, _, dtype) = next((a, m) for a, m in ours if not fits(state.get(a, getattr(kernel, a, None)), m))
    listed = lambda pairs: ", ".join(f"{n} {m[2]}{list(m[0])}" for n, m in pairs) or "none"
    raise PatchError(
        f"{name}: ModelNew has no tensor `{attr}` of {dtype}{list(shape)} to take the model's own, and its tensors "
        f"({listed((k, (tuple(t.shape), None, t.dtype)) for k, t in theirs)}) are not Model's "
        f"({listed(ours)}) in order: name them as Model's, or keep Model's count, order, shapes and dtypes"
    )


class Patch:
    """An installed patch. `active = False` lets the model run as it was (the hooks and swapped forwards
    stay, idle; torch.compile compiles the model apart for each state); `remove()` undoes it all."""

    def __init__(self, model: torch.nn.Module, dispatch: Substitution):
        self.model, self.dispatch, self.handles = model, dispatch, []
        self.active = True
        self.merged: dict[str, str] = {}  # a kernel whose regions another kernel takes -> that kernel
        self.skipped: dict[str, str] = {}  # a kernel whose region cannot be taken in place -> why
        self.ops: dict[str, KernelOp] = {}  # a kernel that is an operator (module swaps, compiled graphs)
        self.swaps: list[Swap] = []  # modules whose forward calls a kernel's operator
        self.eager_only: dict[str, str] = {}  # a kernel that no compiled graph can take -> why
        self.entries: dict[str, dict] = {}  # each kernel's patch.json entry
        self.modes: dict[str, frozenset[str]] = {}  # each kernel -> the modes it serves (its merged keeper's)
        self.hooked: list[tuple[str, str]] = []  # (kernel, module path) served by the dispatch mode
        self.traced: dict[str, list[str]] = {}  # kernel -> the covers whose traced forward calls it (eager)
        self.covers: Covers | None = None  # the modules whose forward runs as a rewritten graph (eager_graph.py)
        self.unguard: Callable[[], None] | None = None  # puts back the model's forward graph_pass.guard wrapped
        # torch.compile's compiles that traced the model (graph_pass.compile_id), held weakly: a compile's
        # context goes when it ends, and none that is alive is another's.
        self.compiles: weakref.WeakSet = weakref.WeakSet()
        # Made here, not while traced: Dynamo runs a comptime function made before tracing as it is.
        self._note = lambda _ctx: self._noted(graph_pass.compile_id())

    @property
    def counts(self) -> dict[str, Counts]:
        return self.dispatch.counts

    def reset_counts(self) -> None:
        for counts in self.dispatch.counts.values():  # in place: a kernel's operator holds its own
            counts.fired = counts.dropped = counts.recomputed = counts.autograd = 0

    def _noted(self, context) -> None:
        if context is not None:
            self.compiles.add(context)

    def noted(self) -> None:
        """Called while torch.compile traces the patched model: the compile is noted, at trace time
        (comptime: no graph break), for the graph pass (graph_pass.py), and `active` is read, so that
        the compiled code guards on it."""
        from torch._dynamo.comptime import comptime

        comptime(self._note)
        if self.active:
            return

    @property
    def unjudged(self) -> dict[str, list[str]]:
        """Each kernel whose region ran at a shape its kernel was not judged at -> those shapes (said once)."""
        return unjudged(self.dispatch)

    def serving(self, mode: str) -> list[str]:
        """The kernels that take their regions when the model runs in `mode` (kernel_op.modes_of)."""
        return serving(self, mode)

    def unserved(self, mode: str) -> dict[str, str]:
        """Every kernel of the patch that does not serve `mode` (kernel_op.modes_of) -> why, in words."""
        return unserved(self, mode)

    def served(self, name: str) -> str:
        """How a kernel serves the model, in words (whether it took its regions: `counts`)."""
        swapped = list(dict.fromkeys(s.path or "the model" for s in self.swaps if s.kop.name == name))
        traced = [p or "the model" for p in self.traced.get(name, [])]
        hooked = list(dict.fromkeys(path or "the model" for n, path in self.hooked if n == name))
        ways = []
        if swapped:
            ways.append(f"its modules' forward calls it ({', '.join(swapped)})")
        if traced:
            ways.append(f"in eager mode the traced forward of {', '.join(traced)} calls it in its regions' place")
        if hooked:
            ways.append(f"the dispatch mode takes it in eager mode ({', '.join(hooked)})")
        ways += mode_ways({m: unserved(self, m).get(name) for m in MODES})
        derived = self.ops[name].derived_bytes if name in self.ops else 0
        if derived:  # a merged QKV weight: memory beside the model's own, made once per layer
            ways.append(f"it holds {derived / 1024:.4g} KiB derived from the model's weights (derive_weights)")
        return "; ".join(ways)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []
        if self.covers is not None:
            self.covers.restore()
            self.covers = None
        for swap in reversed(self.swaps):
            swap.restore()
        self.swaps = []
        if self.unguard is not None:
            self.unguard()
            self.unguard = None
        if self.ops:
            graph_pass.deactivate(with_shapes(list(self.ops.values())))
        for kop in with_shapes(list(self.ops.values())):
            kop.uninstall()


def _scope(model: torch.nn.Module, path: str) -> torch.nn.Module:
    if not path:
        return model
    try:
        return model.get_submodule(path)
    except AttributeError:
        raise PatchError(f"the model has no module {path}: is it the model that was captured?") from None


def _signature(p: Pattern) -> tuple:
    """What a pattern matches: its ops up to its last compute op, its inputs and parameters."""
    steps = tuple((s.func, repr(s.args), tuple(sorted(s.out_meta.items()))) for s in p.steps[: p.last + 1])
    return steps, tuple(p.input_meta), tuple(sorted(p.params.items()))


def _merge(built: dict[str, BuiltKernel], entries: list[dict]) -> dict[str, str]:
    """Kernels of regions that match the same ops (a layer's add + norm and the final one, captured as
    two tasks that differ in a view after them): one kernel takes them all, the one that fills every
    value the others fill, the faster by its verdict first. Returns {merged kernel: the one that runs}."""
    speed = {e["name"]: e.get("speedup") or 0.0 for e in entries}
    groups: dict[tuple, list[str]] = {}
    for name, kernel in built.items():
        groups.setdefault(_signature(kernel.pattern), []).append(name)
    merged: dict[str, str] = {}
    for names in groups.values():
        fills = {n: {b.key for b in built[n].pattern.bases} for n in names}
        covering = [n for n in names if all(fills[o] <= fills[n] for o in names)]
        if len(names) < 2 or not covering:
            continue
        keeper = max(covering, key=lambda n: speed[n])
        merged |= {n: keeper for n in names if n != keeper}
    return merged


def install(model: torch.nn.Module, patch_dir: str | Path, device: str | torch.device | None = None) -> Patch:
    """Put a patch's kernels into a live model, in place (a patch package's `apply(model)` calls this).

    Args:
        model: the model the patch was captured from (its module paths are the capture's).
        patch_dir: the folder `kernelsmith apply` wrote (patch.json, tasks/, kernels/).
        device: where the kernels run (None: where the model's first parameter is).

    Returns the Patch: `counts` (regions each kernel took), `served(name)`, `active` (False: the model as it
    was), `remove()` (everything put back). The process keeps, until `remove()`: the model's forward (and
    whole-module regions' forwards) wrapped, TorchDynamo's compiled graphs of it, each kernel's operator
    (torch.ops.kernelsmith_patch, defined once a process) and Inductor's post-grad pass while any patch is
    installed; the kernels' code runs in this process, outside any sandbox (they were judged inside one).
    Raises PatchError (its message one line) where the patch does not fit the model."""
    root = Path(patch_dir)
    spec = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    if device is None:
        first = next(iter(model.parameters()), None)
        device = first.device if first is not None else torch.device("cpu")
    if torch.device(device).type == "cpu":
        refused = interpret_triton(root, spec)
        if refused is not None:
            raise PatchError(refused)
    built, skipped, shaped = {}, {}, {}
    for entry in spec["kernels"]:
        try:
            built[entry["name"]], shaped[entry["name"]] = build(root, entry, torch.device(device))
        except Unsubstitutable as exc:
            skipped[entry["name"]] = str(exc)
    merged = _merge(built, spec["kernels"])
    # the larger regions first: where two overlap, the dispatch mode's match of the larger begins first, as
    # the traced forward and the compiled graph give it their ops (graph_match.pick)
    larger = sorted(built.items(), key=lambda nk: -sum(s.deferred for s in nk[1].pattern.steps))
    dispatch = Substitution({name: k for name, k in larger if name not in merged}, f"patch {root.resolve().name}")
    patch = Patch(model, dispatch)
    patch.merged, patch.skipped = merged, skipped
    patch.entries = entries = {e["name"]: e for e in spec["kernels"] if e["name"] in built}
    patch.modes = {name: modes_of(entries[merged.get(name, name)]) for name in built}
    for name, kernel in dispatch.kernels.items():
        why = op_ready(kernel.pattern, kernel.written)
        if why is None:
            patch.ops[name] = KernelOp(name, kernel, dispatch)
            patch.ops[name].shapes = [KernelOp(name, k, dispatch) for k in shaped[name]]
            for kop in with_shapes([patch.ops[name]]):
                kop.live, kop.compiles = lambda: patch.active, patch.compiles
                kop.compile_why, kop.modes = entries[name].get("compile_why"), patch.modes[name]
        else:
            patch.eager_only[name] = why
    compiled = [k for k in with_shapes(list(patch.ops.values())) if k.modes & COMPILED]
    if compiled:  # a model no compiled mode's kernel serves is compiled as it is
        graph_pass.activate(compiled)
        patch.unguard = graph_pass.guard(model, patch)
    # eager mode: only the kernels that serve it are put in its way (a mode no kernel serves runs as it was)
    _serve(patch, model, [e for e in entries.values() if "eager" in patch.modes[e["name"]]])
    return patch


def _covers_of(entry: dict) -> list[str]:
    """The modules whose calls hold each of the kernel's regions with the views its neighbours make
    (capture's `covers`); a patch written before capture recorded them: each scope's parent."""
    if entry.get("covers"):
        return list(entry["covers"])
    return sorted({path.rpartition(".")[0] if path else "" for path in entry["scopes"]})


def _overlap(a: str, b: str) -> bool:
    """One module's call holds the other's (or they are one)."""
    return a == b or not a or not b or a.startswith(b + ".") or b.startswith(a + ".")


def _serve(patch: Patch, model: torch.nn.Module, entries: list[dict]) -> None:
    """Each kernel's regions, served the cheapest way that takes them (the module's docstring): a swapped
    forward where a region is a whole module's; else, for an operator, the traced forward of the region's
    cover; else (a region that writes the model's tensors in place) the dispatch mode, entered around the
    cover's calls. A cover that holds or is held by one the dispatch mode enters is served by the dispatch
    mode too: a traced forward does not run hooks of its own modules' calls eagerly."""
    traced: dict[str, list[str]] = {}  # kernel -> covers
    hooked: dict[str, list[str]] = {}
    for entry in entries:
        name = patch.merged.get(entry["name"]) or entry["name"]
        kop = patch.ops.get(name)
        rest = []
        for path in entry["scopes"]:
            module = _scope(model, path)
            took = whole(kop, module) if kop is not None and not any(s.module is module for s in patch.swaps) else None
            if kop is not None and took is not None:
                patch.swaps.append(Swap(module, kop, *took, live=lambda: patch.active, path=path))
            elif not any(s.module is module and s.kop is kop for s in patch.swaps):
                rest.append(path)
        if rest:
            (traced if kop is not None else hooked).setdefault(name, []).extend(_covers_of(entry))
    dispatch = {c for cs in hooked.values() for c in cs}
    for name in list(traced):
        if any(_overlap(c, d) for c in traced[name] for d in dispatch):
            hooked.setdefault(name, []).extend(traced.pop(name))
    eager_ops = [k for k in with_shapes(list(patch.ops.values())) if "eager" in k.modes]
    if eager_ops and not hooked:
        # The model's forward as one traced forward where nothing runs under the dispatch mode: one entry
        # into Dynamo a forward, and a graph that runs the whole forward with less host time than its
        # modules do (a swapped forward in it calls its kernel straight); the swapped forwards serve
        # where Dynamo does not (a frame it gives up on runs as it is).
        patch.covers = covers = Covers(eager_ops, lambda: patch.active, patch.dispatch.label)
        covers.wrap(model, "", forwarding)
    elif traced:
        patch.covers = covers = Covers(
            with_shapes([patch.ops[n] for n in traced]), lambda: patch.active, patch.dispatch.label
        )
        for path in sorted({c for cs in traced.values() for c in cs}, key=len):
            if not any(_overlap(path, done) for _, _, _, done in covers.wrapped):
                covers.wrap(_scope(model, path), path, forwarding)
    patch.traced = {n: sorted(set(cs)) for n, cs in traced.items()}
    hook = hooks(patch, patch.dispatch)
    for name, paths in hooked.items():
        for path in sorted(set(paths)):
            pre, post = hook(name)
            patch.hooked.append((name, path))
            module = _scope(model, path)
            patch.handles.append(module.register_forward_pre_hook(pre))
            patch.handles.append(module.register_forward_hook(post, always_call=True))
