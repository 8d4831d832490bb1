"""A written task, run on the recorded values: its outputs must be the recorded outputs. This proves
the replay faithful before the task is written; a task that is not is left out, with the reason."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from kernelsmith.capture.regions import Region
from kernelsmith.capture.tape import Tape
from kernelsmith.capture.write_task import Rendered
from kernelsmith.task import load_module

# Replaying the same aten ops on the same values is exact on the CPU; a GPU may pick another kernel.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-9, torch.float16: 1e-3, torch.bfloat16: 1e-2}


def _copy(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def check_task(source: str, tape: Tape, region: Region, rendered: Rendered, device: str) -> str | None:
    """None when the task reproduces the region, else why not (one line)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            module = load_module(source, Path(tmp) / "task.py", f"_ks_capture_check_{id(region)}")
            torch.manual_seed(0)
            with torch.device(device):
                made = module.get_inputs()
                model = module.Model(*module.get_init_inputs())
        except Exception as exc:
            return f"the task does not build: {type(exc).__name__}: {exc}"
    for k, (tid, _) in enumerate(rendered.inputs):
        m, got = tape.meta[tid], made[k]
        if (tuple(got.shape), tuple(got.stride()), got.dtype) != (m.shape, m.stride, m.dtype):
            return f"get_inputs()[{k}] is {got.dtype}{list(got.shape)} stride {list(got.stride())}, not as recorded"
    with torch.no_grad():
        for attr, (tid, ver) in rendered.params.items():
            getattr(model, attr).copy_(tape.value(tid, ver))
        try:
            outs = model(*[_copy(tape.value(tid, ver)) for tid, ver in rendered.inputs])
        except Exception as exc:
            return f"the task's forward raised {type(exc).__name__}: {exc}"
    outs = outs if isinstance(outs, tuple) else (outs,)
    for k, ((tid, ver), got) in enumerate(zip(region.outputs, outs)):
        want = tape.value(tid, ver)
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"output {k} is {got.dtype}{list(got.shape)}, the model's {want.dtype}{list(want.shape)}"
        tol = TOLERANCE.get(want.dtype, 0.0)
        same = torch.equal(got, want) if tol == 0.0 else torch.allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
        if not same:
            diff = (got.double() - want.double()).abs().max().item() if want.is_floating_point() else "n/a"
            return f"output {k} differs from the model's (max abs diff {diff})"
    return None
