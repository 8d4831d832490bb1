"""How far a time, and a speedup, may move between two evaluations of the same kernel.

One evaluation's repetitions spread less than two evaluations do: between them the clocks, the
caches, the allocator and the other work on the GPU change, and at 2-100 us that moves a kernel's
time by more than its repetitions show. So a record's relative noise is the larger of its own
spread (std / median of its samples) and a floor for the method that measured it:

- cuda_graph (1%, 0.2 us): replays of one captured graph, no launch in the timed region; what
  remains is the device's own drift, and a fixed fraction of a microsecond at the smallest sizes.
- cuda_events_sync (1%, 20 us): per-call events around a device sync; the sync and the launch
  put tens of microseconds of host time into every sample.
- eager_stream (2%, 2 us): back-to-back eager calls, so each one's launch overhead, which moves
  with the host's load, is in the time.
- cpu_wall, cpu_eager (30%, 0): wall time on a shared CPU, where other processes take the cores;
  relative only.

The floors are provisional: they are to be set from the H200 measurement of six evaluations per
kernel (the spread between evaluations, per method and size). A record stored by an older version
names no method: its noise is its own spread only, as `data sft` measured it before.

Pure functions over TimingStats (or their stored dicts): nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelsmith.evaluate.result import TimingStats

# method -> (relative, absolute ms): the floor of the spread between two evaluations (provisional)
METHOD_FLOOR: dict[str, tuple[float, float]] = {
    "cuda_graph": (0.01, 0.0002),
    "cuda_events_sync": (0.01, 0.02),
    "eager_stream": (0.02, 0.002),
    "cpu_wall": (0.30, 0.0),
    "cpu_eager": (0.30, 0.0),
}


def _field(stats: TimingStats | Mapping[str, Any], name: str) -> Any:
    return stats.get(name) if isinstance(stats, Mapping) else getattr(stats, name, None)


def relative_noise(stats: TimingStats | Mapping[str, Any] | None) -> float:
    """The relative noise of one timed function's median: max(std / median, the method's floor
    (relative + absolute / median)). None, or a record without a positive median: 0.0. A record
    without a method (older versions), or with one this version does not know: std / median only."""
    if stats is None:
        return 0.0
    median, std = _field(stats, "median_ms"), _field(stats, "std_ms")
    if not median or median <= 0:
        return 0.0
    own = std / median if std else 0.0
    floor = METHOD_FLOOR.get(_field(stats, "method") or "")
    if floor is None:
        return own
    rel, abs_ms = floor
    return max(own, rel + abs_ms / median)


def speedup_noise(record: Mapping[str, Any] | None) -> float:
    """The relative noise of a verdict's `speedup` (reference / candidate): the candidate's
    `timing` noise plus the reference's `reference_timing` noise, from an EvalResult as stored
    (its dict). None (no stored verdict): 0.0."""
    if not record:
        return 0.0
    return relative_noise(record.get("timing")) + relative_noise(record.get("reference_timing"))


def pair_noise(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> float:
    """The relative noise of the ratio of two verdicts' speedups (two programs of one task): both
    candidates' noise, and the references' only when the two were timed against different reference
    measurements (a cached baseline is one measurement: it cancels in the ratio)."""
    a, b = a or {}, b or {}
    noise = relative_noise(a.get("timing")) + relative_noise(b.get("timing"))
    if a.get("reference_ms") != b.get("reference_ms"):
        noise += relative_noise(a.get("reference_timing")) + relative_noise(b.get("reference_timing"))
    return noise


def beyond_noise(new: float, old: float, noise: float) -> bool:
    """Whether `new` is higher than `old` by more than the relative `noise`."""
    return new > old * (1.0 + noise)
