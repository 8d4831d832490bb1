"""The spread between two evaluations: floors by timing method, old records, and the one rule that
decides a run's best (a later program replaces it only when faster beyond both programs' noise)."""

from __future__ import annotations

import pytest

from kernelsmith.data.sft import required_gain
from kernelsmith.evaluate.measuring.noise import METHOD_FLOOR, beyond_noise, relative_noise, speedup_noise
from kernelsmith.evaluate.result import EvalResult, Status, TimingStats
from kernelsmith.evolve.program import Program, best_of, improves_on, running_best


def stats(median_ms: float, std_ms: float = 0.0, method: str | None = None) -> dict:
    """A TimingStats as stored (its dict); `method` is left out, as older versions stored it, when None."""
    d = {"median_ms": median_ms, "mean_ms": median_ms, "min_ms": median_ms, "max_ms": median_ms, "std_ms": std_ms}
    d["reps"] = 10
    return d if method is None else {**d, "method": method}


def record(ms: float, ref_ms: float | None = None, std: float = 0.0, method: str | None = None) -> dict:
    """An EvalResult as stored: the candidate's and (when given) the reference's timing."""
    r = {"status": "correct", "correct": True, "timing": stats(ms, std * ms, method)}
    if ref_ms is not None:
        r["reference_timing"] = stats(ref_ms, std * ref_ms, method)
    return r


def program(pid: int | None, speedup: float | None, ev: dict | None = None, status="correct", flags=()) -> Program:
    return Program(pid or 0, 0, "rewrite", "x", status, speedup=speedup, flags=list(flags), eval=ev, id=pid)


def test_each_method_has_a_floor_of_its_own():
    assert set(METHOD_FLOOR) == {"cuda_graph", "cuda_events_sync", "eager_stream", "cpu_wall", "cpu_eager"}
    five_us = 0.005
    # floor = relative + absolute / median, when the record's own spread is smaller
    assert relative_noise(stats(five_us, method="cuda_graph")) == pytest.approx(0.01 + 0.0002 / five_us)  # 5%
    assert relative_noise(stats(five_us, method="cuda_events_sync")) == pytest.approx(0.01 + 0.02 / five_us)
    assert relative_noise(stats(five_us, method="eager_stream")) == pytest.approx(0.02 + 0.002 / five_us)
    assert relative_noise(stats(five_us, method="cpu_wall")) == pytest.approx(0.30)
    assert relative_noise(stats(five_us, method="cpu_eager")) == pytest.approx(0.30)
    # the absolute part fades at long times: a 1 ms graph replay is good to about 1%
    assert relative_noise(stats(1.0, method="cuda_graph")) == pytest.approx(0.0102)
    # a record that spread more than its method's floor keeps its own spread
    assert relative_noise(stats(1.0, std_ms=0.08, method="cuda_graph")) == pytest.approx(0.08)


def test_records_of_older_versions_keep_their_own_spread():
    assert relative_noise(stats(2.0, std_ms=0.1)) == pytest.approx(0.05)  # no method: std / median
    assert relative_noise(stats(2.0)) == 0.0
    assert relative_noise(stats(2.0, std_ms=0.1, method="a_future_method")) == pytest.approx(0.05)
    assert relative_noise(TimingStats.from_samples([1.9, 2.0, 2.1])) == pytest.approx(0.05)  # the model itself
    assert relative_noise(None) == 0.0
    assert relative_noise({"std_ms": 1.0, "method": "cuda_graph"}) == 0.0  # no median
    assert relative_noise(stats(0.0, method="cuda_graph")) == 0.0
    # a verdict's speedup moves with its candidate's and its reference's times
    assert speedup_noise(record(0.005, 0.01, method="cuda_graph")) == pytest.approx(0.05 + 0.03)
    assert speedup_noise(record(2.0, 4.0, std=0.05)) == pytest.approx(0.10)
    assert speedup_noise(record(2.0, std=0.05)) == pytest.approx(0.05)  # no reference timing stored
    assert speedup_noise(None) == speedup_noise({}) == 0.0
    stored = EvalResult(
        status=Status.correct, correct=True, speedup=2.0, timing=TimingStats.from_samples([0.95, 1.0, 1.05])
    ).model_dump(mode="json")
    assert speedup_noise(stored) == pytest.approx(0.05)
    assert beyond_noise(1.11, 1.0, 0.1) and not beyond_noise(1.1, 1.0, 0.1) and beyond_noise(1.01, 1.0, 0.0)


def test_a_program_improves_on_another_only_beyond_both_noises():
    # 5% per candidate (1% + 0.2 us of 5 us): 10% between two; one cached reference cancels
    noisy = record(0.005, 0.01, method="cuda_graph")
    old = program(1, 2.0, noisy)
    assert not improves_on(program(2, 2.15, noisy), old)  # 2.15 < 2.0 * 1.10
    assert improves_on(program(2, 2.25, noisy), old)
    assert improves_on(program(2, 2.3, None), program(1, 2.0, None))  # no records: any higher speedup
    assert not improves_on(program(2, 2.0, None), program(1, 2.0, None))  # as fast is no gain
    # the same gain is inside the noise of a 5 us kernel and beyond that of a 1 ms one
    steady = record(1.0, 2.0, method="cuda_graph")
    assert improves_on(program(2, 2.1, steady), program(1, 2.0, steady))
    assert not improves_on(program(2, 2.1, noisy), program(1, 2.0, noisy))
    # any success improves on no best, and on a program that is not a success; a failure never improves
    assert improves_on(program(1, 0.5, noisy), None)
    assert improves_on(program(2, 0.5), program(1, 9.0, status="incorrect"))
    assert not improves_on(program(2, 9.0, status="incorrect"), None)
    assert not improves_on(program(2, 9.0, flags=["torch_fallback"]), program(1, 1.0))
    assert improves_on(program(2, None), program(1, 0.5))  # not measured: counts as 1.0, as its score does


def test_the_best_is_replaced_only_beyond_noise():
    noisy = record(0.005, 0.01, method="cuda_graph")  # 10% between two programs
    first = program(1, 2.0, noisy)
    within = program(2, 2.2, noisy)  # faster, but within noise of the first
    beyond = program(3, 2.6, noisy)
    slower = program(4, 1.5, noisy)
    wrong = program(5, 9.0, noisy, status="incorrect")
    assert best_of([first, within]) is first
    assert best_of([first, within, beyond, slower, wrong]) is beyond
    assert best_of([within, first]) is first  # stored order (ids), not the order given
    assert best_of([wrong]) is None and best_of([]) is None
    assert list(running_best([wrong, first, within, beyond])) == [None, first, first, beyond]
    # each step is against the best so far: 2.2 does not replace 2.0, so 2.45 is measured against 2.0
    assert best_of([first, within, program(6, 2.45, noisy)]).id == 6
    # where the records do not say how far the times move, the faster one is the best (as before)
    assert best_of([program(1, 2.0), program(2, 2.01)]).id == 2
    assert best_of([program(1, 2.0), program(2, 2.0)]).id == 1  # ties: the earlier


def test_sft_requires_a_gain_beyond_the_method_floors():
    graph = record(0.005, 0.01, method="cuda_graph")  # 5% per candidate; one reference measurement
    parent, child = program(1, 1.0, graph), program(2, 1.15, graph)
    assert required_gain(parent, child) == pytest.approx(1.10)
    assert required_gain(parent, child, min_gain=1.1) == pytest.approx(1.1 * 1.10)
    # the same times stored by an older version (no method, no spread) require no margin, as before
    old = record(0.005, 0.01)
    assert required_gain(program(1, 1.0, old), program(2, 1.15, old)) == 1.0
    assert required_gain(program(1, 1.0, record(2.0, std=0.05)), program(2, 1.2, None)) == pytest.approx(1.05)


def test_a_shared_reference_cancels_in_the_ratio_of_two_speedups():
    from kernelsmith.evaluate.measuring.noise import pair_noise

    a = record(0.005, 0.01, method="cuda_graph")
    b = record(0.004, 0.01, method="cuda_graph")
    cand_a, cand_b = relative_noise(a["timing"]), relative_noise(b["timing"])
    assert pair_noise(a, b) == pytest.approx(cand_a + cand_b)  # one cached reference measurement
    c = {**b, "reference_ms": 0.011}
    assert pair_noise(a, c) == pytest.approx(speedup_noise(a) + speedup_noise(c))


def test_a_measured_cpu_floor_replaces_the_assumed_one():
    """Issue 46, item 3: the CPU's 30% is an assumption; a run's measured floor (one program's spread
    over its evaluations, (max - min) / min) replaces it in every comparison of the run's programs."""
    from kernelsmith.evaluate.measuring.noise import NoiseFloor, floors_of, pair_noise

    floor = NoiseFloor.measured("cpu_wall", [10.0, 12.0, 11.0], iteration=0)
    assert floor.origin == "measured" and floor.relative == pytest.approx(0.2)
    floors = floors_of(floor.model_dump(mode="json"))  # as the run store keeps it
    assert floors == {"cpu_wall": pytest.approx(0.2)} and floors_of(floor) == floors
    cpu = record(10.0, 1.0, method="cpu_wall")
    assert relative_noise(cpu["timing"]) == pytest.approx(0.30)  # assumed
    assert relative_noise(cpu["timing"], floors) == pytest.approx(0.20)  # measured
    assert relative_noise(record(10.0, method="cpu_wall", std=0.5)["timing"], floors) == pytest.approx(0.5)  # own
    assert relative_noise(stats(0.005, method="cuda_graph"), floors) == pytest.approx(0.05)  # other methods keep theirs
    assert pair_noise(cpu, cpu, floors) == pytest.approx(0.4) and speedup_noise(cpu, floors) == pytest.approx(0.4)
    # 1.5x: noise by the assumed floor (1 + 0.3 + 0.3), a gain by a measured 20% (1 + 0.2 + 0.2)
    old, new = program(1, 1.0, cpu), program(2, 1.5, cpu)
    assert not improves_on(new, old) and improves_on(new, old, floors)
    assert best_of([old, new]) is old and best_of([old, new], floors) is new
    assert list(running_best([old, new], floors)) == [old, new]
    assert required_gain(old, new, floors=floors) == pytest.approx(1.4)
    # a loaded machine: the measured floor is wider than the assumption, and 2x is noise there
    loaded = floors_of(NoiseFloor.measured("cpu_wall", [10.0, 40.0, 20.0]))
    assert loaded == {"cpu_wall": pytest.approx(3.0)} and not improves_on(program(2, 2.0, cpu), old, loaded)
    # an assumed floor (the measurement failed) or none: the constant
    assumed = NoiseFloor.assumed("cpu_wall", "evaluation 2 of iteration 0 ended timeout, not a timed success")
    assert assumed.relative == METHOD_FLOOR["cpu_wall"][0] and floors_of(assumed) == {} and floors_of(None) == {}
