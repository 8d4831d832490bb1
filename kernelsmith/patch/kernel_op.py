"""A patch's kernel as a PyTorch operator, so that a patched model traces under torch.compile and
replays under CUDA graphs. Torch only: `kernelsmith apply` copies this file into the patch it writes.

Each kernel whose region makes new values (it writes none of the model's tensors in place) becomes
`torch.ops.kernelsmith_patch.<name>_<digest>(inputs, params, instance) -> values` (`instance`: which
install's kernel runs, a constant of each call): `torch.library.custom_op` with a
fake implementation (`register_fake`) that gives the region's values their recorded shapes, strides
and dtypes, so that torch.compile traces it without running it, and Inductor calls it as an opaque
kernel. Its implementation binds the kernel (`ModelNew`) to the parameters it is given (one bound copy
per parameter set, no copy of their data), runs it on the inputs (restrided first where they are not
laid out as the region's were), and returns the region's values, one per value the region makes (an
output that is a view of another follows from it outside the op), each laid out as recorded and none
sharing memory with an input or another. No host sync and no allocation but torch's: a CUDA graph
captures it as it captures any op.

Each kernel serves the modes patch.json gives it (`modes_of`: eager, compile, graphs), which the runtime
asks here (`serving`, `unserved`). It counts each region it takes in the patch's counts; a graph compiled
while the patch was installed keeps calling it after `patch.remove()`: it runs the region's own ops then
(its task's Model).
"""

import hashlib
import re
import secrets
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .match import bind, derived_bytes
from .pattern import Pattern, meta, slot_meta
from .substitute import BuiltKernel, Substitution, laid_out, restride, values_of

NAMESPACE = "kernelsmith_patch"


def _shared() -> dict:
    """The process's one record of the operators and installs, whichever copy of this file made them: a
    patch folder carries its own copy, and kernelsmith has one, but an operator is defined once a process
    and a call must find its install whichever copy installed it. Kept on the operators' namespace."""
    space = getattr(torch.ops, NAMESPACE)
    shared = space.__dict__.get("_kernelsmith_shared")
    if shared is None:
        shared = space.__dict__["_kernelsmith_shared"] = {"instances": {}, "defined": {}, "library": []}
    return shared


# a call's `instance` -> the KernelOp it runs (the patch installed then); op name -> its OpOverload; and the
# namespace's torch.library.Library (it must stay alive)
_INSTANCES: dict[int, Any] = _shared()["instances"]
_DEFINED: dict[str, Any] = _shared()["defined"]
_LIBRARY: list = _shared()["library"]


# -- the modes a kernel serves: eager, compile (torch.compile) and graphs (torch.compile whose graphs replay as
# CUDA graphs). `kernelsmith apply` measures each mode in the model and writes, per kernel, the modes it serves
# (patch.json's `modes`; `left_out`: why not each other mode): a kernel whose taking made a mode slower is left
# out of it, and a mode no kernel makes faster runs the model as it was. A patch written before `modes` existed
# serves as it did: eager always, the compiled modes unless the kernel's verdict loses to torch.compile's own
# code (`compile_why`). A kernel whose regions another kernel takes (the same ops, install.py's merge) serves
# where that kernel serves.

MODES = ("eager", "compile", "graphs")
COMPILED = frozenset({"compile", "graphs"})


def modes_of(entry: dict) -> frozenset[str]:
    """The modes patch.json's `entry` serves (an unknown word is no mode)."""
    if "modes" in entry:
        return frozenset(entry["modes"] or ()) & frozenset(MODES)
    return frozenset({"eager"}) if entry.get("compile_why") else frozenset(MODES)


def why_not(entry: dict, mode: str) -> str:
    """Why `entry`'s kernel does not serve `mode`, in words."""
    said = (entry.get("left_out") or {}).get(mode)
    if said:
        return said
    if mode != "eager" and entry.get("compile_why"):
        return entry["compile_why"]
    return f"patch.json leaves it out of {mode} mode"


def compiled_mode() -> str:
    """The mode of the compile Inductor is running: graphs where its graphs will replay as CUDA graphs
    (torch.compile(mode="reduce-overhead"), and "max-autotune", compile with Inductor's `triton.cudagraphs`
    patched True for the compile: torch's _TorchCompileInductorWrapper hands compile_fx its mode's options
    as config patches), else compile."""
    import torch._inductor.config as inductor_config

    return "graphs" if inductor_config.triton.cudagraphs else "compile"


def serving(patch: Any, mode: str) -> list[str]:
    """The kernels of an installed patch (install.Patch) that take their regions when the model runs in
    `mode`; a merged kernel's regions are its keeper's, listed once. In a compiled mode only operators do."""
    return [n for n in patch.dispatch.kernels if mode in patch.modes.get(n, ()) and (mode == "eager" or n in patch.ops)]


def unserved(patch: Any, mode: str) -> dict[str, str]:
    """Every kernel of an installed patch that does not serve `mode` -> why, in words (a region that cannot
    be taken in place is `patch.skipped`, apart)."""
    out: dict[str, str] = {}
    for name, entry in patch.entries.items():
        keeper = patch.merged.get(name, name)
        if mode in patch.modes.get(keeper, ()) and (mode == "eager" or keeper in patch.ops):
            continue
        why = patch.eager_only.get(keeper) if mode != "eager" and keeper not in patch.ops else None
        why = why or why_not(patch.entries.get(keeper, entry), mode)
        out[name] = why if keeper == name else f"its regions are {keeper}'s, which does not serve {mode} mode: {why}"
    return out


def mode_ways(unserved_in: dict[str, str | None]) -> list[str]:
    """How a kernel serves the modes beside eager's ways, in words: `unserved_in` is mode -> why it does not
    serve it (None: it does)."""
    ways = [f"not in eager mode: {unserved_in['eager']}"] if unserved_in.get("eager") else []
    compiled = [m for m in MODES if m != "eager" and not unserved_in.get(m)]
    if compiled:
        only = "" if len(compiled) == 2 else f" in {compiled[0]} mode"
        ways.append(f"torch.compile compiles it into its graphs{only} (inline.py)")
    whys = {m: w for m, w in unserved_in.items() if m != "eager" and w}
    if len(whys) == 2 and len(set(whys.values())) == 1:  # one reason for both compiled modes: said once
        ways.append(next(iter(whys.values())))
    else:
        ways += [f"not in {m} mode: {w}" for m, w in whys.items()]
    return ways


def op_ready(pattern: Pattern, written: list) -> str | None:
    """Why a region cannot be a functional operator (None: it can): an operator makes new values, so a
    region that writes the model's tensors in place runs only under the dispatch mode (eager)."""
    if written or any(s.aliases for s in pattern.steps):
        return "its region writes the model's tensors in place (served in eager mode only)"
    made = {k for s in pattern.steps if s.deferred for k in s.out_meta}
    if any(b.kind != "val" or b.key not in made for b in pattern.bases):
        return "an output of its region is no value a compute op makes (served in eager mode only)"
    return None


def digest(*texts: str) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode("utf-8"))
    return h.hexdigest()[:12]


class KernelOp:
    """One kernel of an installed patch as an operator. `call` runs it: eagerly straight through (no
    dispatch cost), while torch.compile traces through the operator."""

    def __init__(self, name: str, kernel: BuiltKernel, dispatch: Substitution):
        self.name, self.kernel, self.reference, self.sample = name, kernel, kernel.reference, kernel.sample
        self.dispatch: Substitution = dispatch  # the patch's dispatch mode: its counts and timing ranges
        pattern = kernel.pattern
        self.pattern = pattern
        self.bases = list(dict.fromkeys(pattern.bases))  # the values it returns, in order
        self.out_meta = [slot_meta(pattern, b) for b in self.bases]
        self._plan = dispatch.plan(pattern)  # values_of's checks, looked up once: every eager call runs them
        self.attrs = list(pattern.params)  # the order its parameters are passed in
        self.op_name = re.sub(r"\W", "_", f"{name}_{kernel.key}")
        self.installed = True  # False after patch.remove(): the region's own ops run
        self.live: Callable[[], bool] = lambda: True  # the patch is active (graphs compiled now take the region)
        self.compiles: Any = set()  # the compiles that traced the patched model (its graphs take the region)
        self.graph: Any = None  # the region as Inductor's graphs hold it (graph_pass.Region), traced when first needed
        # the kernel's own graph by its call's layout, per compile's fake mode (inline.py): a graph's
        # values are fake tensors of the compile that traced it, which another compile cannot splice
        self.inlined: weakref.WeakKeyDictionary[Any, dict[tuple, Any]] = weakref.WeakKeyDictionary()
        self.inline_why: str | None = None  # why the kernel keeps its operator in compiled graphs (None: it may not)
        # why compiled graphs keep the model's own code for its regions (patch.json's compile_why: its verdict
        # loses to torch.compile's code); None: torch.compile takes its regions too
        self.compile_why: str | None = None
        # the modes it serves (patch.json's `modes`, modes_of): the graph pass takes its regions only in a
        # compile of a mode it serves
        self.modes: frozenset[str] = frozenset(MODES)
        self.shapes: list[KernelOp] = []  # the kernel at the other shapes of its task, each an operator (shapes.py)
        self._bound: dict[tuple, torch.nn.Module] = {}
        self._fast: dict[tuple, Callable] = {}  # eager(): the bound kernel's forward, by its parameters' ids
        plain = len(pattern.outputs) == 1 and not pattern.unviews[0] and pattern.outputs[0] == pattern.bases[0]
        self._one = tuple(self.out_meta[0]) if plain else None  # one output, a value of its own: eager()'s fast path
        self.tally = dispatch.counts[name]  # this kernel's counts (Patch.reset_counts zeroes them in place)
        # Each install's own number, a constant of every call: a graph runs the KernelOp of the patch it was
        # compiled with (its counts, its parameters' binding), whatever else installs the same kernel. Drawn
        # at random, not counted: Inductor's cache on disk keeps graphs by it (graph_pass's uuid), and a
        # count restarts in every process, so another process's graph would run this process's install of
        # the same number (seen: a patch's counts left at 0 while another's rose).
        self.instance = secrets.randbits(53)
        while self.instance in _INSTANCES:
            self.instance = secrets.randbits(53)
        _INSTANCES[self.instance] = self
        self.op = _define(self.op_name)

    def call(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        if torch.compiler.is_compiling():
            return self.op(inputs, params, self.instance)  # pyright: ignore[reportCallIssue]
        return self.eager(inputs, params)

    def run(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        """The operator's implementation: the region's values from the kernel (or, uninstalled, from the
        region's own ops)."""
        if self.dispatch.entered:  # a swapped module inside another region's module call: the mode need not see it
            with _disable_current_modes():
                return self._run(inputs, params)
        return self._run(inputs, params)

    def _run(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        if not self.installed:
            outs = self._bind(self.reference, dict(zip(self.attrs, params)))(*inputs)
            return self._values(outs, inputs, params)
        with self.dispatch._range(self.name):
            fitted = [x if meta(x) == m else restride(x, m[0], m[1]) for x, m in zip(inputs, self.pattern.input_meta)]
            attrs = self.kernel.attrs
            outs = self._bind(self.kernel.module, {attrs[a]: t for a, t in zip(self.attrs, params)})(*fitted)
            values = self._values(outs, inputs, params)
        self.dispatch.counts[self.name].fired += 1
        return values

    def op_call(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        """The operator's implementation (compiled graphs call it): eager()'s values, none of them sharing
        memory with the operator's arguments or one another (an operator's outputs are its own)."""
        if not self.installed or self.dispatch.entered or self.dispatch.timed is not None:
            return self.run(inputs, params)
        if any(x.stride() != m[1] for x, m in zip(inputs, self.pattern.input_meta)):
            return self.run(inputs, params)  # laid out otherwise by the compiler: restrided there
        values = self.eager(inputs, params)
        taken = {x.untyped_storage().data_ptr() for x in (*inputs, *params)}
        for k, (got, (shape, stride, _)) in enumerate(zip(values, self.out_meta)):
            where = got.untyped_storage().data_ptr()
            if where in taken or got.stride() != stride:  # a compiled graph reads the strides its fake said
                values[k] = restride(got, shape, stride)
                where = values[k].untyped_storage().data_ptr()
            taken.add(where)
        return values

    def eager(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        """The region's values, from eager code that has checked the inputs are laid out as the region's
        (a swapped forward, a rewritten graph): the kernel's forward called straight, no operator, no
        dispatcher and no copy but a restride. Hand-written: it is the patch's hot path, and a call must
        cost what a call of the kernel from the model's own source costs (docs/benchmarks.md)."""
        dispatch = self.dispatch
        if not self.installed or dispatch.entered or dispatch.timed is not None:
            return self.run(inputs, params)
        forward = self._fast.get(key := tuple(map(id, params)))
        if forward is None:  # the bound copy holds the parameters: their ids stay theirs while cached
            attrs = self.kernel.attrs
            bound = bind(self.kernel.module, {attrs[a]: t for a, t in zip(self.attrs, params)})
            forward = self._fast[key] = bound.forward
        outs = forward(*inputs)
        self.tally.fired += 1
        one = self._one
        if one is not None and type(outs) is torch.Tensor and outs.dtype is one[2] and outs.shape == one[0]:
            return [outs if laid_out(outs, one[1]) else restride(outs, one[0], one[1])]
        return self._checked(outs)

    def _checked(self, outs) -> list[torch.Tensor]:
        """eager()'s values where the kernel returns several, or views of them, or what the region does
        not make (which raises, saying what it returned)."""
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        values = values_of(self.pattern, outs, self._plan)
        result = []
        for base, (shape, stride, _) in zip(self.bases, self.out_meta):
            got = values[base]
            result.append(got if laid_out(got, stride) else restride(got, shape, stride))
        return result

    def fake(self, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        device = (inputs or params)[0].device
        return [
            torch.empty_strided(shape, stride, dtype=dtype, device=device) for shape, stride, dtype in self.out_meta
        ]

    @property
    def derived_bytes(self) -> int:
        """The memory of the tensors its kernel derived from the model's parameters (substitute.DERIVE)."""
        bound = [*self._bound.values(), *(getattr(f, "__self__", None) for f in self._fast.values())]
        return derived_bytes([m for m in bound if isinstance(m, torch.nn.Module)])

    def uninstall(self) -> None:
        self.installed = False
        self._bound.clear()
        self._fast.clear()  # the model's tensors are not kept alive by the patch

    def _bind(self, base: torch.nn.Module, real: dict[str, torch.Tensor]) -> torch.nn.Module:
        key = (id(base), *((t.data_ptr(), t.shape, t.stride(), t.dtype, t.device) for t in real.values()))
        made = self._bound.get(key)
        if made is None:
            made = self._bound[key] = bind(base, real)
        return made

    def _values(self, outs, inputs: list[torch.Tensor], params: list[torch.Tensor]) -> list[torch.Tensor]:
        """The region's values from the module's outputs, laid out as recorded, sharing no memory with the
        operator's arguments or with one another (an operator's outputs are its own)."""
        values = values_of(self.pattern, list(outs) if isinstance(outs, (tuple, list)) else [outs], self._plan)
        taken = {x.untyped_storage().data_ptr() for x in (*inputs, *params)}
        result = []
        for base, (shape, stride, _) in zip(self.bases, self.out_meta):
            got = values[base]
            if tuple(got.stride()) != stride or got.untyped_storage().data_ptr() in taken:
                got = restride(got, shape, stride)
            taken.add(got.untyped_storage().data_ptr())
            result.append(got)
        return result


def instance(number: int) -> "KernelOp | None":
    """The KernelOp of install `number` (an operator call's constant), if any."""
    return _INSTANCES.get(number)


def _define(op_name: str):
    """torch.ops.kernelsmith_patch.<op_name>(inputs, params, instance): defined once a process; a call
    runs KernelOp number `instance`. Defined by torch.library.Library, not torch.library.custom_op:
    the dispatcher calls the implementation straight (custom_op's Python wrapping cost ~8 us a call on
    the CPU, benchmarks/patch_host_overhead.py)."""
    if op_name in _DEFINED:
        return _DEFINED[op_name]
    if not _LIBRARY:
        _LIBRARY.append(torch.library.Library(NAMESPACE, "FRAGMENT"))
    library = _LIBRARY[0]

    def impl(inputs: list[torch.Tensor], params: list[torch.Tensor], instance: int) -> list[torch.Tensor]:
        return _INSTANCES[instance].op_call(inputs, params)

    def fake(inputs: list[torch.Tensor], params: list[torch.Tensor], instance: int) -> list[torch.Tensor]:
        return _INSTANCES[instance].fake(inputs, params)

    library.define(f"{op_name}(Tensor[] inputs, Tensor[] params, int instance) -> Tensor[]")
    library.impl(op_name, impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{op_name}", fake, lib=library)
    overload = getattr(getattr(torch.ops, NAMESPACE), op_name).default
    _DEFINED[op_name] = overload
    return overload
