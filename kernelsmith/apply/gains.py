"""What a patch's gain means (DESIGN.md, "What a gain means"): the applied kernels' verdicts predict the
forward's change, apply measures it as capture measured the forward and says when the two disagree,
and a patched forward slower than the original is a failed promise, named as such, with the kernels
that cost it.

The prediction: each kernel's verdict speedup k over the share s of the captured forward its regions
took (its task's share, and those of the tasks merged into it, times the share of their captured calls
it took) gives the forward 1 - sum(s) + sum(s / k) of its time; its spread is each verdict speedup's
own noise (evaluate/measuring/noise.py). Two figures with spreads (the prediction and the measurement;
capture's time of the original forward and apply's, each widened by AGREE_FLOOR) disagree when their
spreads do not overlap; they agree when the spreads overlap and each is narrow enough to say anything
(its high at most TELL_SPREAD times its low, both finite and positive); otherwise no one can tell.

A measure is slower when the patched forward's spread lies above the original's (beyond both spreads).
Each kernel's time before is its regions' share of the forward in capture's profile (where capture
measured the same time) of the original forward's time here; after, its regions' time in the patched
forward (forward_time.py).
A slower device time, or eager time, fails the check unless `--accept-slower` accepts it (`eager`: an
eager-time slowdown, the patch's dispatch in Python, which a CUDA-graph replay does not pay; `all`); a
slower CPU time is named but fails nothing: on the CPU Triton kernels run in its interpreter, and its
times say nothing of a GPU's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelsmith.apply.e2e import E2E
from kernelsmith.apply.forward_time import Spread, Timing

# How far one time of the original forward may move between capture's process and apply's beyond the
# spread either saw (clocks, caches, the allocator, the host's load), relative: provisional.
AGREE_FLOOR = {"device time": 0.05, "eager time": 0.10, "CPU time": 0.30, "CPU wall time": 0.30}

# The widest spread (high over low) with which two figures can be said to agree. A kernel's gain on a
# forward is rarely beyond 2x, so a spread whose high is twice its low holds both "no change" and the
# largest gain expected: overlapping it says nothing (issue 46: "predicted 0.0009x (0.0004-inf)" was said
# to agree; so were medians 300x apart).
TELL_SPREAD = 2.0

AGREES, DISAGREES, CANNOT_TELL = "agrees", "disagrees", "cannot tell"


def told(low: float, high: float) -> bool:
    """A spread narrow enough to compare: finite, positive, high at most TELL_SPREAD times low."""
    return 0 < low <= high < float("inf") and high <= TELL_SPREAD * low


def agreement(a: tuple[float, float], b: tuple[float, float], widen: float = 0.0) -> str:
    """Whether two figures with spreads (low, high) agree: AGREES, DISAGREES (the spreads, each widened by
    the relative `widen`, do not overlap) or CANNOT_TELL (they overlap, but a spread is too wide to say)."""
    (a_low, a_high), (b_low, b_high) = a, b
    if a_low * (1 - widen) > b_high * (1 + widen) or b_low * (1 - widen) > a_high * (1 + widen):
        return DISAGREES
    return AGREES if told(a_low, a_high) and told(b_low, b_high) else CANNOT_TELL


@dataclass
class Part:
    """A task whose kernel is in the patch."""

    share: float  # of the captured forward
    calls: int  # per forward, as captured
    speedup: float  # its kernel's verdict speedup
    noise: float = 0.0  # that speedup's relative noise


@dataclass
class Prediction:
    measure: str  # capture's and the verdicts' time: device time on CUDA
    covered: float  # the share of the captured forward whose regions the kernels took
    speedup: float  # what the verdicts predict for the forward
    low: float
    high: float
    measured: float  # what apply measured, and its spread (before over after)
    measured_low: float
    measured_high: float
    agreement: str = field(init=False)  # AGREES, DISAGREES or CANNOT_TELL (see agreement())
    agrees: bool = field(init=False)  # agreement is AGREES

    def __post_init__(self):
        self.agreement = agreement((self.low, self.high), (self.measured_low, self.measured_high))
        self.agrees = self.agreement == AGREES


@dataclass
class CaptureTime:
    """Capture's time of the original forward beside apply's, in one measure."""

    measure: str
    capture_ms: Spread
    here_ms: Spread
    agreement: str = field(init=False)  # AGREES, DISAGREES or CANNOT_TELL, the spreads widened by AGREE_FLOOR
    agrees: bool = field(init=False)  # agreement is AGREES

    def __post_init__(self):
        c, h = self.capture_ms, self.here_ms
        floor = AGREE_FLOOR.get(self.measure, 0.3)
        self.agreement = agreement((c.low, c.high), (h.low, h.high), floor)
        self.agrees = self.agreement == AGREES


@dataclass
class KernelCost:
    name: str  # the kernel that ran (it takes the regions of the tasks merged into it too)
    before_ms: float | None  # its regions per forward, by capture's shares (None: capture measured another time)
    after_ms: float  # its regions per patched forward (median)


@dataclass
class Slowdown:
    measure: str
    before_ms: Spread
    after_ms: Spread
    kernels: list[KernelCost] = field(default_factory=list)  # those that cost time, the most first
    rest_ms: float | None = None  # the change outside the kernels (eager time: host time)
    accepted: str | None = None  # why it is no failure (None: the check fails)
    mode: str = "eager"  # how the forward ran (e2e.E2E.mode)

    @property
    def line(self) -> str:
        b, a = self.before_ms, self.after_ms
        # The mode always named: a verdict that lists several modes ("eager: ..., compile: ...") reads a slowdown
        # after them as the last one's (issue 55: the eager slowdown after "compile:")
        said = (
            f"{self.measure} {b.median:.4g} -> {a.median:.4g} ms per forward in {self.mode} mode "
            f"({b.median / a.median:.3g}x)"
        )
        if self.measure == "eager time":
            return said + (
                f": {self.rest_ms:.3g} ms of it is host time outside the kernels (the patch's dispatch runs every op "
                "of the patched modules through Python; a CUDA-graph replay does not pay it)"
                if self.rest_ms is not None and self.rest_ms > 0
                else ""
            )
        cost = lambda k: f"{k.name} {'' if k.before_ms is None else f'{k.before_ms:.3g} -> '}{k.after_ms:.3g} ms"
        parts = [cost(k) for k in self.kernels]
        if self.rest_ms is not None and abs(self.rest_ms) >= 0.01 * b.median:  # beyond the readings' rounding
            parts.append(f"outside the kernels {self.rest_ms:+.3g} ms")
        return said + (": " + ", ".join(parts) if parts else "")


def _groups(parts: dict[str, Part], e2e: E2E) -> dict[str, list[str]]:
    """The kernel that ran -> the tasks whose regions it takes (its own and those merged into it)."""
    groups: dict[str, list[str]] = {}
    for name in parts:
        if name not in e2e.skipped:
            groups.setdefault(e2e.merged.get(name, name), []).append(name)
    return groups


def predict(e2e: E2E, parts: dict[str, Part], capture_measure: str | None) -> Prediction | None:
    """The forward's speedup that the verdicts predict, beside the one measured in capture's measure
    (None: apply measured no such time, e.g. a capture on the CPU checked on CUDA)."""
    t = next((t for t in e2e.timings if t.measure == capture_measure), None)
    if t is None or capture_measure is None:
        return None
    covered = kept = spread = 0.0
    for keeper, names in _groups(parts, e2e).items():
        calls = sum(parts[n].calls for n in names)
        took = sum(parts[n].share for n in names) * min(1.0, e2e.fired.get(keeper, 0.0) / calls if calls else 0.0)
        covered += took
        kept += took / parts[keeper].speedup
        spread += took / parts[keeper].speedup * parts[keeper].noise
    ratio = 1.0 - covered + kept
    b, a = t.before_ms, t.after_ms
    return Prediction(
        capture_measure,
        covered,
        1.0 / ratio,
        1.0 / (ratio + spread),
        1.0 / (ratio - spread) if ratio > spread else float("inf"),
        t.speedup,
        b.low / a.high if a.high > 0 else float("inf"),
        b.high / a.low if a.low > 0 else float("inf"),
    )


def against_capture(e2e: E2E, capture: dict, device: str) -> list[CaptureTime]:
    """Capture's times of the original forward (capture.json: the profiled time, `profiled_us` or else
    `total_us`, and the wall time `wall_ms`) beside apply's, where both measured the same time."""
    if capture.get("device", "cpu") != device or len(e2e.timings) < 2:
        return []
    profiled, wall = e2e.timings[0], e2e.timings[1]
    spread = lambda d, scale: Spread(d["median"] * scale, d["low"] * scale, d["high"] * scale)
    found = []
    if capture.get("measure") == profiled.measure:
        us = capture.get("profiled_us") or {k: capture["total_us"] for k in ("median", "low", "high")}
        found.append(CaptureTime(profiled.measure, spread(us, 1e-3), profiled.before_ms))
    if capture.get("wall_ms"):
        found.append(CaptureTime(wall.measure, spread(capture["wall_ms"], 1.0), wall.before_ms))
    return found


def slowdowns(e2e: E2E, parts: dict[str, Part], capture_measure: str | None, accept: str = "none") -> list[Slowdown]:
    """Each measure in which the patched forward is slower than the original beyond both spreads: in the
    profiled time with the kernels that cost it, in the eager time with the host time outside them."""
    found = []
    profiled = e2e.timings[0] if e2e.timings else None
    for t in e2e.timings:
        if t.after_ms.low <= t.before_ms.high:
            continue
        slow = Slowdown(t.measure, t.before_ms, t.after_ms, mode=e2e.mode)
        if t is profiled:
            # capture's shares are of the eager forward: a compiled forward's time is not split by them
            slow.kernels, slow.rest_ms = _costs(t, e2e, parts, capture_measure == t.measure and e2e.mode == "eager")
        elif t.measure == "eager time" and profiled is not None:
            changed = profiled.after_ms.median - profiled.before_ms.median
            slow.rest_ms = t.after_ms.median - t.before_ms.median - changed
        if t.measure.startswith("CPU"):
            slow.accepted = "relative only: CPU times say nothing of a GPU's"
        elif accept == "all" or (accept == "eager" and t.measure == "eager time"):
            slow.accepted = f"accepted: --accept-slower {accept}"
        found.append(slow)
    return found


def costlier(e2e: E2E, parts: dict[str, Part], capture_measure: str | None) -> list[KernelCost]:
    """The kernels whose regions took longer in the patched forward than the model's own ops took them,
    beyond both spreads: after, the low of the kernel's regions' time per patched forward; before, the high
    of the original forward's time times their share of capture's forward (the share of their captured
    calls it took, as predict() counts them). Only where capture's shares hold, the eager forward in
    capture's measure: a compiled forward's time is not split by them, and a replay opens no range."""
    t = e2e.timings[0] if e2e.timings else None
    if t is None or e2e.mode != "eager" or t.measure != capture_measure:
        return []
    found = []
    for keeper, names in _groups(parts, e2e).items():
        after = e2e.kernel_ms.get(keeper)
        calls = sum(parts[n].calls for n in names)
        share = sum(parts[n].share for n in names) * (min(1.0, e2e.fired.get(keeper, 0.0) / calls) if calls else 0.0)
        if after is not None and after.low > share * t.before_ms.high:
            found.append(KernelCost(keeper, share * t.before_ms.median, after.median))
    return found


def _costs(t: Timing, e2e: E2E, parts: dict[str, Part], shares_hold: bool) -> tuple[list[KernelCost], float | None]:
    """The kernels whose regions cost more after than before (all, where capture measured another time),
    the most first, and the change outside them."""
    costs = []
    if not e2e.kernel_ms:  # CUDA graphs: no range opens around a kernel in a replay
        return costs, None
    for name, names in _groups(parts, e2e).items():
        after = e2e.kernel_ms[name].median if name in e2e.kernel_ms else 0.0
        before = sum(parts[n].share for n in names) * t.before_ms.median if shares_hold else None
        costs.append(KernelCost(name, before, after))
    if any(k.before_ms is None for k in costs):
        return sorted(costs, key=lambda k: -k.after_ms), None
    rest = (t.after_ms.median - t.before_ms.median) - sum(k.after_ms - (k.before_ms or 0.0) for k in costs)
    slower = sorted(
        (k for k in costs if k.after_ms > (k.before_ms or 0.0)), key=lambda k: (k.before_ms or 0.0) - k.after_ms
    )
    return slower, rest
