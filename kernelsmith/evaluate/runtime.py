"""Running a task's code: inputs and models built the same way in the judge and the sandbox.

Both processes seed the same way and build on the target device directly (inside a
`torch.device` context, so a task's `torch.rand(...)` lands on the GPU without a host copy),
so the judge's reference and the sandbox's candidate see bit-identical inputs and weights.
"""

from __future__ import annotations

import traceback
import types

import torch


def to_device(value, device: str):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def make_inputs(task: types.ModuleType, seed: int, device: str) -> list:
    torch.manual_seed(seed)
    with torch.device(device):
        inputs = list(task.get_inputs())
    return [to_device(x, device) for x in inputs]


def init_inputs(task: types.ModuleType, seed: int, device: str) -> list:
    torch.manual_seed(seed)
    fn = getattr(task, "get_init_inputs", None)
    if fn is None:
        return []
    with torch.device(device):
        return [to_device(x, device) for x in fn()]


def build_model(cls, task: types.ModuleType, seed: int, device: str) -> torch.nn.Module:
    """As KernelBench: the same seed is set before building Model and before building ModelNew."""
    args = init_inputs(task, seed, device)
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls(*args)
    return model.to(device) if isinstance(model, torch.nn.Module) else model


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def excerpt(exc: BaseException, limit: int = 2500, replace: dict[str, str] | None = None) -> str:
    """A traceback short enough to be feedback: the last frames and the message."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    out = "\n".join(lines)
    if len(out) > limit:
        out = "...\n" + out[-limit:]
    return out


def refill_inputs(task: types.ModuleType, inputs: list, seed: int, device: str,
                  copy=torch.Tensor.copy_) -> None:
    """Give `inputs` the contents `make_inputs(seed)` would have, in the same buffers."""
    for dst, src in zip(inputs, make_inputs(task, seed, device)):
        if isinstance(dst, torch.Tensor):
            copy(dst, src)
