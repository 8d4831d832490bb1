"""Running a task's code: inputs and models built the same way in the judge and the sandbox.

Both processes seed the same way and build on the target device directly (inside a
`torch.device` context, so a task's `torch.rand(...)` lands on the GPU without a host copy),
so the judge's reference and the sandbox's candidate see bit-identical inputs and weights. Both,
and the seed step's compile, run at one float32 precision (PRECISION).
"""

from __future__ import annotations

import os
import traceback
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

# The precision of every float32 op of an evaluation: in the judge (the reference, torch.compile's
# baseline), in the sandbox (a candidate's library calls) and in the seed step's compile (Inductor bakes
# the TF32 flags into its GEMM and convolution templates as `ALLOW_TF32`, and its code calls the library
# at run time, in the sandbox). float32's own: TF32 off for cuDNN's convolutions and cuBLAS's matmuls.
# torch's defaults differ between the two (cuDNN TF32 on, matmul off), and cuDNN with TF32 allowed picks
# TF32 kernels or not by layout and shape: on an H100 the eager NCHW reference of KernelBench L2/21 ran in
# float32 (2.6e-6 off a float64 run) while its seed's channels-last convolution ran in TF32 (2.4e-3), an
# `incorrect` seed (issue 47). The others are pinned at torch's defaults, so that one place names them all.
PRECISION: dict[str, bool | str] = {
    "cudnn.allow_tf32": False,
    "cuda.matmul.allow_tf32": False,
    "float32_matmul_precision": "highest",
    "cuda.matmul.allow_fp16_reduced_precision_reduction": True,
    "cuda.matmul.allow_bf16_reduced_precision_reduction": True,
    "cudnn.benchmark": False,
}
PRECISION_KEY = "fp32-ieee"  # PRECISION in a word, for the keys of what was measured under it


def precision_flags() -> dict[str, bool | str]:
    """The flags of PRECISION as they are in force in this process now."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    try:
        cudnn_tf32 = bool(cudnn.allow_tf32)
    except RuntimeError:  # torch >= 2.9 refuses the legacy read when conv and RNN were set apart (new API)
        cudnn_tf32 = getattr(getattr(cudnn, "conv", None), "fp32_precision", "") == "tf32"
    try:
        matmul_precision = torch.get_float32_matmul_precision()
    except RuntimeError:  # likewise where CUDA's and the CPU's matmul precisions were set apart
        matmul_precision = "high" if getattr(matmul, "fp32_precision", "") == "tf32" else "mixed"
    return {
        "cudnn.allow_tf32": cudnn_tf32,
        "cuda.matmul.allow_tf32": bool(matmul.allow_tf32),
        "float32_matmul_precision": matmul_precision,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": bool(matmul.allow_fp16_reduced_precision_reduction),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": bool(matmul.allow_bf16_reduced_precision_reduction),
        "cudnn.benchmark": bool(cudnn.benchmark),
    }


def set_precision(flags: dict[str, bool | str] = PRECISION) -> None:
    """Put `flags` (PRECISION's keys) in force in this process: the judge and the sandbox at their start."""
    matmul = torch.backends.cuda.matmul
    cudnn: Any = torch.backends.cudnn  # a module class of torch's own, whose flags pyright does not see
    cudnn.allow_tf32 = bool(flags["cudnn.allow_tf32"])  # the legacy setter: convolutions and RNNs alike
    torch.set_float32_matmul_precision(str(flags["float32_matmul_precision"]))
    matmul.allow_tf32 = bool(flags["cuda.matmul.allow_tf32"])
    matmul.allow_fp16_reduced_precision_reduction = bool(flags["cuda.matmul.allow_fp16_reduced_precision_reduction"])
    matmul.allow_bf16_reduced_precision_reduction = bool(flags["cuda.matmul.allow_bf16_reduced_precision_reduction"])
    cudnn.benchmark = bool(flags["cudnn.benchmark"])


@contextmanager
def evaluation_precision() -> Iterator[None]:
    """PRECISION in force inside, this process's own flags back after (the seed step's compile and run)."""
    before = precision_flags()
    set_precision()
    try:
        yield
    finally:
        set_precision(before)


def to_device(value, device: str):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def task_shapes(task: types.ModuleType) -> list[dict[str, int]]:
    """The task's SHAPES: the other shapes it is judged at (capture's --shape), each the values of some of its
    module-level int constants; [] where it declares none. A malformed one is a ValueError saying why."""
    shapes = getattr(task, "SHAPES", None)
    if shapes is None:
        return []
    if not isinstance(shapes, list) or not all(isinstance(s, dict) for s in shapes):
        raise ValueError("SHAPES must be a list of dicts of its named sizes to ints")
    for shape in shapes:
        for name, value in shape.items():
            if type(value) is not int or type(getattr(task, str(name), None)) is not int:
                raise ValueError(f"SHAPES names {name!r}={value!r}: not an int for a module-level int constant")
    return shapes


@contextmanager
def at_sizes(task: types.ModuleType, sizes: dict[str, int] | None) -> Iterator[None]:
    """The task's named sizes at `sizes` inside (its get_inputs and Model read them when called: a SHAPES
    entry), and as they were after."""
    before = {name: getattr(task, name) for name in sizes or {}}
    for name, value in (sizes or {}).items():
        setattr(task, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(task, name, value)


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
