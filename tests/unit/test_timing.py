"""kernelsmith.evaluate.measuring.timing: the timing harness, with a fake clock and fake CUDA events.

The module binds its clock and CUDA event functions at import (`_perf_counter`, `_Event`,
`_record`, `_elapsed`, `_synchronize`); the tests replace those names, so the CUDA path runs
here without a GPU and every duration is exact.
"""

from __future__ import annotations

import math

import pytest

from kernelsmith.evaluate.measuring import timing
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import TimingStats


class FakeClock:
    """One clock in milliseconds, read by the fake events and (in seconds) by the host counter."""

    def __init__(self):
        self.now_ms = 0.0

    def advance(self, ms: float) -> None:
        self.now_ms += ms

    def perf_counter(self) -> float:
        return self.now_ms / 1e3


class FakeEvent:
    def __init__(self, enable_timing: bool = False):
        assert enable_timing, "the harness times with its events"
        self.at: float | None = None


class Kernel:
    """The timed function: each call takes `durations[i]` ms of the fake clock (the last one repeats)."""

    def __init__(self, clock: FakeClock, *durations: float):
        self.clock, self.durations, self.calls = clock, durations, 0

    def __call__(self) -> None:
        self.clock.advance(self.durations[min(self.calls, len(self.durations) - 1)])
        self.calls += 1


class Flush:
    """A stand-in for L2Flusher that costs fake time (which must stay out of every sample)."""

    def __init__(self, clock: FakeClock, cost_ms: float = 0.0):
        self.clock, self.cost_ms, self.calls = clock, cost_ms, 0

    def __call__(self) -> None:
        self.clock.advance(self.cost_ms)
        self.calls += 1


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    c = FakeClock()

    def record(event: FakeEvent) -> None:
        event.at = c.now_ms

    def elapsed(start: FakeEvent, end: FakeEvent) -> float:
        assert start.at is not None and end.at is not None, "elapsed time of an event never recorded"
        return end.at - start.at

    monkeypatch.setattr(timing, "_perf_counter", c.perf_counter)
    monkeypatch.setattr(timing, "_Event", FakeEvent)
    monkeypatch.setattr(timing, "_record", record)
    monkeypatch.setattr(timing, "_elapsed", elapsed)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    return c


def cuda_opts(**kw) -> EvalOptions:
    base = dict(device="cuda", warmup_ms=0.0, timing_budget_ms=10.0, min_reps=2, max_reps=50)
    return EvalOptions(**{**base, **kw})


# --- CPU path -------------------------------------------------------------------------------


def test_cpu_runs_one_untimed_call_then_three_timed_reps(clock):
    fn = Kernel(clock, 100.0, 2.0, 4.0, 3.0)  # the first (untimed) call is slow
    stats = timing.benchmark(fn, EvalOptions(device="cpu"))
    assert fn.calls == 4
    assert stats.reps == 3
    assert stats.min_ms == pytest.approx(2.0)
    assert stats.max_ms == pytest.approx(4.0)
    assert stats.median_ms == pytest.approx(3.0)


def test_cpu_ignores_the_requested_budget_and_rep_counts(clock):
    opts = EvalOptions(device="cpu", warmup_ms=500.0, timing_budget_ms=10_000.0, min_reps=40, max_reps=100)
    fn = Kernel(clock, 1.0)
    stats = timing.benchmark(fn, opts)
    assert stats.reps == 3
    assert fn.calls == 4  # no time-based warm-up on the CPU


def test_cpu_prepare_runs_before_each_rep_outside_the_timed_region(clock):
    seen = []

    def prepare(rep: int) -> None:
        seen.append(rep)
        clock.advance(1000.0)  # expensive set-up must not show in the samples

    stats = timing.benchmark(Kernel(clock, 1.5), EvalOptions(device="cpu"), prepare=prepare)
    assert seen == [0, 1, 2]
    assert stats.max_ms == pytest.approx(1.5)


def test_cpu_samples_are_milliseconds_of_the_host_clock(clock):
    stats = timing.benchmark(Kernel(clock, 0.25), EvalOptions(device="cpu"))
    assert stats.median_ms == pytest.approx(0.25)
    assert stats.std_ms == pytest.approx(0.0)


def test_cpu_l2_flusher_holds_no_buffer_and_is_callable():
    flush = timing.L2Flusher("cpu")
    assert flush.buf is None
    flush()  # a no-op, must not raise


# --- CUDA path (fake events and clock) -------------------------------------------------------


def test_cuda_reps_grow_to_the_time_budget(clock):
    fn = Kernel(clock, 0.5)
    stats = timing.benchmark(fn, cuda_opts(timing_budget_ms=10.0, min_reps=2, max_reps=50), flush=Flush(clock))
    assert stats.reps == 20  # ceil(10 ms / 0.5 ms)
    assert stats.median_ms == pytest.approx(0.5)


def test_cuda_reps_round_up(clock):
    stats = timing.benchmark(Kernel(clock, 3.0), cuda_opts(timing_budget_ms=10.0, min_reps=1), flush=Flush(clock))
    assert stats.reps == math.ceil(10.0 / 3.0)


def test_cuda_reps_are_at_least_min_reps(clock):
    stats = timing.benchmark(Kernel(clock, 8.0), cuda_opts(timing_budget_ms=10.0, min_reps=7), flush=Flush(clock))
    assert stats.reps == 7


def test_cuda_reps_are_at_most_max_reps(clock):
    stats = timing.benchmark(Kernel(clock, 0.01), cuda_opts(timing_budget_ms=10.0, max_reps=30), flush=Flush(clock))
    assert stats.reps == 30


def test_cuda_zero_budget_gives_min_reps(clock):
    stats = timing.benchmark(Kernel(clock, 1.0), cuda_opts(timing_budget_ms=0.0, min_reps=4), flush=Flush(clock))
    assert stats.reps == 4


def test_cuda_instant_function_is_bounded_by_max_reps(clock):
    """A function that takes no time: the estimate is floored (no division by zero), reps capped."""
    stats = timing.benchmark(Kernel(clock, 0.0), cuda_opts(timing_budget_ms=5.0, max_reps=25), flush=Flush(clock))
    assert stats.reps == 25
    assert stats.median_ms == 0.0


def test_cuda_estimate_is_the_fastest_of_three_probe_calls(clock):
    # probes: 5, 1, 5 ms -> estimate 1 ms -> ceil(10 / 1) = 10 reps (a mean or first-call estimate gives fewer)
    fn = Kernel(clock, 5.0, 1.0, 5.0, 1.0)
    stats = timing.benchmark(fn, cuda_opts(timing_budget_ms=10.0, min_reps=1), flush=Flush(clock))
    assert stats.reps == 10
    assert fn.calls == 3 + 10


def test_cuda_flush_before_every_timed_rep_and_outside_the_samples(clock):
    flush = Flush(clock, cost_ms=50.0)
    stats = timing.benchmark(Kernel(clock, 2.0), cuda_opts(timing_budget_ms=10.0, min_reps=1), flush=flush)
    assert stats.reps == 5
    assert flush.calls == 3 + 5  # the three probes and each timed repetition
    assert stats.max_ms == pytest.approx(2.0)


def test_cuda_prepare_runs_per_rep_outside_the_samples(clock):
    seen = []

    def prepare(rep: int) -> None:
        seen.append(rep)
        clock.advance(100.0)

    stats = timing.benchmark(
        Kernel(clock, 1.0), cuda_opts(timing_budget_ms=4.0, min_reps=1), flush=Flush(clock), prepare=prepare
    )
    assert seen == [0, 1, 2, 3]
    assert stats.max_ms == pytest.approx(1.0)


def test_cuda_warmup_runs_until_the_host_clock_passes_warmup_ms(clock):
    fn = Kernel(clock, 2.0)
    stats = timing.benchmark(
        fn, cuda_opts(warmup_ms=9.0, timing_budget_ms=0.0, min_reps=3, max_reps=100), flush=Flush(clock)
    )
    # 3 probes, then warm-up calls while the clock is below 9 ms past its start: 5 calls of 2 ms
    assert fn.calls == 3 + 5 + stats.reps
    assert stats.reps == 3


def test_cuda_warmup_is_bounded_by_count_when_the_clock_stands_still(clock, monkeypatch):
    """`a clock can be faked`: a host clock that never moves must not make warm-up endless."""
    monkeypatch.setattr(timing, "_perf_counter", lambda: 0.0)
    fn = Kernel(clock, 1.0)
    stats = timing.benchmark(
        fn, cuda_opts(warmup_ms=1.0, timing_budget_ms=0.0, min_reps=2, max_reps=6), flush=Flush(clock)
    )
    assert fn.calls == 3 + 6 + 2
    assert stats.reps == 2


def test_cuda_zero_warmup_runs_no_warmup_call(clock):
    fn = Kernel(clock, 1.0)
    stats = timing.benchmark(fn, cuda_opts(warmup_ms=0.0, timing_budget_ms=3.0, min_reps=1), flush=Flush(clock))
    assert fn.calls == 3 + stats.reps


def test_cuda_statistics_over_varying_samples(clock):
    # probes 1, 1, 1 -> 4 reps of 1, 2, 3, 10 ms
    fn = Kernel(clock, 1.0, 1.0, 1.0, 1.0, 2.0, 3.0, 10.0)
    stats = timing.benchmark(fn, cuda_opts(timing_budget_ms=4.0, min_reps=1, max_reps=4), flush=Flush(clock))
    assert stats.reps == 4
    assert stats.median_ms == pytest.approx(2.5)
    assert stats.mean_ms == pytest.approx(4.0)
    assert (stats.min_ms, stats.max_ms) == (pytest.approx(1.0), pytest.approx(10.0))


# --- statistics ------------------------------------------------------------------------------


def test_stats_median_of_an_odd_count_is_the_middle_sample():
    s = TimingStats.from_samples([9.0, 1.0, 5.0])
    assert s.median_ms == 5.0
    assert (s.min_ms, s.max_ms, s.reps) == (1.0, 9.0, 3)


def test_stats_median_of_an_even_count_is_the_mean_of_the_middle_two():
    assert TimingStats.from_samples([4.0, 1.0, 3.0, 100.0]).median_ms == 3.5


def test_stats_std_is_the_sample_standard_deviation():
    s = TimingStats.from_samples([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s.mean_ms == pytest.approx(5.0)
    assert s.std_ms == pytest.approx(math.sqrt(32 / 7))


def test_stats_of_one_sample():
    s = TimingStats.from_samples([3.0])
    assert (s.median_ms, s.mean_ms, s.std_ms, s.reps) == (3.0, 3.0, 0.0, 1)


def test_stats_do_not_reorder_the_callers_list():
    samples = [3.0, 1.0, 2.0]
    TimingStats.from_samples(samples)
    assert samples == [3.0, 1.0, 2.0]


def test_effective_timing_keeps_cuda_options_and_fixes_cpu_ones():
    cuda = cuda_opts(warmup_ms=7.0, timing_budget_ms=11.0, min_reps=5, max_reps=9)
    assert cuda.effective_timing() is cuda
    cpu = EvalOptions(device="cpu", warmup_ms=7.0, timing_budget_ms=11.0, min_reps=5, max_reps=9).effective_timing()
    assert (cpu.warmup_ms, cpu.timing_budget_ms, cpu.min_reps, cpu.max_reps) == (0.0, 0.0, 3, 3)


# --- the graph method's reading of kernel timestamps ----------------------------------------------

from kernelsmith.evaluate.measuring.activity import KernelSpan  # noqa: E402

MARK = "mark_kernel"


def _trace(calls: list[list[tuple[str, int, int, int]]], replays: int = 1, gap: int = 500) -> list[KernelSpan]:
    """Spans of `replays` replays of [mark, call 0, mark, ..., mark]; each call's kernels are
    (name, stream, start offset after its mark ends, duration) in ns."""
    spans, t = [], 0
    for _ in range(replays):
        for kernels in [*calls, None]:
            spans.append(KernelSpan(MARK, 7, t, t + 60_000))
            t += 60_000
            if kernels is None:
                break
            end = t
            for name, stream, offset, dur in kernels:
                spans.append(KernelSpan(name, stream, t + offset, t + offset + dur))
                end = max(end, t + offset + dur)
            t = end + gap
        spans.append(KernelSpan("refill", 7, t + 1000, t + 2000))  # between replays: no call's
        t += 5000
    return spans


def test_call_spans_run_from_the_mark_to_the_calls_last_kernel_on_any_stream():
    calls = [[("k", 7, 800, 2000)], [("a", 7, 700, 1000), ("b", 9, 900, 3000)], [("k", 7, 800, 1000)]]
    times, act = timing.call_spans(_trace(calls, replays=2), frozenset({MARK}), 3, 2)
    assert times == [[pytest.approx(0.0028), pytest.approx(0.0039), pytest.approx(0.0018)]] * 2
    assert act.kernels == {"k": 4, "a": 2, "b": 2} and "refill" not in act.kernels and act.windows == 6


def test_a_call_that_launched_nothing_takes_no_time_and_no_kernel():
    times, act = timing.call_spans(_trace([[("k", 7, 800, 2000)], []]), frozenset({MARK}), 2, 1)
    assert times == [[pytest.approx(0.0028), 0.0]] and act.kernels == {"k": 1}


def test_extra_marks_mean_the_forward_launched_the_harness_kernel():
    spans = _trace([[("k", 7, 800, 2000)], [(MARK, 7, 100, 100)]])
    with pytest.raises(ValueError, match="mark"):
        timing.call_spans(spans, frozenset({MARK}), 2, 1)


def test_graph_sizes():
    opts = EvalOptions(device="cuda")  # 400 ms budget over 10 replays
    assert timing.graph_calls(0.002, opts) == 200  # 2 us: capped
    assert timing.graph_calls(10.0, opts) == 4
    assert timing.graph_calls(200.0, opts) == 3
    assert timing.sets_for(200, 2**10) == timing.MAX_SETS
    assert timing.sets_for(4, 2**31) == 1  # 2 GiB a set: one, refilled


def test_timing_stats_carry_their_method_and_spread():
    s = TimingStats.from_samples([2.0, 1.0, 4.0], method="cuda_graph", calls=50)
    assert (s.method, s.calls, s.spread, s.reps) == ("cuda_graph", 50, 4.0, 3)
    old = TimingStats(median_ms=1, mean_ms=1, min_ms=1, max_ms=1, std_ms=0, reps=3)  # stored before methods
    assert old.method is None and old.calls == 1


def test_cpu_calls_are_timed_on_one_thread_and_the_setting_is_restored():
    """Issue 40 item 3: with a thread per core, a CPU call's time follows the machine's other load
    (a 0.07 ms layer norm measured 7.7 ms while another core was busy): both sides time on one thread."""
    import torch

    seen = []

    def forward(inputs):
        seen.append(torch.get_num_threads())
        return inputs[0] + 1

    before = torch.get_num_threads()
    work = timing.Workload(forward, lambda seed: [torch.full((4,), float(seed))])
    m = timing.measure(work, EvalOptions(device="cpu"), 10)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == before
    assert m.device.method == "cpu_wall" and m.eager.method == "cpu_eager"
    assert m.last_seed == 10 + m.device.reps and torch.equal(m.last_output, torch.full((4,), 14.0))
