"""Suite metrics: pure functions over per-task outcomes `(success, speedup)`.

An outcome's `success` is the caller's verdict for the task (for `kernelsmith bench`: status
"correct" and no integrity flag; a flagged correct kernel is a failure in every metric here).
`speedup` is reference time / candidate time, or None when there is none (a failed task, or a
baseline that was not timed). Every rate is over ALL tasks, failures included, so a suite's
numbers do not improve by failing the hard tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

Outcome = tuple[bool, float | None]

# The thresholds KernelBench reports (fast_0 = correctness, fast_1 = faster than PyTorch), plus
# 1.5 and 2; keys are the thresholds written as `f"{p:g}"`: "0", "1", "1.5", "2".
FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)


def threshold_key(p: float) -> str:
    """The dictionary key of threshold p: 0.0 -> "0", 1.5 -> "1.5"."""
    return f"{p:g}"


def correct_rate(outcomes: Sequence[Outcome]) -> float:
    """Fraction of all tasks that succeeded; 0.0 for no tasks."""
    if not outcomes:
        return 0.0
    return sum(1 for ok, _ in outcomes if ok) / len(outcomes)


def fast_p(outcomes: Sequence[Outcome], p: float) -> float:
    """Fraction of ALL tasks that succeeded AND have a speedup strictly greater than p.

    This is KernelBench's `fastp` (ScalingIntelligence/KernelBench, src/score.py): it keeps the
    correct samples, computes `speed_up = baseline / actual`, counts `np.sum(speed_up > p)` and
    divides by n, the number of ALL samples (0 when n is 0). Its unit test
    (src/kernelbench/unit_tests/test_score.py) pins the strict inequality: a correct sample with
    speedup exactly 1.0 does not count towards fast_1. So fast_0 is the correctness rate, and a
    speedup equal to p does not clear p. A success without a speedup (None) clears no threshold.
    """
    if not outcomes:
        return 0.0
    hits = sum(1 for ok, s in outcomes if ok and s is not None and s > p)
    return hits / len(outcomes)


def fast_p_table(outcomes: Sequence[Outcome], thresholds: Iterable[float] = FAST_P_THRESHOLDS) -> dict[str, float]:
    """fast_p for each threshold, keyed by `threshold_key`."""
    return {threshold_key(p): fast_p(outcomes, p) for p in thresholds}


def amsr(outcomes: Sequence[Outcome]) -> float:
    """Average speedup over ALL tasks, a failure or a speedup below 1 counting as 0.

    As Kernel-Smith (arXiv 2603.28342) reports it: "mean speedup with speedups below 1 counted
    as 0". A speedup of exactly 1 counts as 1. A success without a speedup counts as 0. 0.0 for
    no tasks.
    """
    if not outcomes:
        return 0.0
    total = sum(s for ok, s in outcomes if ok and s is not None and s >= 1.0)
    return total / len(outcomes)


def geomean_speedup(outcomes: Sequence[Outcome]) -> float | None:
    """Geometric mean of the speedups of the successful tasks (those with a speedup).

    None when no task succeeded with a speedup: a mean over nothing is not a number to print.
    Unlike the rates above, this is over successes only (KernelBench's
    `geometric_mean_speed_ratio_correct_only`), so read it together with correct_rate.
    """
    speedups = [s for ok, s in outcomes if ok and s is not None and s > 0]
    if not speedups:
        return None
    return math.exp(sum(math.log(s) for s in speedups) / len(speedups))
