"""The patched model against the original, end to end: outputs on fresh inputs, each kernel seen to
take its regions, and the forward's time before and after.

The rules are a verdict's: outputs compare with the verdict's tolerances (evaluate.checks) on the
captured inputs and on inputs whose floating tensors are redrawn (same shape, mean and spread; integer
tensors such as token ids and positions are kept, they carry the model's structure); a kernel that
never takes its region fails the check (its work was not done by it); the timers are checked to be the
same objects after the kernels ran as before. Times (forward_time.py): the forward's time as capture
measures it (on CUDA the device time of its kernels: what a CUDA-graph server pays; on the CPU its CPU
time, relative only), its wall time beside it (on CUDA the eager time), and each kernel's time in the
patched forward.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch

from kernelsmith.capture.entry import Entry
from kernelsmith.capture.forward_time import Spread, Timing, time_forwards
from kernelsmith.capture.patch_runtime import Patch
from kernelsmith.capture.tape import tensors_in
from kernelsmith.errors import one_line
from kernelsmith.evaluate.checks import compare_tensor, tolerances

TRIALS = 3  # the captured inputs, then two redraws


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
    kernel_ms: dict[str, Spread] = field(default_factory=dict)  # kernel -> its regions' time per patched forward
    forged: str | None = None  # a timer replaced while the kernels ran
    mode: str = "eager"  # how the model ran: eager, compile (torch.compile), graphs (and CUDA graphs)
    graph_breaks: list[int] = field(default_factory=list)  # compiled modes: [the model's, the patched model's]
    break_reasons: list[str] = field(default_factory=list)  # the patched model's graph breaks
    served: dict[str, str] = field(default_factory=dict)  # kernel -> how it serves the model (Patch.served)


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


def _held(output) -> list[torch.Tensor]:
    """The output's tensors, copied (a CUDA graph's next replay overwrites its outputs)."""
    return [t.detach().clone() for t in _leaves(output)]


def _compare(ref_l: list[torch.Tensor], got_l: list[torch.Tensor], atol, rtol) -> tuple[str | None, float]:
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


def runner(model, mode: str):
    """The forward as `mode` runs it: the model itself (eager), torch.compile of it (compile), or
    torch.compile(mode="reduce-overhead"), whose forwards replay CUDA graphs (graphs)."""
    if mode == "eager":
        return model
    compiled = torch.compile(model, mode="reduce-overhead" if mode == "graphs" else None)
    if mode != "graphs":
        return compiled

    def replay(*args, **kwargs):
        torch.compiler.cudagraph_mark_step_begin()  # each call a new step: the last one's outputs were copied
        return compiled(*args, **kwargs)

    return replay


def graph_breaks(model, patch: Patch, make) -> tuple[list[int], list[str]]:
    """torch._dynamo.explain of the model and of the patched model: their graph breaks, and the patched
    model's reasons."""
    counts, reasons = [], []
    for active in (False, True):
        patch.active = active
        args, kwargs = make()
        with torch.no_grad():
            explained = torch._dynamo.explain(model)(*args, **kwargs)
        counts.append(explained.graph_break_count)
        reasons = [one_line(str(getattr(r, "reason", r)), 200) for r in explained.break_reasons]
    patch.active = True
    return counts, reasons[:3]


def check(
    entry: Entry,
    patch: Patch,
    device: str,
    reps: int = 10,
    atol: float | None = None,
    rtol: float | None = None,
    timers: tuple | None = None,
    mode: str = "eager",
) -> E2E:
    """`patch` is installed on `entry.model`; `timers` are `current_timers()` from before the kernels
    were loaded. In the compiled modes the original is the model compiled without the patch (the patch
    inactive: torch.compile compiles each state apart), and the regions taken are those of one forward
    (under CUDA graphs the kernels' Python runs only when a graph is recorded)."""
    model, base = entry.model, (entry.args, entry.kwargs)
    make = lambda: copy.deepcopy(base)
    trials = [make()] + [_redraw(base, seed) for seed in range(1, TRIALS)]
    breaks = graph_breaks(model, patch, make) if mode != "eager" else ([], [])
    run = runner(model, mode)
    with torch.no_grad():
        patch.active = False
        args, kwargs = make()
        run(*args, **kwargs)  # warm-up: lazy inits (and the original's compile) happen outside the comparison
        refs = [_held(run(*copy.deepcopy(a), **copy.deepcopy(k))) for a, k in trials]
        patch.active = True
        patch.reset_counts()
        try:
            if mode != "eager":
                args, kwargs = make()
                run(*args, **kwargs)  # the patched model's compile, and its one forward the counts read
                once = {name: float(c.fired) for name, c in patch.counts.items()}
            gots = [_held(run(*copy.deepcopy(a), **copy.deepcopy(k))) for a, k in trials]
        except Exception as exc:  # a kernel's own failure (a launch error, a wrong output): the check's verdict
            patch.active = False
            message = one_line(f"the patched model raised {type(exc).__name__}: {exc}", 300)
            return E2E(False, message, float("inf"), 0, mode=mode)
        fired = once if mode != "eager" else {name: c.fired / len(trials) for name, c in patch.counts.items()}
        mismatch, worst = None, 0.0
        for ref, got in zip(refs, gots):
            m, w = _compare(ref, got, atol, rtol)
            worst = max(worst, w)
            mismatch = mismatch or m
        skipped = dict(patch.skipped) | (dict(patch.eager_only) if mode != "eager" else {})
        result = E2E(mismatch is None, mismatch, worst, len(trials), fired, dict(patch.merged), skipped, mode=mode)
        result.graph_breaks, result.break_reasons = breaks
        result.served = {name: patch.served(name) for name in patch.mode.kernels}
        if mismatch is None:
            result.timings, result.kernel_ms = time_forwards(run, make, patch, device, reps, mode)
    if timers is not None and current_timers() != timers:
        result.forged = "a timer (time.perf_counter, torch.cuda.synchronize/Event or torch.profiler) was replaced"
    return result
