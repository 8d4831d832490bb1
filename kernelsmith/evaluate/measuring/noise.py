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
  relative only. An assumption, which a search on the CPU replaces by a measurement (below).

The GPU floors are provisional: they are to be set from the H200 measurement of six evaluations per
kernel (the spread between evaluations, per method and size). A record stored by an older version
names no method: its noise is its own spread only, as `data sft` measured it before.

On a CPU the spread between evaluations is the machine's load, which no constant knows (on a loaded
2-core machine six evaluations of one computation ranged 4x). A search on the CPU measures it
(kernelsmith.evolve.noise_floor): its first success evaluated again, the spread of its times over those
evaluations, (max - min) / min, is the run's `cpu_wall` floor (a NoiseFloor, stored with the run),
which replaces the constant wherever the run's programs are compared (`floors`).

Pure functions over TimingStats (or their stored dicts): nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

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


# A run's measured floors: method -> relative floor, replacing METHOD_FLOOR's relative part.
Floors = Mapping[str, float]


class NoiseFloor(BaseModel):
    """A run's floor for one timing method and where it came from: "measured" (one program evaluated
    len(times_ms) times: relative = (max - min) / min of its times), or "assumed" (METHOD_FLOOR's,
    when the measurement could not be made; `note` says why)."""

    method: str
    relative: float
    origin: Literal["measured", "assumed"]
    iteration: int | None = None  # the program measured (its iteration in the run)
    times_ms: list[float] = []  # its median time in each evaluation
    note: str = ""

    @classmethod
    def measured(cls, method: str, times_ms: Sequence[float], iteration: int | None = None) -> NoiseFloor:
        lo, hi = min(times_ms), max(times_ms)
        return cls(
            method=method, relative=(hi - lo) / lo, origin="measured", iteration=iteration, times_ms=list(times_ms)
        )

    @classmethod
    def assumed(cls, method: str, note: str, iteration: int | None = None, times_ms=()) -> NoiseFloor:
        return cls(
            method=method,
            relative=METHOD_FLOOR[method][0],
            origin="assumed",
            iteration=iteration,
            times_ms=list(times_ms),
            note=note,
        )


def floors_of(record: NoiseFloor | Mapping[str, Any] | None) -> dict[str, float]:
    """The floors a stored NoiseFloor (or its dict) sets: {method: relative} when measured; {} when
    there is none or it was assumed (METHOD_FLOOR holds then)."""
    if record is None:
        return {}
    floor = record if isinstance(record, NoiseFloor) else NoiseFloor.model_validate(record)
    return {floor.method: floor.relative} if floor.origin == "measured" else {}


def _field(stats: TimingStats | Mapping[str, Any], name: str) -> Any:
    return stats.get(name) if isinstance(stats, Mapping) else getattr(stats, name, None)


def relative_noise(stats: TimingStats | Mapping[str, Any] | None, floors: Floors | None = None) -> float:
    """The relative noise of one timed function's median: max(std / median, the method's floor
    (relative + absolute / median)), the relative part the run's measured one where `floors` has it.
    None, or a record without a positive median: 0.0. A record without a method (older versions), or
    with one this version does not know: std / median only."""
    if stats is None:
        return 0.0
    median, std = _field(stats, "median_ms"), _field(stats, "std_ms")
    if not median or median <= 0:
        return 0.0
    own = std / median if std else 0.0
    method = _field(stats, "method") or ""
    floor = METHOD_FLOOR.get(method)
    if floor is None:
        return own
    rel, abs_ms = floor
    rel = (floors or {}).get(method, rel)
    return max(own, rel + abs_ms / median)


def speedup_noise(record: Mapping[str, Any] | None, floors: Floors | None = None) -> float:
    """The relative noise of a verdict's `speedup` (reference / candidate): the candidate's
    `timing` noise plus the reference's `reference_timing` noise, from an EvalResult as stored
    (its dict). None (no stored verdict): 0.0."""
    if not record:
        return 0.0
    return relative_noise(record.get("timing"), floors) + relative_noise(record.get("reference_timing"), floors)


def pair_noise(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None, floors: Floors | None = None) -> float:
    """The relative noise of the ratio of two verdicts' speedups (two programs of one task): both
    candidates' noise, and the references' only when the two were timed against different reference
    measurements (a cached baseline is one measurement: it cancels in the ratio). `floors`: the run's
    measured floors (NoiseFloor), where it has them."""
    a, b = a or {}, b or {}
    noise = relative_noise(a.get("timing"), floors) + relative_noise(b.get("timing"), floors)
    if a.get("reference_ms") != b.get("reference_ms"):
        noise += relative_noise(a.get("reference_timing"), floors) + relative_noise(b.get("reference_timing"), floors)
    return noise


def beyond_noise(new: float, old: float, noise: float) -> bool:
    """Whether `new` is higher than `old` by more than the relative `noise`."""
    return new > old * (1.0 + noise)
