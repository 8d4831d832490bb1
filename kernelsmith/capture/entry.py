"""ENTRY (`package.module:factory` or `path/to/file.py:factory`): the user's factory, loaded and called.
A module ENTRY imports as under `python -m`: the current folder is on the import path.

The factory returns `(model, inputs)`: inputs is a tuple or list of positional arguments, a dict of
keyword arguments, or one tensor. A factory that takes a `device` parameter is called with capture's
--device; one that does not is called with no arguments and its model and tensors are moved there.
The model runs in eval() mode (dropout off, BatchNorm on its running statistics): what a served
model runs. `Entry.was_training` says when that switched a module out of training mode.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelsmith.errors import UserError


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
        raise UserError(f"ENTRY {spec}: importing {path} raised {type(exc).__name__}: {exc}") from None
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
            raise UserError(f"ENTRY {spec}: importing {where} raised {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise UserError(f"ENTRY {spec}: {where} has no {attr}")
    if not callable(factory):
        raise UserError(f"ENTRY {spec}: {attr} is not callable")
    return factory


def _to(value, device: str):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


def forward_failed(entry: Entry, exc: Exception) -> str:
    """The line for a forward that raised; where the inputs look like `(args, kwargs)`, which capture takes
    as two positional arguments (a pair is ambiguous), it names the forms inputs may take."""
    said = f"ENTRY {entry.spec}: the model's forward raised {type(exc).__name__}: {exc}"
    pair = len(entry.args) == 2 and not entry.kwargs
    if pair and isinstance(entry.args[0], (tuple, list)) and isinstance(entry.args[1], dict):
        said += (
            " (the factory returned inputs as (args, kwargs), which is two positional arguments here: inputs are a "
            "tuple or list of positional arguments, a dict of keyword arguments or one tensor; return "
            "(model, dict(name=value, ...)) for keyword arguments)"
        )
    return said


def call_entry(spec: str, device: str) -> Entry:
    """Call ENTRY's factory for `device` and check what it returned."""
    factory = load_factory(spec)
    try:
        takes_device = "device" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_device = False
    try:
        made = factory(device=device) if takes_device else factory()
    except Exception as exc:
        raise UserError(f"ENTRY {spec}: the factory raised {type(exc).__name__}: {exc}") from None
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
        args, kwargs = tuple(_to(a, device) for a in args), {k: _to(v, device) for k, v in kwargs.items()}
    training = any(m.training for m in model.modules())
    return Entry(spec=spec, model=model.eval(), args=args, kwargs=kwargs, was_training=training)
