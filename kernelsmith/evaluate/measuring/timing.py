"""The one timing harness: the candidate, the eager reference and torch.compile are timed by it alike.

Each timed forward gets two figures (docs/verdict.md, "Times"):

* Device time per call: what a serving engine that replays CUDA graphs pays. `n` calls, each on its
  own input set behind an L2 flush (`l2="warm"`: behind a tiny marker kernel instead), are captured
  in one CUDA graph with a closing flush; the graph is replayed on freshly refilled inputs under the
  CUDA profiler, and each call's time is read from the device's own kernel timestamps: from the end
  of the flush before it to the end of its last kernel, on every stream (`call_spans`). No host
  clock, launch or wake-up is inside the span, so it is right from ~2 us up. Method `cuda_graph`.
  A forward that cannot be captured (a host sync, a pageable copy, work on a stream it never joins)
  falls back to CUDA events around each call and a device-wide synchronize, the L2 flushed before
  each (`cuda_events_sync`, the harness's method before graphs), and the fallback says why.
* Eager call time: what an eager PyTorch caller pays, launch overhead included: `m` calls back to
  back on rotating input sets, CUDA events around them, per call (`eager_stream`).

Before each timed call (or replay) the L2's persisting lines are demoted and its persisting set-aside set
to 0 (persisting_l2.py), so that no input survives the flush marked persisting.

CPU: wall clock per call (`cpu_wall`) and back to back (`cpu_eager`), few calls, one intra-op thread
(so that the machine's other load does not set the time): relative only.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from kernelsmith.evaluate.measuring import capture, persisting_l2
from kernelsmith.evaluate.measuring.activity import Activity, ActivityRecorder
from kernelsmith.evaluate.measuring.graph_trace import call_spans
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import TimingStats

# Bound at import, before any candidate code runs in this process.
_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize
_sleep = torch.cuda._sleep
_CUDAGraph = torch.cuda.CUDAGraph
_graph = torch.cuda.graph
_copy = torch.Tensor.copy_
_get_num_threads = torch.get_num_threads
_set_num_threads = torch.set_num_threads
_reset_l2 = persisting_l2.reset
_increment_version = torch.autograd.graph.increment_version

FLUSH_BYTES = 256 * 2**20  # more than twice the L2 of any current GPU (H100/H200: 50 MB)
# The graph: `n` calls per replay, at least GRAPH_CALLS[0] and at most [1], sized so a replay's calls
# take timing_budget_ms / GRAPH_REPLAYS; its input sets share SET_BYTES of device memory.
GRAPH_REPLAYS = 10
GRAPH_CALLS = (3, 200)
SET_BYTES = 2 * 2**30
MAX_SETS = 32  # distinct input sets per replay: call k reads set k % MAX_SETS
# Eager call time: EAGER_ROUNDS rounds of m back-to-back calls, m sized to EAGER_WINDOW_MS.
EAGER_ROUNDS = 3
EAGER_CALLS = (2, 1000)
EAGER_WINDOW_MS = 20.0
CPU_EAGER_CALLS = 2


class L2Flusher:
    """Writes a buffer larger than the L2 (cold), or one byte (warm): the mark between timed calls."""

    def __init__(self, device: str, cold: bool = True):
        self.buf = None
        if device == "cuda":
            self.buf = torch.empty(FLUSH_BYTES if cold else 1, dtype=torch.uint8, device=device)
        self.kernel_names: frozenset[str] = frozenset()

    def __call__(self) -> None:
        if self.buf is not None:
            self.buf.bitwise_not_()

    def identify(self) -> frozenset[str]:
        """The names of the kernels one flush launches, recorded once: the marks in a graph's trace."""
        if self.buf is not None and not self.kernel_names:
            with ActivityRecorder("cuda") as rec:
                self()
                _synchronize()
            self.kernel_names = frozenset(rec.activity.kernels)
        return self.kernel_names


@dataclass
class Workload:
    """A forward and the input sets it is timed on: `make(seed)` builds the inputs of a seed (as the
    task's get_inputs does), and a set is refilled in place with the contents of another seed."""

    forward: Callable[[list], object]
    make: Callable[[int], list]
    copy: Callable = _copy

    def sets(self, count: int, base: int) -> list[list]:
        return [self.make(base + j) for j in range(count)]

    def refill(self, sets: Sequence[list], base: int) -> None:
        for j, dst in enumerate(sets):
            for d, s in zip(dst, self.make(base + j)):
                if isinstance(d, torch.Tensor):
                    self.copy(d, s)


@dataclass
class Measurement:
    """What timing one forward gave: both figures, the output of the last timed call (checked by the
    judge) with the seed of its inputs, and the kernels the device-time calls ran (graph method)."""

    device: TimingStats
    eager: TimingStats
    last_output: object
    last_seed: int
    fallback: str | None = None
    sets: int = 1
    activity: Activity | None = None  # kernels of the recorded graph replays, marks left out
    recorded_calls: int = 0
    window: Activity = field(default_factory=Activity)  # the recorder's record of the timed window
    note: str | None = None  # what the harness could not do here (reset persisting L2 lines), said with the fallback


def touched(inputs: list) -> None:
    """Mark `inputs` as written (their version counters), with no kernel: a set recurs within a graph's
    replay with the same contents, and a forward must not learn that from the tensors' versions (it
    would do part of its work on a recurring set and leave the rest to a block that still holds it)."""
    _increment_version([x for x in inputs if isinstance(x, torch.Tensor)])


def set_bytes(inputs: list) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def graph_calls(est_ms: float, opts: EvalOptions) -> int:
    lo, hi = GRAPH_CALLS
    return int(min(max(math.ceil(opts.timing_budget_ms / GRAPH_REPLAYS / max(est_ms, 1e-4)), lo), hi))


def sets_for(calls: int, one_set_bytes: int, budget: int = SET_BYTES) -> int:
    return int(max(1, min(calls, MAX_SETS, budget // max(one_set_bytes, 1))))


def _graph_device_time(
    work: Workload, sets: list[list], calls: int, flush: L2Flusher, seed: int
) -> tuple[TimingStats, object, int, Activity, Activity]:
    """Capture `calls` marked calls in one graph, replay it GRAPH_REPLAYS times on refilled inputs
    under the profiler, and read each call's time from the kernel timestamps. Raises on a forward that
    cannot be captured (the caller falls back)."""
    marks = flush.identify()
    if not marks:
        raise RuntimeError("the profiler recorded no kernel for the harness's mark")
    graph, stream = _CUDAGraph(), capture.stream_for(lambda: work.forward(sets[0]))
    last = None
    with _graph(graph, stream=stream):
        for k in range(calls):
            flush()
            touched(sets[k % len(sets)])
            out = work.forward(sets[k % len(sets)])
            last = out if k == calls - 1 else None
            del out
        flush()
    graph.replay()  # the first replay uploads the graph: untimed
    _synchronize()
    with ActivityRecorder("cuda", keep_spans=True) as rec:
        for r in range(GRAPH_REPLAYS):
            work.refill(sets, seed + 1 + r * len(sets))
            _reset_l2()  # after the refill, whose writes a window on the caller's stream would mark too
            graph.replay()
        _synchronize()
    if rec.activity.tampered:
        raise RuntimeError("the profiler's record of the timed replays was stopped or replaced")
    times, act = call_spans(rec.spans, marks, calls, GRAPH_REPLAYS)
    medians = [statistics.median(row) for row in times]
    stats = TimingStats.from_samples(medians, method="cuda_graph", calls=calls)
    last_seed = seed + 1 + (GRAPH_REPLAYS - 1) * len(sets) + (calls - 1) % len(sets)
    return stats, last, last_seed, act, rec.activity


# -- eager call time ----------------------------------------------------------------------------


def _eager_cuda(work: Workload, sets: list[list], est_ms: float) -> TimingStats:
    lo, hi = EAGER_CALLS
    m = int(min(max(math.ceil(EAGER_WINDOW_MS / max(est_ms, 1e-4)), lo), hi))
    samples = []
    for _ in range(EAGER_ROUNDS):
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _synchronize()
        _record(start)
        for k in range(m):
            work.forward(sets[k % len(sets)])
        _record(end)
        _synchronize()
        samples.append(_elapsed(start, end) / m)
    return TimingStats.from_samples(samples, method="eager_stream", calls=m)


def _eager_cpu(work: Workload, inputs: list) -> TimingStats:
    t0 = _perf_counter()
    for _ in range(CPU_EAGER_CALLS):
        work.forward(inputs)
    return TimingStats.from_samples(
        [(_perf_counter() - t0) * 1e3 / CPU_EAGER_CALLS], method="cpu_eager", calls=CPU_EAGER_CALLS
    )


# -- the per-call synced method (fallback; the CPU's) ------------------------------------------------


def _cuda_once(fn: Callable[[], object], flush: Callable[[], None]) -> float:
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


def warm_up(fn: Callable[[], object], opts: EvalOptions, flush: Callable[[], None]) -> float:
    """Untimed calls (compilation, autotuning, clocks ramping up); returns one call's synced time, ms."""
    _synchronize()
    est = max(min(_cuda_once(fn, flush) for _ in range(3)), 1e-3)
    warm_end = _perf_counter() + opts.warmup_ms / 1e3
    for _ in range(opts.max_reps):  # by the host clock (clocks ramp up), and by count: a clock can be faked
        if _perf_counter() >= warm_end:
            break
        fn()
        _synchronize()
    return est


def benchmark(
    fn: Callable[[], object],
    opts: EvalOptions,
    flush: Callable[[], None] | None = None,
    prepare: Callable[[int], None] | None = None,
    est_ms: float | None = None,
) -> TimingStats:
    """Time `fn` call by call; `prepare(rep)` runs before each timed repetition, outside the timed region.

    CUDA: each repetition is [flush, start event, fn, device-wide synchronize, end event], so work
    on any stream of the process is inside the measured span, at every size; the host's wake-up
    after the synchronize is inside it too (10-150 us), which is why graphs time calls below ~1 ms.
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
        return TimingStats.from_samples(samples, method="cpu_wall")

    flush = flush or L2Flusher("cuda")
    est = est_ms if est_ms is not None else warm_up(fn, opts, flush)
    reps = min(max(math.ceil(opts.timing_budget_ms / est), opts.min_reps), opts.max_reps)
    starts = [_Event(enable_timing=True) for _ in range(reps)]
    ends = [_Event(enable_timing=True) for _ in range(reps)]
    for rep in range(reps):
        prepare(rep)
        _reset_l2()
        flush()
        _record(starts[rep])
        fn()
        _synchronize()
        _record(ends[rep])
    _synchronize()
    return TimingStats.from_samples([_elapsed(s, e) for s, e in zip(starts, ends)], method="cuda_events_sync")


# -- one forward, both figures --------------------------------------------------------------------


def _synced(
    work: Workload, opts: EvalOptions, flush: L2Flusher, seed: int, est_ms: float | None, inputs: list | None = None
):
    """The per-call method on one input set refilled before every repetition (seed + 1 + rep); `inputs`:
    a set to refill (one the caller has made already), else one made from `seed`."""
    inputs = work.make(seed) if inputs is None else inputs
    last: dict = {}

    def call() -> None:
        last["out"] = work.forward(inputs)

    def refill(rep: int) -> None:
        work.refill([inputs], seed + 1 + rep)

    with ActivityRecorder(opts.device) as rec:  # both sides are timed under the recorder: same conditions
        stats = benchmark(call, opts, flush, refill, est_ms)
        if opts.device == "cuda":
            _synchronize()
    return stats, last["out"], seed + stats.reps, rec.activity, inputs


@contextmanager
def one_thread():
    """CPU: time with one intra-op thread. torch's default, a thread per core, makes a call's time
    depend on what else the machine runs (a 0.07 ms layer norm took 7.7 ms with two threads while
    another core was busy); one thread for the reference and the candidate alike does not."""
    before = _get_num_threads()
    _set_num_threads(1)
    try:
        yield
    finally:
        _set_num_threads(before)


def synced(work: Workload, opts: EvalOptions, flush: L2Flusher, seed: int) -> TimingStats:
    """The per-call synced figure alone (a baseline keeps it beside its graph figure)."""
    return _synced(work, opts, flush, seed, None)[0]


def measure(
    work: Workload,
    opts: EvalOptions,
    seed: int,
    flush: L2Flusher | None = None,
    graph: bool = True,
    keep: Callable[[object], object] = lambda out: out,
) -> Measurement:
    """Both figures of one forward (see the module's docstring). `graph=False`: the per-call method
    only (the reference could not be captured, so its candidates are timed like it). `keep(out)` takes
    the last timed call's output before the eager calls run (a forward may return one buffer every call)."""
    if opts.device != "cuda":
        with one_thread():
            stats, last, last_seed, window, inputs = _synced(work, opts, L2Flusher("cpu"), seed, None)
            last = keep(last)
            eager = _eager_cpu(work, inputs)
        return Measurement(stats, eager, last, last_seed, window=window)
    flush = flush or L2Flusher("cuda", cold=opts.l2 == "cold")
    l2_note = _reset_l2()  # None, or why persisting L2 lines cannot be reset here (said in the fallback)
    warm_set = work.make(seed)
    est = warm_up(lambda: work.forward(warm_set), opts, flush)
    calls = graph_calls(est, opts)
    # The warm-up's set is the first set (refilled before each timed replay): on a multi-GB task one
    # set less on the device.
    sets = [warm_set, *work.sets(sets_for(calls, set_bytes(warm_set)) - 1, seed + 2)]
    fallback = None if graph else "the reference could not be captured in a CUDA graph; timed like it"
    if graph:
        try:
            stats, last, last_seed, act, window = _graph_device_time(work, sets, calls, flush, seed)
        except Exception as exc:  # noqa: BLE001 - any failure to capture or read the graph falls back
            capture.reset_after_failed()
            fallback = f"not timed in a CUDA graph ({type(exc).__name__}: {_first_line(exc)})"
        else:
            last = keep(last)
            eager = _eager_cuda(work, sets, est)
            recorded = calls * GRAPH_REPLAYS
            return Measurement(stats, eager, last, last_seed, None, len(sets), act, recorded, window, l2_note)
    if graph:
        capture.release_memory()  # the failed graph's pool (its traceback let go), before the per-call method allocates
    stats, last, last_seed, window, _ = _synced(work, opts, flush, seed, est, inputs=sets[0])
    last = keep(last)
    eager = _eager_cuda(work, sets, est)
    return Measurement(stats, eager, last, last_seed, fallback, window=window, note=l2_note)


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
