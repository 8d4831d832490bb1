"""The one timing harness: used for the candidate, the eager reference and torch.compile alike.

CUDA: CUDA events around each call, the end event recorded after a device-wide synchronize (so
work on every stream is timed), warm-up by time (clocks ramp up), the L2 cache flushed before
every repetition (a 256 MiB write; the H200's L2 is 60 MB), repetitions grown to a time budget,
the median reported. CPU: wall-clock, few repetitions, meaningful only relatively.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import TimingStats

# Bound at import, before any candidate code runs in this process.
_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize
_sleep = torch.cuda._sleep

FLUSH_BYTES = 256 * 2**20


class L2Flusher:
    def __init__(self, device: str):
        self.buf = torch.empty(FLUSH_BYTES, dtype=torch.int8, device=device) if device == "cuda" else None

    def __call__(self) -> None:
        if self.buf is not None:
            self.buf.zero_()


def _cuda_once(fn: Callable[[], object], flush: L2Flusher) -> float:
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    flush()
    _record(start)
    fn()
    _synchronize()
    _record(end)
    _synchronize()
    return _elapsed(start, end)


def spin_cycles_per_ms(cycles: int = 2_000_000) -> float:
    """The rate of torch.cuda._sleep's spin kernel on this device (the SM clock), measured."""
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _sleep(1000)
    _record(start)
    _sleep(cycles)
    _record(end)
    _synchronize()
    return cycles / max(_elapsed(start, end), 1e-3)


def benchmark(
    fn: Callable[[], object],
    opts: EvalOptions,
    flush: L2Flusher | None = None,
    prepare: Callable[[int], None] | None = None,
) -> TimingStats:
    """Time `fn`; `prepare(rep)` runs before each timed repetition, outside the timed region.

    CUDA: each repetition is [flush, start event, fn, device-wide synchronize, end event], so work
    on any stream of the process is inside the measured span, at every size.
    """
    opts = opts.effective_timing()
    prepare = prepare or (lambda rep: None)
    if opts.device != "cuda":
        fn()  # one untimed call
        samples = []
        for rep in range(opts.min_reps):
            prepare(rep)
            t0 = _perf_counter()
            fn()
            samples.append((_perf_counter() - t0) * 1e3)
        return TimingStats.from_samples(samples)

    flush = flush or L2Flusher("cuda")
    _synchronize()
    est = max(min(_cuda_once(fn, flush) for _ in range(3)), 1e-3)
    warm_end = _perf_counter() + opts.warmup_ms / 1e3
    for _ in range(opts.max_reps):  # by the host clock (clocks ramp up), and by count: a clock can be faked
        if _perf_counter() >= warm_end:
            break
        fn()
        _synchronize()
    reps = min(max(math.ceil(opts.timing_budget_ms / est), opts.min_reps), opts.max_reps)
    starts = [_Event(enable_timing=True) for _ in range(reps)]
    ends = [_Event(enable_timing=True) for _ in range(reps)]
    for rep in range(reps):
        prepare(rep)
        flush()
        _record(starts[rep])
        fn()
        _synchronize()
        _record(ends[rep])
    _synchronize()
    return TimingStats.from_samples([_elapsed(s, e) for s, e in zip(starts, ends)])
