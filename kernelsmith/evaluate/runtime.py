"""Running a task's code: inputs and models built the same way in the judge and the sandbox.

Both processes seed the same way and build on the target device directly (inside a
`torch.device` context, so a task's `torch.rand(...)` lands on the GPU without a host copy),
so the judge's reference and the sandbox's candidate see bit-identical inputs and weights.
"""

from __future__ import annotations

import os
import traceback
import types
from pathlib import Path

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


_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep  # kernelsmith/


def _candidate_first(te: traceback.TracebackException, own_dir: str | None) -> None:
    """Drop the frames above the candidate's: from its first frame in `own_dir` (the sandbox's
    scratch, where candidate.py lives) on, or else past the evaluator's own leading frames."""
    frames = list(te.stack)
    first = next((i for i, f in enumerate(frames) if own_dir and f.filename.startswith(own_dir)), None)
    end = len(frames)
    if first is None:
        first = 0
        while first < len(frames) and frames[first].filename.startswith(_PACKAGE):
            first += 1
    else:  # below the candidate's last frame, the evaluator's own wrappers (load_inline's) say nothing
        while end > first + 1 and frames[end - 1].filename.startswith(_PACKAGE):
            end -= 1
    te.stack = traceback.StackSummary.from_list(frames[first:end])


def excerpt(
    exc: BaseException, limit: int = 2500, replace: dict[str, str] | None = None, own_dir: str | None = None
) -> str:
    """A traceback short enough to be feedback: the candidate's frames first (`own_dir`: where its
    files are; the evaluator's frames above them are left out), the last frames and the message."""
    te = traceback.TracebackException.from_exception(exc)
    if own_dir is not None:
        chained, seen = te, set()
        while chained is not None and id(chained) not in seen:
            seen.add(id(chained))
            _candidate_first(chained, own_dir)
            chained = chained.__cause__ or chained.__context__
    text = "".join(te.format())
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    out = "\n".join(lines)
    if len(out) > limit:
        out = "...\n" + out[-limit:]
    return out


def refill_inputs(task: types.ModuleType, inputs: list, seed: int, device: str, copy=torch.Tensor.copy_) -> None:
    """Give `inputs` the contents `make_inputs(seed)` would have, in the same buffers."""
    for dst, src in zip(inputs, make_inputs(task, seed, device)):
        if isinstance(dst, torch.Tensor):
            copy(dst, src)
