"""The forward's time before and after a patch, measured as `capture` measures it (one definition).

The forward's device time is what capture's profile reads (capture/profile.py read_times): the device
time of every kernel, copy and fill in the profile of the one forward (a Triton kernel a patch launches
from Python may be linked to no range, so the range's own device time can miss it). Never a range's
mirror on the GPU timeline: that spans from the first kernel to the last, the host's gaps between
launches included, and at batch 1 the gaps are most of it (the Llama decode step's 5.4 ms of span held
0.65 ms of kernels). Beside it, the wall time without the profiler, as capture measures it
(profile.wall_times_ms): on CUDA the eager time, synchronized, launches and the patch's dispatch
included. On the CPU the profiled time is the range's CPU time, as capture's is; both CPU times are
relative only. In the patched forward each region a kernel takes runs under a range of its own
(Substitution.timed), read the same way: each kernel's time per forward.

The original and the patched forward alternate (ABBA, so that drift hits both alike), several forwards
each; medians and their spreads (capture/profile.py's Spread: the middle half of the samples, which one
outlier cannot stretch) are reported, and a speedup whose spreads overlap is within noise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernelsmith.capture.profile import Spread, op_range, profiling, read_times, wall_times_ms
from kernelsmith.patch.install import Patch

__all__ = ["Spread", "Timing", "profiled_ms", "time_forwards"]


@dataclass
class Timing:
    measure: str  # CUDA: "device time" (profiled), "eager time" (wall); CPU: "CPU time", "CPU wall time"
    before_ms: Spread
    after_ms: Spread

    @property
    def speedup(self) -> float:
        return self.before_ms.median / self.after_ms.median if self.after_ms.median > 0 else float("inf")

    @property
    def within_noise(self) -> bool:
        return self.after_ms.low <= self.before_ms.high and self.before_ms.low <= self.after_ms.high


class _Ranges:
    """Gives each region a kernel takes in one forward a range of its own (capture's numbered op ranges)."""

    def __init__(self):
        self.names: list[str] = []

    def __call__(self, name: str):
        self.names.append(name)
        return op_range(len(self.names) - 1)


def profiled_ms(run: Callable[[], object], device: str, patch: Patch | None = None) -> tuple[float, dict[str, float]]:
    """One forward's time as capture reads it (device time on CUDA, CPU time on the CPU), and with a
    patch the time of each kernel's regions in it (ms)."""
    ranges = _Ranges()
    if patch is not None:
        patch.dispatch.timed = ranges
    try:
        with profiling(device) as prof:
            run()
    finally:
        if patch is not None:
            patch.dispatch.timed = None
    times = read_times(prof, len(ranges.names), device, 0.0)
    kernels: dict[str, float] = {}
    for name, us in zip(ranges.names, times.per_op_us):
        kernels[name] = kernels.get(name, 0.0) + us / 1e3
    return times.total_us / 1e3, kernels


# The wall time's name on CUDA, by how the forward runs (the eager time: what an eager caller pays).
WALL = {"eager": "eager time", "compile": "compiled wall time", "graphs": "graph replay wall time"}


def time_forwards(
    model, make: Callable[[], tuple], patch: Patch, device: str, reps: int, mode: str = "eager"
) -> tuple[list[Timing], dict[str, Spread]]:
    """(before, after) per measure, the profiled time first, then the wall time (capture's: the eager time
    on CUDA); and each kernel's profiled time per patched forward (none under CUDA graphs: a replay runs
    no Python, so no range opens around a kernel). `model`: the forward as `mode` runs it."""
    profiled: dict[bool, list[float]] = {False: [], True: []}
    walls: dict[bool, list[float]] = {False: [], True: []}
    kernels: dict[str, list[float]] = {name: [] for name in patch.dispatch.kernels}

    def forward() -> Callable[[], object]:
        args, kwargs = make()  # copied before the clock starts
        return lambda: model(*args, **kwargs)

    for rep in range(reps):
        for patched in (rep % 2 == 0, rep % 2 != 0):
            patch.active = patched
            walls[patched].append(wall_times_ms(model, make, device, 1).median)
            total, per_kernel = profiled_ms(forward(), device, patch if patched else None)
            profiled[patched].append(total)
            for name in kernels if patched else ():
                kernels[name].append(per_kernel.get(name, 0.0))
    patch.active = True
    profiled_measure, wall_measure = ("device time", WALL[mode]) if device == "cuda" else ("CPU time", "CPU wall time")
    if mode == "graphs":
        kernels = {}
    timings = [
        Timing(profiled_measure, Spread.of(profiled[False]), Spread.of(profiled[True])),
        Timing(wall_measure, Spread.of(walls[False]), Spread.of(walls[True])),
    ]
    return timings, {name: Spread.of(ms) for name, ms in kernels.items()}
