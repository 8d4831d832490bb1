"""The forward's time as apply and optimize say it (issue 55): a spread that one outlier cannot stretch, so
that a 107x slowdown is never "within noise"; and a verdict over several modes that names the mode of each
slowdown it reports."""

from __future__ import annotations

import pytest

from kernelsmith.apply.e2e import E2E
from kernelsmith.apply.forward_time import Spread, Timing
from kernelsmith.apply.gains import Part, slowdowns
from kernelsmith.apply.patch_dir import Chosen
from kernelsmith.apply.run import Applied

# `make demo-optimize` on a loaded machine: ten forwards each, before one of them 336.5 ms, after one 300 ms
BEFORE = [6.6, 6.7, 6.75, 6.786, 6.8, 6.9, 7.0, 7.1, 1.196, 336.5]
AFTER = [300.0, 705.0, 710.0, 720.0, 726.2, 726.2, 730.0, 735.0, 740.0, 750.0]


def test_the_spread_leaves_out_the_lowest_and_highest_quarter():
    s = Spread.of(BEFORE)
    assert s.median == pytest.approx(6.793) and (s.low, s.high) == (6.7, 7.0)  # two left out at each end
    assert Spread.of([1.0, 2.0, 100.0]) == Spread(2.0, 2.0, 2.0)  # three: one each end, the median alone
    assert Spread.of([1.0, 100.0]) == Spread(50.5, 1.0, 100.0)  # two: nothing can be left out
    assert Spread.of([3.0]) == Spread(3.0, 3.0, 3.0)
    five = Spread.of([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (five.low, five.high) == (2.0, 4.0)


def test_one_outlier_does_not_make_a_107x_slowdown_within_noise():
    t = Timing("CPU time", Spread.of(BEFORE), Spread.of(AFTER))
    assert min(AFTER) <= max(BEFORE)  # a min-max spread overlapped: "within noise"
    assert not t.within_noise and t.speedup == pytest.approx(6.793 / 726.2)
    e = E2E(outputs_match=True, mismatch=None, max_abs_err=0.0, trials=3, timings=[t])
    (slow,) = slowdowns(e, {}, None)  # the slower rule reads the same spreads: slower beyond both
    assert slow.accepted == "relative only: CPU times say nothing of a GPU's"


def _check(mode: str, before: list[float], after: list[float]) -> E2E:
    e = E2E(outputs_match=True, mismatch=None, max_abs_err=0.0, trials=3, mode=mode)
    e.timings = [Timing("CPU time", Spread.of(before), Spread.of(after))]
    e.fired = {"gelu": 1.0}
    return e


def test_a_verdict_over_two_modes_names_the_mode_of_its_slowdown():
    """Issue 55: "... compile: outputs ..., but the patched forward is slower: CPU time ..." read the eager
    slowdown as compile mode's."""
    eager, compiled = _check("eager", BEFORE, AFTER), _check("compile", [5.0] * 4, [5.0] * 4)
    kernels = [Chosen("runs/gelu", "gelu", 0.3, 1, 0.01, 1)]
    applied = Applied(
        out_dir="p", entry="m.py:make", device="cpu", kernels=kernels, e2e=eager, checks=[eager, compiled]
    )
    applied.slower = [s for e in applied.checks for s in slowdowns(e, {"gelu": Part(0.3, 1, 0.01)}, "CPU time")]
    passed, reason = applied.verdict()
    assert passed
    assert reason == (
        "passed in eager: outputs within the flat tolerance, its kernels took their regions; compile: outputs within "
        "the flat tolerance, its kernels took their regions, but the patched forward is slower: CPU time 6.793 -> "
        "726.2 ms per forward in eager mode (0.00935x) (relative only: CPU times say nothing of a GPU's)"
    )
