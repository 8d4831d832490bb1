"""One forward recorded at the ATen level: every op with its arguments (tensors by identity), its
outputs, what it wrote in place, and the module call it ran in.

A TorchDispatchMode sees each op after autograd (so `linear` arrives as `t` + `addmm`); global module
forward hooks keep the stack of module calls. Values an op overwrites in place are cloned first
(copy-on-write per storage), so the value every op read and wrote can be looked up afterwards: capture
validates each written task on those real values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils._python_dispatch import TorchDispatchMode


@dataclass(frozen=True)
class Ref:
    """A tensor in an op's arguments or outputs: `tid` numbers the tensor object in the tape."""

    tid: int


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: str
    offset: int
    storage: int | None  # data pointer of its storage: tensors that share it alias each other


@dataclass
class Call:
    """One module call: its path in the model (its class name when outside the model)."""

    path: str
    cls: str
    parent: int | None
    has_children: bool = False
    in_model: bool = True  # False: a module made during the forward (a library's wrapper), named by class


@dataclass
class Op:
    index: int
    func: Any  # torch._ops.OpOverload
    args: tuple
    kwargs: dict
    out: Any  # the op's result with tensors as Ref
    reads: dict[int, int]  # tid -> version when read
    writes: dict[int, int]  # tid -> version after this op (outputs and tensors written in place)
    mutated: tuple[int, ...]  # tids this op wrote in place
    call: int | None  # the innermost module call it ran in

    @property
    def name(self) -> str:
        return str(self.func).removeprefix("aten.")


@dataclass
class Tape:
    ops: list[Op] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    tensors: dict[int, torch.Tensor] = field(default_factory=dict)
    meta: dict[int, TensorMeta] = field(default_factory=dict)
    creator: dict[int, int] = field(default_factory=dict)  # tid -> index of the op that returned it
    origin: dict[int, tuple[str, str]] = field(default_factory=dict)  # external tid -> (kind, name)
    snapshots: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)
    live_out: set[int] = field(default_factory=set)  # reachable from the outputs or the inputs after
    model_class: str = ""

    def value(self, tid: int, version: int) -> torch.Tensor:
        """The tensor's value as it was at `version`."""
        return self.snapshots.get((tid, version), self.tensors[tid])


def tensors_in(obj, path: str = "", depth: int = 0, seen: set[int] | None = None):
    """(path, tensor) for every tensor reachable from `obj` through containers and object attributes
    (a KV cache object holds its tensors as attributes); modules are not entered."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 8:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from tensors_in(v, f"{path}.{k}" if path else str(k), depth + 1, seen)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from tensors_in(v, f"{path}[{i}]", depth + 1, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, (torch.nn.Module, type)):
        yield from tensors_in(vars(obj), path, depth + 1, seen)


def _storage_key(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage().data_ptr() or None
    except (RuntimeError, NotImplementedError):
        return None


class _Recorder(TorchDispatchMode):
    def __init__(self, tape: Tape, known: dict[int, tuple[str, str]], stack: list[int]):
        super().__init__()
        self.tape, self.known, self.stack = tape, known, stack
        self.tid_of: dict[int, int] = {}
        self.by_storage: dict[int, list[int]] = {}

    def _ref(self, t: torch.Tensor, creator: int | None) -> Ref:
        tid = self.tid_of.get(id(t))
        if tid is None:
            tid = self.tid_of[id(t)] = len(self.tape.tensors)
            self.tape.tensors[tid] = t  # kept alive, so that id(t) stays unique during the forward
            self.tape.meta[tid] = TensorMeta(
                tuple(t.shape), tuple(t.stride()), t.dtype, str(t.device), int(t.storage_offset()), _storage_key(t)
            )
            if creator is None:
                self.tape.origin[tid] = self.known.get(id(t), ("other", ""))
            else:
                self.tape.creator[tid] = creator
            key = _storage_key(t)
            if key is not None:
                self.by_storage.setdefault(key, []).append(tid)
        return Ref(tid)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        index = len(self.tape.ops)
        wrap = lambda x: self._ref(x, None) if isinstance(x, torch.Tensor) else x
        r_args, r_kwargs = pytree.tree_map(wrap, args), pytree.tree_map(wrap, kwargs)
        reads = {
            ref.tid: self.tape.tensors[ref.tid]._version
            for ref in pytree.tree_leaves((r_args, r_kwargs))
            if isinstance(ref, Ref)
        }
        written = [a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        named = dict(zip([a.name for a in func._schema.arguments], args)) | kwargs
        targets = [named[n] for n in written if isinstance(named.get(n), torch.Tensor)]
        for t in targets:  # copy-on-write: keep what every alias of the storage holds now
            for tid in self.by_storage.get(_storage_key(t) or -1, []):
                alias = self.tape.tensors[tid]
                self.tape.snapshots.setdefault((tid, alias._version), alias.clone())
        result = func(*args, **kwargs)
        out = pytree.tree_map(lambda x: self._ref(x, index) if isinstance(x, torch.Tensor) else x, result)
        mutated = tuple(self.tid_of[id(t)] for t in targets)
        writes = {r.tid: self.tape.tensors[r.tid]._version for r in pytree.tree_leaves(out) if isinstance(r, Ref)}
        # The version counter moves after the op returns to autograd's in-place layer (above this mode):
        # the value it wrote is the next version, which the ops after it read.
        writes |= {tid: max(self.tape.tensors[tid]._version, reads.get(tid, -1) + 1) for tid in mutated}
        self.tape.ops.append(
            Op(index, func, r_args, r_kwargs, out, reads, writes, mutated, self.stack[-1] if self.stack else None)
        )
        return result


def record(model: torch.nn.Module, args: tuple, kwargs: dict) -> Tape:
    """Run `model(*args, **kwargs)` once under the recorder: the tape (profile.py times the forwards)."""
    tape = Tape(model_class=type(model).__name__)
    names = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}
    known: dict[int, tuple[str, str]] = {}
    for path, t in tensors_in((args, kwargs)):
        known[id(t)] = ("other", path.removeprefix("[1]").removeprefix("[0]").lstrip("."))
    for path, t in pytree.tree_flatten_with_path((args, kwargs))[0]:
        if isinstance(t, torch.Tensor):
            known[id(t)] = ("input", pytree.keystr(path[1:]).strip("[]'\""))
    known |= {id(b): ("buffer", n) for n, b in model.named_buffers(remove_duplicate=False)}
    known |= {id(p): ("parameter", n) for n, p in model.named_parameters(remove_duplicate=False)}
    stack: list[int] = []

    def pre(module, _args):
        parent = stack[-1] if stack else None
        if parent is not None:
            tape.calls[parent].has_children = True
        path = names.get(id(module))
        tape.calls.append(Call(path or type(module).__name__, type(module).__name__, parent, in_model=path is not None))
        stack.append(len(tape.calls) - 1)

    def post(_module, _args, _out):
        if stack:
            stack.pop()

    hooks = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]
    recorder = _Recorder(tape, known, stack)
    try:
        with torch.no_grad(), recorder:
            output = model(*args, **kwargs)
    finally:
        for h in hooks:
            h.remove()
    reached = {id(t) for _, t in tensors_in((output, args, kwargs))}
    tape.live_out = {tid for tid, t in tape.tensors.items() if id(t) in reached}
    return tape
