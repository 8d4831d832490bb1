"""Which kernels serve each mode the model runs in, measured in the model (DESIGN.md, "What a faster model
means"): a patch serves a mode only with kernels that make it faster; a mode no kernel makes faster runs
the model as it was, and says so.

Each mode the check runs (--mode) starts with the kernels whose verdicts let them serve it (eager: every
kernel in the patch; compile and graphs: those whose verdict does not lose to torch.compile's own code,
operators only), written into patch.json's `modes`, which the runtime serves by (patch/kernel_op.modes_of).
After each check of the mode:
- a check that fails (outputs, a forged timer, a graph break, a kernel that should have taken its regions
  and did not: `broken`) ends the mode as it is: the patch fails;
- a kernel whose own regions took longer in the patched forward than the model's ops took them, beyond
  both spreads (gains.costlier: the eager forward, where capture's shares give each region's time
  before), is left out of the mode, and the mode is checked again with the rest, at most REDOS times;
- a mode still slower than the model in some measure beyond the spreads, or not faster in the profiled
  one (device time on CUDA: the median speedup at most 1), runs the model as it was: no kernel serves it.
`--accept-slower` keeps what it accepts as measured (`all`: every kernel stays; `eager`: an eager-time
slowdown stays). On the CPU times are relative only (Triton's interpreter): none leaves a kernel out. A
mode the check did not run is served by no kernel: nothing measured it (with --no-check no mode is
measured, and the verdicts decide: patch.json says it was not checked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kernelsmith.apply.e2e import E2E, check
from kernelsmith.apply.gains import Part, costlier, slowdowns
from kernelsmith.apply.options import MODES, ApplyOptions
from kernelsmith.apply.patch_dir import Chosen, verdict_modes, write_modes
from kernelsmith.apply.yardstick import Yardstick
from kernelsmith.capture.entry import Entry
from kernelsmith.errors import UserError
from kernelsmith.patch.install import PatchError
from kernelsmith.progress import counted

# Checks of a mode again after leaving out the kernels that cost it: each costs what the first did (a
# compiled mode compiles again). Two: a kernel that only shows once another is gone gets its turn.
REDOS = 2


@dataclass
class Tried:
    """One check of a mode, with the kernels that served it then."""

    kernels: list[str]
    measure: str | None  # the profiled measure (None: no times, the check failed first)
    speedup: float | None  # the mode's in it: the original's median over the patched one's
    left_out: dict[str, str] = field(default_factory=dict)  # kernels this check left out of the mode -> why


@dataclass
class ModeServed:
    """A mode as the patch serves it: with these kernels, or as the model was."""

    mode: str
    checked: bool  # --mode asked for it
    kernels: list[str] = field(default_factory=list)  # the kernels that take their regions there (none: as it was)
    as_was: str | None = None  # why it runs the model as it was (None: kernels serve it)
    measure: str | None = None  # the last check's profiled measure
    speedup: float | None = None  # the last check's (with `kernels`, where they serve it)
    tried: list[Tried] = field(default_factory=list)  # each check of the mode, in order
    said: str = ""  # the mode in one line


@dataclass
class Judged:
    """What one check's times say of its mode."""

    measure: str | None
    speedup: float | None
    culprits: dict[str, str] = field(default_factory=dict)  # kernel -> why its regions cost the mode time
    slower: str | None = None  # how the mode is not made faster (None: it is, or the times cannot say)


@dataclass
class Checking:
    """What every check of every mode needs (run.py makes it)."""

    entry: Entry
    out: Path
    device: str
    opts: ApplyOptions
    timers: tuple
    yard: Yardstick
    parts: dict[str, Part]  # the kernels in the patch, by name
    measure: str | None  # capture's
    install: Callable  # kernelsmith.patch.install.install


@dataclass
class _Seen:
    """An install's answer for one mode."""

    running: list[str]
    unserved: dict[str, str]
    merged: dict[str, str]
    skipped: dict[str, str]


def took(c: Chosen, e: E2E) -> bool:
    """The kernel (or the one its regions merged into) took its regions in the checked forwards, or a kernel
    whose larger region held them took them (graph_match.pick: the larger cover wins)."""
    keeper = e.merged.get(c.name, c.name)
    return e.fired.get(keeper, 0) > 0 or e.fired.get(e.within.get(keeper, ""), 0) > 0


def broken(e: E2E, kernels: list[Chosen]) -> str | None:
    """Why a check fails whatever its times say (None: it does not): nothing substituted at all, outputs,
    a replaced timer, a graph break, a kernel serving the mode that never took its regions."""
    applied = [c for c in kernels if c.why is None and c.name not in e.skipped]
    if not applied:
        why = "; ".join(f"{c.name}: {c.why or e.skipped.get(c.name)}" for c in kernels)
        return f"no kernel could be substituted, so the patch does nothing ({why})"
    if not e.outputs_match:
        return e.mismatch or "outputs differ from the model's"
    if e.forged:
        return e.forged
    if len(e.graph_breaks) == 2 and e.graph_breaks[1] > e.graph_breaks[0]:
        return (
            f"the patch breaks torch.compile's graph: {e.graph_breaks[1]} graph breaks, the model alone "
            f"{e.graph_breaks[0]} ({'; '.join(e.break_reasons)})"
        )
    idle = [c.name for c in applied if not took(c, e)]
    if idle:
        return f"{', '.join(idle)} never took its region (it did none of the model's work)"
    return None


def judge(e: E2E, parts: dict[str, Part], capture_measure: str | None, accept: str) -> Judged:
    """The check's times against the rule (the module's docstring)."""
    t = e.timings[0] if e.timings else None
    if t is None:
        return Judged(None, None)
    judged = Judged(t.measure, t.speedup)
    if t.measure.startswith("CPU") or accept == "all":  # relative only; or accepted, kept as measured
        return judged
    for k in costlier(e, parts, capture_measure):
        judged.culprits[k.name] = (
            f"its regions took {k.before_ms or 0:.3g} -> {k.after_ms:.3g} ms per forward in {t.measure}, more "
            f"than the model's own ops in {e.mode} mode"
        )
    slow = [s for s in slowdowns(e, parts, capture_measure, accept) if s.accepted is None]
    if slow:
        s = slow[0]
        judged.slower = f"made it slower ({s.before_ms.median / s.after_ms.median:.3g}x {s.measure})"
    elif t.speedup <= 1.0:
        judged.slower = f"did not make it faster ({t.speedup:.3g}x {t.measure}, within the spread)"
    return judged


def _check(ck: Checking, mode: str) -> tuple[E2E | None, _Seen]:
    """The patch as patch.json now has it, installed, checked in `mode` and removed (None: no kernel
    serves the mode, so there is nothing to check, unless no kernel could be substituted at all)."""
    try:
        patch = ck.install(ck.entry.model, ck.out, ck.device)
    except PatchError as exc:
        raise UserError(f"the patch does not fit the model: {exc}") from None
    try:
        seen = _Seen(patch.serving(mode), patch.unserved(mode), dict(patch.merged), dict(patch.skipped))
        if not seen.running and patch.entries:
            return None, seen
        o = ck.opts
        return check(ck.entry, patch, ck.device, o.reps, o.atol, o.rtol, ck.timers, mode, ck.yard), seen
    finally:
        patch.remove()
        # What Dynamo compiled for this install (its wrapped forwards, its guards on this patch) runs no more:
        # dropped, so that the next install's checks do not fill the recompile limit of frames they share.
        torch._dynamo.reset()


def _leave(kernels: list[Chosen], names: set[str], mode: str, why: str, merged: dict[str, str]) -> None:
    """`names` (and the kernels whose regions are theirs) serve `mode` no more, for `why`."""
    for c in kernels:
        keeper = merged.get(c.name, c.name)
        if c.name in names or keeper in names:
            c.modes = [m for m in c.modes if m != mode]
            c.left_out[mode] = why if keeper == c.name or c.name in names else f"its regions are {keeper}'s: {why}"


def _none_serves(kernels: list[Chosen], seen: _Seen, mode: str) -> str:
    """Why no kernel serves `mode` before any check of it."""
    if mode != "eager" and all(c.compile_why for c in kernels if c.name in seen.unserved):
        verdicts = ", ".join(f"{c.name} {c.speedup_vs_compile or 0:.3g}x" for c in kernels if c.compile_why)
        return f"no kernel beat torch.compile's own code (their verdicts against it: {verdicts})"
    return "no kernel serves it (" + "; ".join(f"{n}: {w}" for n, w in seen.unserved.items()) + ")"


def _serve_mode(ck: Checking, kernels: list[Chosen], mode: str) -> tuple[E2E | None, ModeServed]:
    """The mode's kernels by the rule (the module's docstring); the check that decided it, where kernels
    serve it (or where it failed)."""
    served, decided = ModeServed(mode, checked=True), None
    for attempt in range(1 + REDOS):
        write_modes(ck.out, kernels)
        e, seen = _check(ck, mode)
        for name, why in seen.unserved.items():
            _leave(kernels, {name}, mode, why, {})
        for name, why in seen.skipped.items():
            _leave(kernels, {name}, mode, f"not substituted: {why}", {})
        if e is None:
            served.as_was = _none_serves(kernels, seen, mode)
            break
        judged = judge(e, ck.parts, ck.measure, ck.opts.accept_slower)
        served.tried.append(Tried(seen.running, judged.measure, judged.speedup))
        served.measure, served.speedup = judged.measure, judged.speedup
        left = [n for n in seen.running if n not in judged.culprits]
        if broken(e, kernels) is not None or (not judged.culprits and judged.slower is None):
            served.kernels, decided = seen.running, e  # a failed check is the patch's failure, said by run.py
            break
        if judged.slower is None and left and attempt == REDOS:  # no re-check left: faster with them all
            served.kernels, decided = seen.running, e
            break
        served.tried[-1].left_out = dict(judged.culprits)
        for name, why in judged.culprits.items():
            _leave(kernels, {name}, mode, why, seen.merged)
        if judged.culprits and left and attempt < REDOS:
            continue  # checked again with the rest
        if judged.slower is not None:
            served.as_was = f"{', '.join(judged.culprits or seen.running)} {judged.slower}"
        else:  # faster, but every kernel's own regions took longer than the model's ops took them
            served.as_was = f"{', '.join(judged.culprits)}: each one's regions took longer than the model's ops"
        _leave(kernels, set(left), mode, served.as_was, seen.merged)
        break
    return decided, served


def _said(m: ModeServed) -> str:
    if m.as_was is not None:
        return f"{m.mode}: as the model was, {m.as_was}"
    speed = f", {m.speedup:.3g}x ({m.measure})" if m.speedup is not None else ""
    return f"{m.mode}: {counted(len(m.kernels), 'kernel')}{speed}"


def serve(ck: Checking, kernels: list[Chosen]) -> tuple[list[E2E], list[ModeServed]]:
    """Each mode's kernels, checked in --mode's order: (the checks that decided the modes kernels serve, in
    that order; every mode, in MODES' order). Each kernel's `modes` and `left_out` say the same, and so
    does patch.json."""
    inside = [c for c in kernels if c.why is None]
    checked = ck.opts.modes_for(ck.device)
    unchecked = {m: f"not checked (--mode {m} measures it)" for m in MODES if m not in checked}
    for c in inside:
        c.modes, c.left_out = [m for m in verdict_modes(c) if m in checked], dict(unchecked)
    checks, modes = [], []
    for mode in checked:
        e, served = _serve_mode(ck, inside, mode)
        checks += [e] if e is not None else []
        modes.append(served)
    modes += [ModeServed(m, checked=False, as_was=why) for m, why in unchecked.items()]
    modes.sort(key=lambda m: MODES.index(m.mode))  # said in one order, whatever --mode's
    for m in modes:
        m.said = _said(m)
    write_modes(ck.out, inside, {m.mode: m.said for m in modes})
    return checks, modes
