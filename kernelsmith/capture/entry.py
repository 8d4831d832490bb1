"""ENTRY (`package.module:factory` or `path/to/file.py:factory`): the user's factory, loaded and called.
A module ENTRY imports as under `python -m`: the current folder is on the import path.

The factory returns `(model, inputs)`; capture's `--shape NAME=VALUE` calls it with those keyword
arguments (one call a shape: docs/capture.md, "Shapes a server sees"). Inputs is a tuple or list of
positional arguments, a dict of keyword arguments, or one tensor. A factory that takes a `device`
parameter is called with capture's --device; one that does not is called with no arguments and its model
and tensors are moved there, those that objects in the inputs hold too (a transformers KV cache:
to_device, below).
The model runs in eval() mode (dropout off, BatchNorm on its running statistics): what a served
model runs. `Entry.was_training` says when that switched a module out of training mode.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelsmith.errors import UserError, raised_at


@dataclass
class Entry:
    spec: str
    model: torch.nn.Module
    args: tuple
    kwargs: dict[str, Any]
    was_training: bool = False  # some module was in training mode: it runs in eval() mode here


def _module_from_file(path: Path, spec: str):
    if not path.is_file():
        raise UserError(f"ENTRY {spec}: file not found: {path}")
    name = "_kernelsmith_capture_" + path.stem
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise UserError(f"ENTRY {spec}: cannot import {path} as Python")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.resolve().parent))  # the file's own siblings import as they would when run
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        raise UserError(f"ENTRY {spec}: importing {path} raised {type(exc).__name__}{raised_at(exc)}: {exc}") from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    return module


def load_factory(spec: str):
    """The callable ENTRY names, or a UserError saying what is wrong with ENTRY."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise UserError(f"ENTRY {spec!r} is not 'package.module:factory' or 'path/to/file.py:factory'")
    if where.endswith(".py") or "/" in where:
        module = _module_from_file(Path(where), spec)
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:  # as `python -m` does: the folder it runs in
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise UserError(f"ENTRY {spec}: cannot import module {where}: {exc}") from None
        except Exception as exc:
            raise UserError(
                f"ENTRY {spec}: importing {where} raised {type(exc).__name__}{raised_at(exc)}: {exc}"
            ) from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise UserError(f"ENTRY {spec}: {where} has no {attr}")
    if not callable(factory):
        raise UserError(f"ENTRY {spec}: {attr} is not callable")
    return factory


# -- the inputs to the device -----------------------------------------------------------------------
# A factory's inputs to the device the model runs on, whatever holds their tensors.
#
# Tensors in tuples, lists and dicts move as values; an object that holds tensors in its attributes (a
# transformers `DynamicCache`, whose `layers` hold `keys` and `values`; `StaticCache`, `EncoderDecoderCache`,
# transformers 4's caches and their lists of tensors) has them moved in place, with the `torch.device` it
# keeps beside them (a cache layer allocates on its `device`), so that a decode step written for the CPU
# runs as written with `--device cuda`: a Qwen2 decode step failed there with "Expected all tensors to be
# on the same device", its cache left on the CPU.
#
# The walk is generic, so it is bounded: each object once (caches hold their config, layers may share
# tensors), at most MAX_DEPTH objects deep; modules, classes and functions are not entered.

MAX_DEPTH = 8  # objects inside objects: a cache's layers are 2 deep, an encoder-decoder cache's 3

_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, torch.nn.Module)


def to_device(value: Any, device: str) -> Any:
    """`value` with every tensor it holds on `device`: its plain tuples, lists and dicts rebuilt, what other
    objects hold moved in place. One call for all of a factory's inputs keeps a tensor they share shared."""
    return _Mover(torch.empty(0, device=device).device).move(value, 0)


class _Mover:
    def __init__(self, device: torch.device):
        self.device = device  # with its index ("cuda:0"): what the moved tensors report
        self.seen: dict[int, Any] = {}  # id -> what it became (a tensor two attributes share stays shared)
        self.held: list[Any] = []  # keeps the ids in `seen` from being reused during the walk

    def move(self, value: Any, depth: int) -> Any:
        key = id(value)
        if key in self.seen:
            return self.seen[key]
        self.held.append(value)
        if isinstance(value, torch.Tensor):
            moved = value.to(self.device)
        elif isinstance(value, torch.device):  # a cache layer's `device`: where it allocates next
            moved = self.device
        elif type(value) in (list, tuple):
            moved = type(value)(self.move(v, depth) for v in value)
        elif type(value) is dict:
            moved = {k: self.move(v, depth) for k, v in value.items()}
        elif isinstance(value, tuple):  # a named tuple (its fields as arguments) or a structseq (one sequence)
            items = [self.move(v, depth) for v in value]
            moved = type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
        else:
            moved = self.seen[key] = value  # before its insides: an object that refers to itself
            if depth < MAX_DEPTH and not isinstance(value, _OPAQUE):
                self._inside(value, depth + 1)
        self.seen[key] = moved
        return moved

    def _in_place(self, container: list | dict, depth: int) -> None:
        self.seen[id(container)] = container
        self.held.append(container)
        for k in range(len(container)) if isinstance(container, list) else list(container):
            container[k] = self.move(container[k], depth)

    def _inside(self, obj: Any, depth: int) -> None:
        """What `obj` holds, moved in place: the items of a list or dict of a class of its own, then its
        attributes. A list or dict an attribute holds is moved item by item (transformers 4's caches keep
        lists of tensors: the cache's list stays its own); another value is set back where it changed."""
        if isinstance(obj, (list, dict)):
            self._in_place(obj, depth)
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            return
        for name, v in list(attrs.items()):
            if type(v) in (list, dict) and id(v) not in self.seen:
                self._in_place(v, depth)
                continue
            moved = self.move(v, depth)  # a list met before as an input of its own: the one it became
            if moved is not v:
                object.__setattr__(obj, name, moved)  # a frozen dataclass's fields too


def forward_failed(entry: Entry, exc: Exception) -> str:
    """The line for a forward that raised; where the inputs look like `(args, kwargs)`, which capture takes
    as two positional arguments (a pair is ambiguous), it names the forms inputs may take."""
    said = f"ENTRY {entry.spec}: the model's forward raised {type(exc).__name__}{raised_at(exc)}: {exc}"
    pair = len(entry.args) == 2 and not entry.kwargs
    if pair and isinstance(entry.args[0], (tuple, list)) and isinstance(entry.args[1], dict):
        said += (
            " (the factory returned inputs as (args, kwargs), which is two positional arguments here: inputs are a "
            "tuple or list of positional arguments, a dict of keyword arguments or one tensor; return "
            "(model, dict(name=value, ...)) for keyword arguments)"
        )
    return said


def parse_shape(text: str) -> dict[str, int]:
    """`--shape batch=4,cached=32` as the factory's keyword arguments; a UserError says what is wrong."""
    sizes: dict[str, int] = {}
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        name, eq, value = part.partition("=")
        if not eq or not name.strip().isidentifier():
            raise UserError(f"--shape {text!r}: each part is NAME=VALUE (a parameter of the factory), not {part!r}")
        try:
            sizes[name.strip()] = int(value)
        except ValueError:
            raise UserError(f"--shape {text!r}: {name.strip()}={value!r} is not an integer") from None
    if not sizes:
        raise UserError(f"--shape {text!r} names no NAME=VALUE")
    return sizes


def shape_text(sizes: dict[str, int]) -> str:
    """A shape as `--shape` names it: batch=4,cached=32."""
    return ",".join(f"{k}={v}" for k, v in sizes.items())


def call_entry(spec: str, device: str, sizes: dict[str, int] | None = None) -> Entry:
    """Call ENTRY's factory for `device` (and with the keyword arguments `sizes`: a `--shape`), and check what
    it returned."""
    factory = load_factory(spec)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes_device = "device" in params
    taken = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [k for k in sizes or {} if k not in params and not taken]
    if unknown:
        listed = ", ".join(params) or "none"
        raise UserError(
            f"ENTRY {spec}: --shape {shape_text(sizes or {})} names {', '.join(unknown)}, not a parameter of the "
            f"factory (its parameters: {listed})"
        )
    try:
        made = factory(**(sizes or {}), **({"device": device} if takes_device else {}))
    except Exception as exc:
        at = f" at --shape {shape_text(sizes)}" if sizes else ""
        raise UserError(f"ENTRY {spec}: the factory raised {type(exc).__name__}{raised_at(exc)}{at}: {exc}") from None
    if not (isinstance(made, (tuple, list)) and len(made) == 2):
        raise UserError(f"ENTRY {spec}: the factory must return (model, inputs), not {type(made).__name__}")
    model, inputs = made
    if not isinstance(model, torch.nn.Module):
        raise UserError(f"ENTRY {spec}: the model it returned is a {type(model).__name__}, not a torch.nn.Module")
    if isinstance(inputs, torch.Tensor):
        args, kwargs = (inputs,), {}
    elif isinstance(inputs, (tuple, list)):
        args, kwargs = tuple(inputs), {}
    elif isinstance(inputs, dict):
        args, kwargs = (), dict(inputs)
    else:
        raise UserError(
            f"ENTRY {spec}: inputs must be a tuple/list of arguments, a dict of keyword arguments or a tensor, "
            f"not {type(inputs).__name__}"
        )
    if not takes_device:
        model = model.to(device)
        # Objects that hold tensors too (a transformers cache built on the CPU): to_device
        args, kwargs = to_device((args, kwargs), device)
    training = any(m.training for m in model.modules())
    return Entry(spec=spec, model=model.eval(), args=args, kwargs=kwargs, was_training=training)
