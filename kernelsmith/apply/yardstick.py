"""The end-to-end check's yardstick: the model run once more at a higher precision on the check's inputs,
so that each side's error can be measured against it (DESIGN.md, "What a gain means"; e2e_outputs.py).

The copy is the model's own, deep-copied before the patch is installed (a patched model's forwards and
hooks would call into the original) and cast; floating inputs are cast alike, integer ones (token ids,
positions) kept. float64 first, on the CPU and on CUDA alike: it is what the verdict's precision rule runs
(evaluate/checks.py), so a kernel is held to one yardstick in its task and in its model; and float64
obeys no reduced-precision switch (TF32 convolutions are on by default on CUDA, which would leave a float32
run only ~8x finer than a bf16 model). Where float64 cannot be made or run on CUDA (its copy is 4x a bf16
model's weights; an op without a float64 kernel), a model whose floating tensors are all narrower than
float32 gets a float32 run with TF32 off, still 2^16 finer than bf16. Where none runs, the check falls
back to the flat tolerance and says why (`Yardstick.why`).
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field

import torch

from kernelsmith.capture.tape import tensors_in
from kernelsmith.errors import one_line
from kernelsmith.evaluate.measuring.capture import release_memory


@dataclass
class Yardstick:
    dtype: str | None  # "float64" or "float32"; None: no higher-precision run (why says so)
    outputs: list[list[torch.Tensor]] = field(default_factory=list)  # per trial, the forward's tensors
    why: str | None = None


def _narrow(model: torch.nn.Module, trials: list) -> bool:
    """Every floating tensor of the model and its inputs is narrower than float32 (bf16, fp16, fp8)."""
    tensors = [*model.parameters(), *model.buffers(), *(t for _, t in tensors_in(trials))]
    floating = [t for t in tensors if t.is_floating_point()]
    return bool(floating) and all(t.element_size() < 4 for t in floating)


def _cast_inputs(trial, dtype: torch.dtype):
    """A deep copy of (args, kwargs) whose floating tensors are `dtype` (in place of their data, so that
    tensors held by objects, such as a KV cache's, are cast too)."""
    fresh = copy.deepcopy(trial)
    for _, t in tensors_in(fresh):
        if t.is_floating_point():
            t.data = t.data.to(dtype)
    return fresh


@contextlib.contextmanager
def _ieee_float32(dtype: torch.dtype):
    """While a float32 yardstick runs, float32 matmuls and convolutions in IEEE float32, no TF32 (torch's
    fp32_precision switches; the legacy allow_tf32 ones raise once the two kinds are mixed)."""
    found = [torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None)]
    # torch before 2.9 has no such switches: left as they are there
    switches = [s for s in found if hasattr(s, "fp32_precision")] if dtype == torch.float32 else []
    before = [s.fp32_precision for s in switches]
    for switch in switches:
        switch.fp32_precision = "ieee"
    try:
        yield
    finally:
        for switch, was in zip(switches, before):
            switch.fp32_precision = was


def _run(model: torch.nn.Module, trials: list, dtype: torch.dtype) -> list[list[torch.Tensor]]:
    precise = copy.deepcopy(model).to(dtype)
    try:
        outputs = []
        with torch.no_grad(), _ieee_float32(dtype):
            for trial in trials:
                args, kwargs = _cast_inputs(trial, dtype)
                outputs.append([t.detach() for _, t in tensors_in(precise(*args, **kwargs))])
        return outputs
    finally:
        del precise


def measure(model: torch.nn.Module, trials: list, device: str) -> Yardstick:
    """The model's outputs on each of `trials` ((args, kwargs), as the check runs them) from a
    higher-precision copy of it; call before a patch is installed on `model`."""
    dtypes = [torch.float64]
    if device == "cuda" and _narrow(model, trials):
        dtypes.append(torch.float32)
    failed = []
    for dtype in dtypes:
        try:
            return Yardstick(str(dtype).removeprefix("torch."), _run(model, trials, dtype))
        except Exception as exc:  # memory, an op without this dtype, a dtype fixed inside forward
            failed.append(f"{str(dtype).removeprefix('torch.')}: {type(exc).__name__}: {exc}")
        finally:
            release_memory()
    return Yardstick(None, why=one_line("the model could not run in " + "; ".join(failed), 300))
