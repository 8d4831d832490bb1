"""When two figures with spreads agree (kernelsmith/apply/gains.py): overlapping spreads narrow enough to
say anything; spreads that do not overlap disagree; overlapping spreads too wide to compare cannot tell."""

from __future__ import annotations

import pytest

from kernelsmith.apply.forward_time import Spread
from kernelsmith.apply.gains import AGREES, CANNOT_TELL, DISAGREES, TELL_SPREAD, CaptureTime, Prediction, agreement


def test_overlapping_narrow_spreads_agree_and_apart_they_disagree():
    assert agreement((1.0, 1.1), (1.05, 1.2)) == AGREES
    assert agreement((1.0, 1.1), (1.2, 1.3)) == DISAGREES
    assert agreement((1.2, 1.3), (1.0, 1.1)) == DISAGREES
    assert agreement((1.0, 1.0), (1.0, 1.0)) == AGREES  # no spread at all: one figure each, the same
    # widened by a floor, two figures 8 % apart overlap
    assert agreement((1.0, 1.0), (1.08, 1.08)) == DISAGREES
    assert agreement((1.0, 1.0), (1.08, 1.08), widen=0.05) == AGREES


@pytest.mark.parametrize(
    "wide, inside",
    [
        ((0.0004, float("inf")), (1.0, 1.05)),
        ((0.0, 1.0), (0.5, 0.52)),
        ((0.5, 0.5 * TELL_SPREAD * 1.01), (0.6, 0.62)),
        ((0.031, 12.0), (5.0, 5.2)),
    ],
    ids=["infinite", "zero", "just-past-the-bound", "300x"],
)
def test_a_spread_too_wide_to_compare_cannot_tell(wide, inside):
    assert agreement(wide, inside) == CANNOT_TELL and agreement(inside, wide) == CANNOT_TELL


def test_a_spread_at_the_bound_is_still_told():
    assert agreement((0.5, 0.5 * TELL_SPREAD), (0.6, 0.62)) == AGREES


def test_a_prediction_with_an_infinite_bound_cannot_tell():
    """Issue 46: "predicted 0.0009x (0.0004-inf)" was printed as agreeing with the measurement."""
    p = Prediction("CPU time", 0.5, 0.0009, 0.0004, float("inf"), 0.003, 0.002, 0.004)
    assert p.agreement == CANNOT_TELL and not p.agrees
    p = Prediction("device time", 0.3, 1.05, 1.03, 1.07, 1.04, 1.02, 1.06)
    assert p.agreement == AGREES and p.agrees
    p = Prediction("device time", 0.3, 1.25, 1.2, 1.31, 1.04, 1.02, 1.06)
    assert p.agreement == DISAGREES and not p.agrees


def test_capture_and_apply_times_300x_apart_never_agree():
    """Issue 46: capture's 0.031 ms and apply's 9.9 ms were said to agree (their spreads, widened, overlapped)."""
    wide = CaptureTime("CPU time", Spread(0.031, 0.02, 8.0), Spread(9.9, 6.0, 14.0))
    assert wide.agreement == CANNOT_TELL and not wide.agrees
    apart = CaptureTime("CPU time", Spread(0.031, 0.03, 0.033), Spread(9.9, 9.0, 10.5))
    assert apart.agreement == DISAGREES and not apart.agrees
    close = CaptureTime("device time", Spread(0.894, 0.89, 0.90), Spread(0.887, 0.88, 0.89))
    assert close.agreement == AGREES and close.agrees
