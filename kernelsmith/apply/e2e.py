"""The patched model against the original, end to end: outputs on fresh inputs, each kernel seen to
take its regions, and the forward's time before and after.

The rules are a verdict's: outputs are judged against the model's own rounding in the same mode, by its
error against a higher-precision run of the model (yardstick.py, e2e_outputs.py), with the verdict's flat
tolerances as the other way to pass, on the captured inputs and on inputs whose floating tensors are
redrawn (same shape, mean and spread; integer tensors such as token ids and positions are kept, they
carry the model's structure); a kernel that never takes its region fails the check (its work was not
done by it); the timers are checked to be the same objects after the kernels ran as before. Times
(forward_time.py): the forward's time as capture measures it (on CUDA the device time of its kernels:
what a CUDA-graph server pays; on the CPU its CPU time, relative only), its wall time beside it (on CUDA
the eager time), and each kernel's time in the patched forward.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch

from kernelsmith.apply.e2e_outputs import FLAT, OwnError, judge
from kernelsmith.apply.forward_time import Spread, Timing, time_forwards
from kernelsmith.apply.options import MODES
from kernelsmith.apply.yardstick import Yardstick
from kernelsmith.capture.entry import Entry
from kernelsmith.capture.tape import tensors_in
from kernelsmith.errors import UserError, one_line
from kernelsmith.patch.install import Patch

TRIALS = 3  # the captured inputs, then two redraws


@dataclass(kw_only=True)
class E2E:
    outputs_match: bool
    mismatch: str | None  # the first output out of tolerance, as a verdict says it, with the rule's numbers
    max_abs_err: float
    trials: int
    outputs_rule: str = FLAT  # which rule decided the outputs (e2e_outputs.py): "flat tolerance" or "own error"
    outputs_said: str = ""  # the outputs' verdict in one line, with its numbers
    own_error: OwnError | None = None  # the deciding output's errors against the yardstick
    yardstick: str | None = None  # the higher-precision run's dtype (None: none ran; outputs_said says why)
    fired: dict[str, float] = field(default_factory=dict)  # kernel -> regions taken per forward
    merged: dict[str, str] = field(default_factory=dict)  # kernel -> the kernel that takes its regions
    # kernel -> a kernel whose larger region held one of its regions and took it (the patch's `within`)
    within: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # kernel -> why it takes no region in this mode
    unserved: dict[str, str] = field(default_factory=dict)  # of those, a kernel that does not serve this mode -> why
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
    torch.compile(mode="reduce-overhead"), whose forwards replay CUDA graphs (graphs). Another word is
    refused (a typo must not quietly compile)."""
    if mode not in MODES:
        raise UserError(f"unknown mode {mode!r}: use {', '.join(MODES)}")
    if mode == "eager":
        return model
    compiled = torch.compile(model, mode="reduce-overhead" if mode == "graphs" else None)
    if mode != "graphs":
        return compiled

    def replay(*args, **kwargs):
        torch.compiler.cudagraph_mark_step_begin()  # each call a new step: the last one's outputs were copied
        return compiled(*args, **kwargs)

    return replay


def trials(entry: Entry) -> list:
    """The check's inputs, (args, kwargs) each: the captured ones, then TRIALS - 1 redraws (the same on
    every call, so that the yardstick runs on the inputs the check runs)."""
    base = (entry.args, entry.kwargs)
    return [copy.deepcopy(base)] + [_redraw(base, seed) for seed in range(1, TRIALS)]


WHOSE = {"eager": "the model's", "compile": "the compiled model's", "graphs": "the graph-replayed model's"}


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
    yardstick: Yardstick | None = None,
) -> E2E:
    """`patch` is installed on `entry.model`; `timers` are `current_timers()` from before the kernels
    were loaded; `yardstick`: `yardstick.measure` of the model on `trials(entry)`, made before the patch
    was installed (None: the flat tolerance decides alone, and the result says so). In the compiled modes
    the original is the model compiled without the patch (the patch inactive: torch.compile compiles each
    state apart), and the regions taken are those of one forward (under CUDA graphs the kernels' Python
    runs only when a graph is recorded)."""
    model, base = entry.model, (entry.args, entry.kwargs)
    make = lambda: copy.deepcopy(base)
    inputs = trials(entry)
    breaks = graph_breaks(model, patch, make) if mode != "eager" else ([], [])
    run = runner(model, mode)
    with torch.no_grad():
        patch.active = False
        args, kwargs = make()
        run(*args, **kwargs)  # warm-up: lazy inits (and the original's compile) happen outside the comparison
        refs = [_held(run(*copy.deepcopy(a), **copy.deepcopy(k))) for a, k in inputs]
        patch.active = True
        patch.reset_counts()
        try:
            if mode != "eager":
                args, kwargs = make()
                run(*args, **kwargs)  # the patched model's compile, and its one forward the counts read
                once = {name: float(c.fired) for name, c in patch.counts.items()}
            gots = [_held(run(*copy.deepcopy(a), **copy.deepcopy(k))) for a, k in inputs]
        except Exception as exc:  # a kernel's own failure (a launch error, a wrong output): the check's verdict
            patch.active = False
            message = one_line(f"the patched model raised {type(exc).__name__}: {exc}", 300)
            return E2E(
                outputs_match=False,
                mismatch=message,
                max_abs_err=float("inf"),
                trials=0,
                outputs_said=message,
                mode=mode,
            )
        fired = once if mode != "eager" else {name: c.fired / len(inputs) for name, c in patch.counts.items()}
        yard = yardstick or Yardstick(None, why="none was made for this check")
        outputs = judge(refs, gots, yard.outputs or None, yard.dtype, WHOSE[mode], atol, rtol, yard.why)
        # a kernel that does not serve this mode (patch.json's modes; an eager-only one in a compiled mode; one
        # whose regions another takes that does not serve it) is not expected to take its regions here
        unserved = patch.unserved(mode)
        skipped = dict(patch.skipped) | unserved
        result = E2E(
            outputs_match=outputs.ok,
            mismatch=outputs.mismatch,
            max_abs_err=outputs.max_abs_err,
            trials=len(inputs),
            mode=mode,
        )
        result.fired, result.merged, result.skipped, result.unserved = fired, dict(patch.merged), skipped, unserved
        result.within = dict(patch.dispatch.within)
        result.outputs_rule, result.outputs_said, result.own_error = outputs.rule, outputs.said, outputs.own_error
        result.yardstick = yard.dtype
        result.graph_breaks, result.break_reasons = breaks
        result.served = {name: patch.served(name) for name in patch.dispatch.kernels}
        if outputs.ok:
            result.timings, kernel_ms = time_forwards(run, make, patch, device, reps, mode)
            result.kernel_ms = {n: ms for n, ms in kernel_ms.items() if n not in skipped}  # those serving the mode
    if timers is not None and current_timers() != timers:
        result.forged = "a timer (time.perf_counter, torch.cuda.synchronize/Event or torch.profiler) was replaced"
    return result
