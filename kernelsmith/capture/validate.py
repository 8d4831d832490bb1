"""A written task, run on the recorded values: its outputs must be the recorded outputs. This proves
the replay faithful before the task is written; a task that is not is left out, with the reason.
Run on the values it draws itself, its reference must give no NaN or inf that the model's outputs do
not hold: a reference that does is no test of a candidate (its NaNs would be copied through and the
rest never checked), so the task is an error of capture's, said then, not a verdict later. At its CPU
sizes (sizes.py) the task must run the same ops, every output of the planned shape (check_small). At each
other shape it names (SHAPES), with its sizes set there, it must reproduce the region on that shape's
recorded values (check_shapes)."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from kernelsmith.capture.regions import Region
from kernelsmith.capture.sizes import SizePlan
from kernelsmith.capture.tape import Ref, Tape
from kernelsmith.capture.write_task import Rendered
from kernelsmith.evaluate.runtime import build_model, make_inputs
from kernelsmith.task import load_module
from kernelsmith.task_sizes import resize, shrink

# Replaying the same aten ops on the same values is exact on the CPU; a GPU may pick another kernel.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-9, torch.float16: 1e-3, torch.bfloat16: 1e-2}


def _copy(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def _bad_values(t: torch.Tensor) -> tuple[int, int]:
    """(NaNs, infinities) in a tensor (none in one that is not floating)."""
    if not (t.is_floating_point() or t.is_complex()):
        return 0, 0
    return int(torch.isnan(t).sum()), int(torch.isinf(t).sum())


def _drawn_not_finite(module, model, recorded: list[torch.Tensor], device: str) -> str | None:
    """Why the task's reference is no test on the values it draws (NaN or inf where the model's
    outputs have none: a verdict would judge a candidate on them), or None. Input seeds 0 and 1, as
    the evaluator draws its first sets."""
    for seed in (0, 1):
        try:
            with torch.no_grad():
                outs = model(*make_inputs(module, seed, device))
        except Exception as exc:
            return f"the task's forward raised {type(exc).__name__} on the values it draws: {exc}"
        outs = outs if isinstance(outs, tuple) else (outs,)
        for k, (got, want) in enumerate(zip(outs, recorded)):
            (nan, inf), (nan_want, inf_want) = _bad_values(got), _bad_values(want)
            if (nan and not nan_want) or (inf and not inf_want):
                return (
                    f"the task is degenerate: output {k} holds {nan} NaN and {inf} inf on the values it draws "
                    f"(seed {seed}), the model's none"
                )
    return None


def check_task(source: str, tape: Tape, region: Region, rendered: Rendered, device: str) -> str | None:
    """None when the task reproduces the region and its reference is finite on what it draws, else
    why not (one line)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            module = load_module(source, Path(tmp) / "task.py", f"_ks_capture_check_{id(region)}")
            made = make_inputs(module, 0, device)
            model = build_model(module.Model, module, 0, device)  # as the evaluator builds it
        except Exception as exc:
            return f"the task does not build: {type(exc).__name__}: {exc}"
    for k, (tid, _) in enumerate(rendered.inputs):
        m, got = tape.meta[tid], made[k]
        if (tuple(got.shape), tuple(got.stride()), got.dtype) != (m.shape, m.stride, m.dtype):
            return f"get_inputs()[{k}] is {got.dtype}{list(got.shape)} stride {list(got.stride())}, not as recorded"
    drawn = _drawn_not_finite(module, model, [tape.value(tid, ver) for tid, ver in region.outputs], device)
    if drawn is not None:
        return drawn
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


class _Shapes(TorchDispatchMode):
    """Each op's name and what it returns (shapes and dtypes), in order."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, list[torch.Tensor]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        self.ops.append((str(func), [t for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]))
        return result


def check_small(body: str, tape: Tape, region: Region, plan: SizePlan) -> str | None:
    """None when the task at its CPU sizes runs the region's ops with every output of the planned
    shape (the region's ranks and dtypes, the constants' CPU sizes) and a finite reference, else why
    not (one line). Run on the CPU, where CPU sizes are for."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            module = load_module(shrink(body), Path(tmp) / "small.py", f"_ks_capture_small_{id(region)}")
            model = build_model(module.Model, module, 0, "cpu")
            inputs = make_inputs(module, 0, "cpu")
            with torch.no_grad(), _Shapes() as seen:
                outs = model(*inputs)
        except Exception as exc:
            return f"at CPU sizes the task raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    ran = seen.ops[len(region.written_inputs) :]  # after the clones of the inputs it writes
    if [name for name, _ in ran] != [str(tape.ops[i].func) for i in region.replay]:
        return "at CPU sizes the task runs other ops"
    for i, (name, got) in zip(region.replay, ran):
        made = [r for r in pytree.tree_leaves(tape.ops[i].out) if isinstance(r, Ref)]
        for r, t in zip(made, got):
            want = plan.small_of(r.tid)
            if t.dtype != tape.meta[r.tid].dtype or (want is not None and list(t.shape) != want):
                return f"at CPU sizes {name.removeprefix('aten.')} gives {list(t.shape)}, not {want}"
    outs = outs if isinstance(outs, tuple) else (outs,)
    if any(sum(_bad_values(o)) for o in outs if isinstance(o, torch.Tensor)):
        return "at CPU sizes the reference is not finite"
    return None


def check_shapes(body: str, region: Region, rendered: Rendered, device: str) -> dict[int, str]:
    """Why the task does not hold at each other shape it names (by its place in `rendered.elsewhere.at`):
    its sizes set to that shape's, check_task on that shape's recorded region. {} where it holds at all."""
    where, plan = rendered.elsewhere, rendered.sizes
    if where is None or plan is None:
        return {}
    place = {tid: k for k, (tid, _) in enumerate(region.inputs)}
    dropped: dict[int, str] = {}
    for m, (there, other) in enumerate(where.regions):
        theirs = [other.inputs[place[tid]] for tid, _ in rendered.inputs]
        at = replace(
            rendered, inputs=theirs, params={a: other.inputs[place[t]] for a, (t, _) in rendered.params.items()}
        )
        why = check_task(resize(body, {n: v[m] for n, v in plan.varying.items()}), there, other, at, device)
        if why is not None:
            dropped[m] = why
    return dropped
