"""The patched model against the original, end to end: outputs on fresh inputs, each kernel seen to
take its regions, and the forward's time before and after.

The rules are a verdict's: outputs compare with the verdict's tolerances (evaluate.checks) on the
captured inputs and on inputs whose floating tensors are redrawn (same shape, mean and spread; integer
tensors such as token ids and positions are kept, they carry the model's structure); a kernel that
never takes its region fails the check (its work was not done by it); the timers are checked to be the
same objects after the kernels ran as before. Times: on CUDA the forward's device time (the sum of its
kernels' times, torch.profiler: what a CUDA-graph server pays) and its eager wall time; on the CPU its
wall time, relative only. Before and after alternate, several forwards each; medians and the min-max
spread are reported, and a speedup whose spreads overlap is said to be within noise.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from kernelsmith.capture.entry import Entry
from kernelsmith.capture.patch_runtime import Patch
from kernelsmith.capture.tape import tensors_in
from kernelsmith.errors import one_line
from kernelsmith.evaluate.checks import compare_tensor, tolerances

TRIALS = 3  # the captured inputs, then two redraws
_FWD = "ks_apply_forward_"


@dataclass
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, xs: list[float]) -> Spread:
        return cls(statistics.median(xs), min(xs), max(xs))


@dataclass
class Timing:
    measure: str  # "device time" | "eager time" | "CPU time"
    before_ms: Spread
    after_ms: Spread

    @property
    def speedup(self) -> float:
        return self.before_ms.median / self.after_ms.median if self.after_ms.median > 0 else float("inf")

    @property
    def within_noise(self) -> bool:
        return self.after_ms.low <= self.before_ms.high and self.before_ms.low <= self.after_ms.high


@dataclass
class E2E:
    outputs_match: bool
    mismatch: str | None  # the first output out of tolerance, as a verdict says it
    max_abs_err: float
    trials: int
    fired: dict[str, float] = field(default_factory=dict)  # kernel -> regions taken per forward
    merged: dict[str, str] = field(default_factory=dict)  # kernel -> the kernel that takes its regions
    skipped: dict[str, str] = field(default_factory=dict)  # kernel -> why its region cannot be taken
    timings: list[Timing] = field(default_factory=list)
    forged: str | None = None  # a timer replaced while the kernels ran


def _redraw(inputs, seed: int):
    """A deep copy of (args, kwargs) with every floating tensor redrawn at its own mean and spread."""
    fresh = copy.deepcopy(inputs)
    gen = torch.Generator().manual_seed(seed)
    for _, t in tensors_in(fresh):
        if t.is_floating_point() and t.numel() > 0:
            std, mean = (t.float().std().item() if t.numel() > 1 else 1.0), t.float().mean().item()
            noise = torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.device)
            t.copy_((noise * (std or 1.0) + mean).to(t.dtype))
    return fresh


def _leaves(output) -> list[torch.Tensor]:
    return [t for _, t in tensors_in(output)]


def _compare(ref, got, atol: float | None, rtol: float | None) -> tuple[str | None, float]:
    ref_l, got_l = _leaves(ref), _leaves(got)
    if len(ref_l) != len(got_l):
        return f"the patched model returned {len(got_l)} tensors, the model {len(ref_l)}", float("inf")
    worst = 0.0
    for k, (r, g) in enumerate(zip(ref_l, got_l)):
        a, rt = tolerances(r.dtype, atol, rtol)
        c = compare_tensor(r.detach(), g.detach(), a, rt, f"output tensor {k}")
        worst = max(worst, c.max_abs_err or 0.0)
        if not c.ok:
            return c.message, worst if c.max_abs_err is not None else float("inf")
    return None, worst


def current_timers() -> tuple:
    """The timers as a kernel module would reach them: compared before and after the kernels ran."""
    return (
        time.perf_counter,
        torch.cuda.synchronize,
        torch.cuda.Event,
        torch.profiler.profile,
        torch.profiler.record_function,
    )


def _wall_ms(run: Callable[[], object], device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    began = time.perf_counter()
    run()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - began) * 1e3


def _device_ms(runs: list[Callable[[], object]]) -> list[float]:
    """Each forward's device time: the kernels launched under its profiler range."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, run in enumerate(runs):
            with record_function(f"{_FWD}{i}"):
                run()
        torch.cuda.synchronize()
    out = [0.0] * len(runs)
    for e in prof.events() or []:
        if e.name.startswith(_FWD):
            out[int(e.name.removeprefix(_FWD))] = e.device_time_total / 1e3
    return out


def _forward(model, inputs: tuple) -> Callable[[], object]:
    args, kwargs = inputs
    return lambda: model(*args, **kwargs)


def _time(model, make: Callable[[], tuple], patch: Patch, device: str, reps: int) -> list[Timing]:
    """(before, after) per measure, the original and the patched forward alternating (ABBA, so that
    drift hits both alike)."""
    walls: dict[bool, list[float]] = {False: [], True: []}
    devs: dict[bool, list[float]] = {False: [], True: []}
    for rep in range(reps):
        for patched in (rep % 2 == 0, rep % 2 != 0):
            patch.active = patched
            walls[patched].append(_wall_ms(_forward(model, make()), device))
            if device == "cuda":
                devs[patched].append(_device_ms([_forward(model, make())])[0])
    patch.active = True
    measure = "eager time" if device == "cuda" else "CPU time"
    timings = [Timing(measure, Spread.of(walls[False]), Spread.of(walls[True]))]
    if device == "cuda":
        timings.insert(0, Timing("device time", Spread.of(devs[False]), Spread.of(devs[True])))
    return timings


def check(
    entry: Entry,
    patch: Patch,
    device: str,
    reps: int = 10,
    atol: float | None = None,
    rtol: float | None = None,
    timers: tuple | None = None,
) -> E2E:
    """`patch` is installed on `entry.model`; `timers` are `current_timers()` from before the kernels
    were loaded."""
    model, base = entry.model, (entry.args, entry.kwargs)
    make = lambda: copy.deepcopy(base)
    trials = [make()] + [_redraw(base, seed) for seed in range(1, TRIALS)]
    with torch.no_grad():
        patch.active = False
        args, kwargs = make()
        model(*args, **kwargs)  # warm-up: lazy inits happen outside the comparison
        refs = [model(*copy.deepcopy(a), **copy.deepcopy(k)) for a, k in trials]
        patch.active = True
        patch.reset_counts()
        try:
            gots = [model(*copy.deepcopy(a), **copy.deepcopy(k)) for a, k in trials]
        except Exception as exc:  # a kernel's own failure (a launch error, a wrong output): the check's verdict
            patch.active = False
            return E2E(False, one_line(f"the patched model raised {type(exc).__name__}: {exc}", 300), float("inf"), 0)
        fired = {name: c.fired / len(trials) for name, c in patch.counts.items()}
        mismatch, worst = None, 0.0
        for ref, got in zip(refs, gots):
            m, w = _compare(ref, got, atol, rtol)
            worst = max(worst, w)
            mismatch = mismatch or m
        result = E2E(mismatch is None, mismatch, worst, len(trials), fired, dict(patch.merged), dict(patch.skipped))
        if mismatch is None:
            result.timings = _time(model, make, patch, device, reps)
    if timers is not None and current_timers() != timers:
        result.forged = "a timer (time.perf_counter, torch.cuda.synchronize/Event or torch.profiler) was replaced"
    return result
