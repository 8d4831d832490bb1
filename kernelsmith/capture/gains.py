"""What a patch's gain means (DESIGN.md, "What a gain means"): a patched forward slower than the original
is a failed promise, named as such, with the kernels that cost it.

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

from kernelsmith.capture.e2e import E2E
from kernelsmith.capture.forward_time import Spread, Timing


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

    @property
    def line(self) -> str:
        b, a = self.before_ms, self.after_ms
        said = f"{self.measure} {b.median:.4g} -> {a.median:.4g} ms per forward ({b.median / a.median:.3g}x)"
        if self.measure == "eager time":
            return said + (
                f": {self.rest_ms:.3g} ms of it is host time outside the kernels (the patch's dispatch runs every op "
                "of the patched modules through Python; a CUDA-graph replay does not pay it)"
                if self.rest_ms is not None
                else ""
            )
        cost = lambda k: f"{k.name} {'' if k.before_ms is None else f'{k.before_ms:.3g} -> '}{k.after_ms:.3g} ms"
        parts = [cost(k) for k in self.kernels]
        if self.rest_ms is not None and abs(self.rest_ms) >= 0.01 * b.median:  # beyond the readings' rounding
            parts.append(f"outside the kernels {self.rest_ms:+.3g} ms")
        return said + (": " + ", ".join(parts) if parts else "")


def _groups(shares: dict[str, float], e2e: E2E) -> dict[str, float]:
    """The kernel that ran -> the share of the captured forward of the regions it takes (its task's and
    those of the tasks merged into it)."""
    groups: dict[str, float] = {}
    for name, share in shares.items():
        if name not in e2e.skipped:
            keeper = e2e.merged.get(name, name)
            groups[keeper] = groups.get(keeper, 0.0) + share
    return groups


def slowdowns(e2e: E2E, shares: dict[str, float], capture_measure: str | None, accept: str = "none") -> list[Slowdown]:
    """Each measure in which the patched forward is slower than the original beyond both spreads.
    `shares`: each task in the patch -> its share of the captured forward."""
    found = []
    device = next((t for t in e2e.timings if t.measure == "device time"), None)
    for t in e2e.timings:
        if t.after_ms.low <= t.before_ms.high:
            continue
        slow = Slowdown(t.measure, t.before_ms, t.after_ms)
        if t.measure == "eager time":
            changed = (device.after_ms.median - device.before_ms.median) if device is not None else None
            if changed is not None:
                slow.rest_ms = t.after_ms.median - t.before_ms.median - changed
        else:
            slow.kernels, slow.rest_ms = _costs(t, e2e, shares, capture_measure == t.measure)
        if t.measure == "CPU time":
            slow.accepted = "relative only: CPU times say nothing of a GPU's (Triton kernels run in its interpreter)"
        elif accept == "all" or (accept == "eager" and t.measure == "eager time"):
            slow.accepted = f"accepted: --accept-slower {accept}"
        found.append(slow)
    return found


def _costs(t: Timing, e2e: E2E, shares: dict[str, float], shares_hold: bool) -> tuple[list[KernelCost], float | None]:
    """The kernels whose regions cost more after than before (all, where capture measured another time),
    the most first, and the change outside them."""
    costs = []
    for name, share in _groups(shares, e2e).items():
        after = e2e.kernel_ms[name].median if name in e2e.kernel_ms else 0.0
        before = share * t.before_ms.median if shares_hold else None
        costs.append(KernelCost(name, before, after))
    if any(k.before_ms is None for k in costs):
        return sorted(costs, key=lambda k: -k.after_ms), None
    rest = (t.after_ms.median - t.before_ms.median) - sum(k.after_ms - (k.before_ms or 0.0) for k in costs)
    slower = sorted(
        (k for k in costs if k.after_ms > (k.before_ms or 0.0)), key=lambda k: (k.before_ms or 0.0) - k.after_ms
    )
    return slower, rest
