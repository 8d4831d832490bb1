"""The one timing harness: used for the candidate, the eager reference and torch.compile alike.

CUDA: CUDA events around each call, warm-up by time (clocks ramp up), the L2 cache flushed
before every repetition (a 256 MiB write; the H200's L2 is 60 MB), repetitions grown to a time
budget, the median reported. CPU: wall-clock, few repetitions, meaningful only relatively.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import torch

from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import TimingStats

# Bound at import, before any candidate code runs in this process.
_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize

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
    _record(end)
    _synchronize()
    return _elapsed(start, end)


HOST_CHECK_REPS = 5


def benchmark(fn: Callable[[], object], opts: EvalOptions, flush: L2Flusher | None = None,
              prepare: Callable[[int], None] | None = None) -> tuple[TimingStats, TimingStats | None]:
    """Time `fn`; `prepare(rep)` runs before each timed repetition, outside the timed region.

    Returns the timing and, on CUDA, a host-clock check: a few more calls each timed from the
    host across a device-wide sync, which sees work that other streams or threads hide from the
    events on the current stream.
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
        return TimingStats.from_samples(samples), None

    flush = flush or L2Flusher("cuda")
    _synchronize()
    est = max(min(_cuda_once(fn, flush) for _ in range(3)), 1e-3)
    warm_end = _perf_counter() + opts.warmup_ms / 1e3
    while _perf_counter() < warm_end:  # host-side clock: keeps the GPU busy while clocks ramp
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
        _record(ends[rep])
    _synchronize()
    stats = TimingStats.from_samples([_elapsed(s, e) for s, e in zip(starts, ends)])
    host = []
    for rep in range(reps, reps + HOST_CHECK_REPS):
        prepare(rep)
        flush()
        _synchronize()
        t0 = _perf_counter()
        fn()
        _synchronize()
        host.append((_perf_counter() - t0) * 1e3)
    return stats, TimingStats.from_samples(host)
